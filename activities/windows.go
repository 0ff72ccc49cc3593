package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// startWindow starts the ReplyWindow workflow of an opened window unless its id is taken;
// offer is the first hand-off when it was already made (nil: the workflow makes it).
func (a *Activities) startWindow(ctx context.Context, w WindowRef, offer *wfapi.Offer) error {
	cfg := a.cfg()
	_, err := StartWindow(ctx, a.Temporal, cfg.TaskQueue, WindowInput(w, cfg.ReofferAfter, a.Store.Limits().MaxSends, offer))
	return err
}

// WindowInput is the one ReplyWindow input of a window: the poll, the poller's
// SyncWindows and the start-up reconcile all start windows with it. defaultMaxSends is
// the quota of a reference recorded without one (older workers' histories).
func WindowInput(w WindowRef, reofferAfter time.Duration, defaultMaxSends int32, offer *wfapi.Offer) wfapi.WindowInput {
	maxSends := w.MaxSends
	if maxSends <= 0 {
		maxSends = defaultMaxSends
	}
	return wfapi.WindowInput{
		ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey,
		ExpiresAt: w.ExpiresAt, MaxSends: maxSends, SendsUsed: w.SendsUsed, Deliverable: w.Deliverable,
		ReofferAfter: reofferAfter, Offered: offer,
	}
}

// WindowOutcome is what StartWindow found.
type WindowOutcome int

// StartWindow outcomes.
const (
	// WindowStarted: a new ReplyWindow workflow started.
	WindowStarted WindowOutcome = iota + 1
	// WindowRunning: the window's workflow was already running.
	WindowRunning
	// WindowClosed: the window's workflow already ran and closed; none was started.
	WindowClosed
)

// String names the outcome.
func (o WindowOutcome) String() string {
	switch o {
	case WindowStarted:
		return "started"
	case WindowRunning:
		return "running"
	case WindowClosed:
		return "closed"
	}
	return "unknown"
}

// StartWindow is the one way a ReplyWindow workflow is started, with one set of options:
// unless its id is taken, a running workflow is left alone and a closed one is not run
// again (REJECT_DUPLICATE), so starting is idempotent and "already started" is not an
// error. Only when the id is taken does it ask Temporal which of the two it was.
func StartWindow(ctx context.Context, tc client.Client, taskQueue string, in wfapi.WindowInput) (WindowOutcome, error) {
	if tc == nil {
		return 0, errNoTemporal
	}
	id := wfapi.ReplyWindowID(in.ReplyWindowID)
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// FAIL plus the error below tells "already running" from "started", which
		// USE_EXISTING hides; the effect on a running workflow is the same: none.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, wfapi.ReplyWindowWorkflow, in)
	if err == nil {
		return WindowStarted, nil
	}
	if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return 0, fmt.Errorf("start window workflow %d: %w", in.ReplyWindowID, err)
	}
	d, err := tc.DescribeWorkflow(ctx, id, "")
	if err != nil && !isNotFound(err) {
		return 0, fmt.Errorf("describe %s: %w", id, err)
	}
	if err == nil && d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return WindowRunning, nil
	}
	return WindowClosed, nil
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
