package activity

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// errNoTemporal is returned when an activity that starts or signals workflows runs
// without a Temporal client.
var errNoTemporal = temporal.NewNonRetryableApplicationError(
	"activities: no Temporal client configured", activities.ErrTypeInvalidInput, nil)

// SyncWindows starts a ReplyWindow workflow for each opened window (idempotent) and
// signals each retired one to end (a window without a workflow is ignored).
func (a *Activities) SyncWindows(ctx context.Context, in activities.WindowsInput) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	for _, w := range in.Opened {
		if err := a.startWindow(ctx, w, nil); err != nil { // the workflow may run: no offer before the start
			return err
		}
	}
	for _, id := range in.Retired {
		if err := a.signalRetired(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// startWindow gives an opened window its ReplyWindow workflow (wfclient.LaunchWindow,
// idempotent: a running workflow is left alone). handOff is the first offer's hand-off
// when the caller's commit opened the window just now (the poll); nil: the workflow
// offers.
func (a *Activities) startWindow(ctx context.Context, w activities.WindowRef,
	handOff func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error)) error {
	cfg := a.cfg()
	id, err := a.Store.WindowWorkflowID(ctx, w.ReplyWindowID)
	if err != nil {
		return storeErr("window workflow id", err)
	}
	_, err = wfclient.LaunchWindow(ctx, wfclient.WindowLaunch{Temporal: a.Temporal, TaskQueue: cfg.TaskQueue,
		WorkflowID: id, Window: w, ReofferAfter: cfg.ReofferAfter, HandOff: handOff})
	return err
}

// signalRetired tells a window's workflow that the window was retired (a window without
// a running workflow is ignored).
func (a *Activities) signalRetired(ctx context.Context, id int64) error {
	wid, err := a.Store.WindowWorkflowID(ctx, id)
	if err != nil {
		return storeErr("window workflow id", err)
	}
	err = a.Temporal.SignalWorkflow(ctx, wid, "", wfapi.SignalRetired, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("signal retired window %s: %w", wid, err)
	}
	return nil
}

// isNotFound reports whether a Temporal call failed because the workflow does not exist
// (or is already closed).
func isNotFound(err error) bool { return wfclient.IsNotFound(err) }

// ExpireWindow retires a window whose expiry passed (idempotent), cancels "typing" for its
// conversation and sweeps staged media past its retention.
func (a *Activities) ExpireWindow(ctx context.Context, in activities.ExpireInput) (activities.WindowState, error) {
	w, err := a.Store.ExpireWindow(ctx, nowOr(in.Now), in.ReplyWindowID)
	if err != nil {
		return activities.WindowState{}, storeErr("expire window", err)
	}
	if w.State == vocab.WindowExpired {
		a.stopTyping(ctx, w.AccountKey, w.PeerID)
	}
	// Window ends drive the retention of staged media replies (besides every staging).
	if n, err := a.Store.SweepMedia(ctx, now()); err != nil {
		a.log().Warn("staged media sweep failed", "error", err)
	} else if n > 0 {
		a.log().Info("staged media swept", "rows", n)
	}
	return activities.WindowState{State: w.State, ExpiresAt: w.ExpiresAt, SendsLeft: w.SendsLeft()}, nil
}

// StartPoller starts the AccountPoller of an account generation, or tells the running one
// to rotate to it (signal-with-start under the installation's poller id).
func (a *Activities) StartPoller(ctx context.Context, in activities.AccountRef) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return storeErr("installation", err)
	}
	id := inst.PollerID(in.AccountKey)
	_, err = a.Temporal.SignalWithStartWorkflow(ctx, id, wfapi.SignalRotate, wfapi.RotateSignal{Generation: in.Generation},
		wfapi.StartOptions(client.StartWorkflowOptions{ID: id, TaskQueue: a.cfg().TaskQueue}, in.AccountKey, ""),
		wfapi.AccountPollerWorkflow, wfapi.PollerInput{AccountKey: in.AccountKey, Generation: in.Generation, Config: a.Config.Poller})
	if err != nil {
		return fmt.Errorf("signal-with-start poller: %w", err)
	}
	return nil
}

// StopPollers tells the pollers of the given accounts to stop (a missing one is ignored).
func (a *Activities) StopPollers(ctx context.Context, accountKeys []string) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return storeErr("installation", err)
	}
	for _, key := range accountKeys {
		_, err := wfclient.SignalPoller(ctx, a.Temporal, inst, key, wfapi.SignalStop, wfapi.StopSignal{Reason: "account replaced or removed"})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("stop poller of %s: %w", key, err)
		}
	}
	return nil
}

// WindowRefOf is the reference of an open window as the store describes it.
func WindowRefOf(o store.OpenedWindow) activities.WindowRef {
	return activities.WindowRef{ReplyWindowID: o.ReplyWindowID, AccountKey: o.AccountKey, MessageKey: o.MessageKey, PeerID: o.PeerID,
		ExpiresAt: o.ExpiresAt, Deliverable: o.Deliverable, MaxSends: o.MaxSends, SendsUsed: o.SendsUsed,
		FinalSlots: o.FinalSlots, HeldWaiting: o.HeldWaiting, RemindBefore: o.RemindBefore}
}
