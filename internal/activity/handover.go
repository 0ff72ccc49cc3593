package activity

import (
	"context"
	"errors"
	"fmt"

	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// HandOverLeases hands over the poll leases this worker still holds, for a worker that
// stops: each poll activity that ended on the stop already released its lease, and its
// poller scheduled the next poll on another worker at once; a poll still running (past
// the stop's grace) is stopped here, its lease row freed and its poller told to replace
// it (the poll-lost signal a lease supervisor sends for a dead worker), so that its bot is
// polled again at once instead of after the lease ttl. It returns how many leases it
// handed over, and an error naming those it could not (they expire as a dead worker's).
//
// It is a function, not a method: every method of Activities is registered as an activity.
func HandOverLeases(ctx context.Context, a *Activities) (int, error) {
	k := a.keeper()
	k.mu.Lock()
	held := make([]*pollLease, 0, len(k.held))
	for _, l := range k.held {
		held = append(held, l)
	}
	for _, l := range held {
		l.loseLocked("handed over: the worker stops")
	}
	k.mu.Unlock()
	if len(held) == 0 {
		return 0, nil
	}
	if a.Temporal == nil {
		return 0, errors.New("activities: handing leases over needs a Temporal client")
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the installation: %w", err)
	}
	var errs []error
	done := 0
	for _, l := range held {
		if _, err := a.Store.ReleasePollLease(ctx, l.claim); err != nil {
			errs = append(errs, fmt.Errorf("release the lease of %s: %w", l.claim.AccountKey, err))
			continue
		}
		_, err := wfclient.SignalPoller(ctx, a.Temporal, inst, l.claim.AccountKey, wfapi.SignalPollLost,
			wfapi.PollLostSignal{Epoch: l.claim.Epoch, Attempt: l.claim.Attempt})
		if err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("tell the poller of %s: %w", l.claim.AccountKey, err))
			continue
		}
		a.log().Info("poll lease handed over", "account", l.claim.AccountKey)
		done++
	}
	return done, errors.Join(errs...)
}

// FailDroppedPolls fails the poll activities Temporal handed this worker as it stopped and
// that it never ran, for a worker whose task pollers stopped: the SDK drops a task its
// poller receives once the stop began (on a server without graceful poll shutdown, as
// 1.29), and Temporal counts it as started here, so it would wait out its start-to-close.
// Among the bots whose lease is free, those whose poll activity Temporal counts as started
// by this worker and that no poll in this process runs are failed by ID, and retried at
// once on a live worker. It returns how many it failed. Peers do the same once this
// worker's liveness session ends (a worker marked dead), later.
func FailDroppedPolls(ctx context.Context, a *Activities) (int, error) {
	if a.Temporal == nil || a.Store == nil {
		return 0, nil
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the installation: %w", err)
	}
	k := a.keeper()
	return failUnleasedStartedBy(ctx, a, inst, k.holder, k.pollsRunning,
		pollRetry("PollHandedOver", handOverRetry, errHandedOver),
		"a poll activity handed to this worker as it stopped, never run, is retried on a live worker")
}
