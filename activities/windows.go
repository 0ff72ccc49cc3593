package activities

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// errNoTemporal is returned when an activity that starts or signals workflows runs
// without a Temporal client.
var errNoTemporal = temporal.NewNonRetryableApplicationError(
	"activities: no Temporal client configured", ErrTypeInvalidInput, nil)

// SyncWindows starts a ReplyWindow workflow for each opened window (idempotent) and
// signals each retired one to end (a window without a workflow is ignored).
func (a *Activities) SyncWindows(ctx context.Context, in WindowsInput) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	for _, w := range in.Opened {
		if err := a.startWindow(ctx, w, nil); err != nil {
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

// startWindow starts the ReplyWindow workflow of an opened window unless it runs already;
// offer is the first hand-off when it was already made (nil: the workflow makes it).
func (a *Activities) startWindow(ctx context.Context, w WindowRef, offer *wfapi.Offer) error {
	cfg := a.cfg()
	_, err := a.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       wfapi.ReplyWindowID(w.ReplyWindowID),
		TaskQueue:                cfg.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, wfapi.ReplyWindowWorkflow, wfapi.WindowInput{
		ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey,
		ExpiresAt: w.ExpiresAt, MaxSends: a.Store.Limits().MaxSends, Deliverable: w.Deliverable,
		ReofferAfter: cfg.ReofferAfter, Offered: offer,
	})
	if err != nil && !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return fmt.Errorf("start window workflow %d: %w", w.ReplyWindowID, err)
	}
	return nil
}

// signalRetired tells a window's workflow that the window was retired (a window without
// a running workflow is ignored).
func (a *Activities) signalRetired(ctx context.Context, id int64) error {
	err := a.Temporal.SignalWorkflow(ctx, wfapi.ReplyWindowID(id), "", wfapi.SignalRetired, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("signal retired window %d: %w", id, err)
	}
	return nil
}

// isNotFound reports whether a Temporal call failed because the workflow does not exist
// (or is already closed).
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// GetWindowState reads a window's stored state.
func (a *Activities) GetWindowState(ctx context.Context, windowID int64) (WindowState, error) {
	w, err := a.Store.GetWindow(ctx, windowID)
	if err != nil {
		return WindowState{}, storeErr("get window", err)
	}
	return WindowState{State: w.State, ExpiresAt: w.ExpiresAt, SendsLeft: w.SendsLeft()}, nil
}

// ExpireWindow retires a window whose expiry passed (idempotent).
func (a *Activities) ExpireWindow(ctx context.Context, in ExpireInput) (WindowState, error) {
	w, err := a.Store.ExpireWindow(ctx, nowOr(in.Now), in.ReplyWindowID)
	if err != nil {
		return WindowState{}, storeErr("expire window", err)
	}
	return WindowState{State: w.State, ExpiresAt: w.ExpiresAt, SendsLeft: w.SendsLeft()}, nil
}

// StartPoller starts the AccountPoller of an account generation, or tells the running one
// to rotate to it (signal-with-start).
func (a *Activities) StartPoller(ctx context.Context, in AccountRef) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	id := wfapi.AccountPollerID(in.AccountKey)
	_, err := a.Temporal.SignalWithStartWorkflow(ctx, id, wfapi.SignalRotate,
		wfapi.RotateSignal{Generation: in.Generation},
		client.StartWorkflowOptions{ID: id, TaskQueue: a.cfg().TaskQueue},
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
	for _, key := range accountKeys {
		err := a.Temporal.SignalWorkflow(ctx, wfapi.AccountPollerID(key), "", wfapi.SignalStop,
			wfapi.StopSignal{Reason: "account replaced or removed"})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("stop poller of %s: %w", key, err)
		}
	}
	return nil
}
