// Package pause waits for a duration unless a context ends first: the one sleep of the
// iLink client's retries and the activities' pacing.
package pause

import (
	"context"
	"time"
)

// For pauses for d, or until ctx is done (its error is returned then). A d of zero or
// less does not wait.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
