package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A pause ends with the context's error as soon as the context ends.
func TestAPauseEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("pause of an hour on a cancelled context: %v, want context.Canceled", err)
	}
	if err := For(context.Background(), 0); err != nil {
		t.Fatalf("pause of zero: %v", err)
	}
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("pause of 1ms: %v", err)
	}
}
