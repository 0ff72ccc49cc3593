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

	"github.com/ilinkflow/ilinkflow/actapi"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// errNoTemporal is returned when an activity that starts or signals workflows runs
// without a Temporal client.
var errNoTemporal = temporal.NewNonRetryableApplicationError(
	"activities: no Temporal client configured", actapi.ErrTypeInvalidInput, nil)

// SyncWindows starts a ReplyWindow workflow for each opened window (idempotent) and
// signals each retired one to end (a window without a workflow is ignored).
func (a *Activities) SyncWindows(ctx context.Context, in actapi.WindowsInput) error {
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
func (a *Activities) startWindow(ctx context.Context, w actapi.WindowRef, offer *wfapi.Offer) error {
	cfg := a.cfg()
	id, err := a.Store.WindowWorkflowID(ctx, w.ReplyWindowID)
	if err != nil {
		return storeErr("window workflow id", err)
	}
	_, err = StartWindow(ctx, a.Temporal, cfg.TaskQueue, id, WindowInput(w, cfg.ReofferAfter, a.Store.Limits().MaxSends, offer))
	return err
}

// WindowInput is the one ReplyWindow input of a window: the poll, the poller's
// SyncWindows and the start-up reconcile all start windows with it. defaultMaxSends is
// the quota of a reference recorded without one (older workers' histories).
func WindowInput(w actapi.WindowRef, reofferAfter time.Duration, defaultMaxSends int32, offer *wfapi.Offer) wfapi.WindowInput {
	maxSends := w.MaxSends
	if maxSends <= 0 {
		maxSends = defaultMaxSends
	}
	return wfapi.WindowInput{
		ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey, PeerID: w.PeerID,
		ExpiresAt: w.ExpiresAt, MaxSends: maxSends, SendsUsed: w.SendsUsed, Deliverable: w.Deliverable,
		ReofferAfter: wfapi.Duration(reofferAfter), Offered: offer,
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
// error. Only when the id is taken does it ask Temporal which of the two it was. id is the
// window's workflow id (store.Store.WindowWorkflowID: a window opened before
// installation ids keeps its legacy id).
func StartWindow(ctx context.Context, tc client.Client, taskQueue, id string, in wfapi.WindowInput) (WindowOutcome, error) {
	if tc == nil {
		return 0, errNoTemporal
	}
	if id == "" {
		return 0, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("start window workflow %d: no workflow id", in.ReplyWindowID), actapi.ErrTypeInvalidInput, nil)
	}
	_, err := tc.ExecuteWorkflow(ctx, wfapi.StartOptions(client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// FAIL plus the error below tells "already running" from "started", which
		// USE_EXISTING hides; the effect on a running workflow is the same: none.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, in.AccountKey, in.PeerID), wfapi.ReplyWindowWorkflow, in)
	if err == nil {
		return WindowStarted, nil
	}
	if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return 0, fmt.Errorf("start window workflow %s: %w", id, err)
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
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// ExpireWindow retires a window whose expiry passed (idempotent), cancels "typing" for its
// conversation and sweeps staged media past its retention.
func (a *Activities) ExpireWindow(ctx context.Context, in actapi.ExpireInput) (actapi.WindowState, error) {
	w, err := a.Store.ExpireWindow(ctx, nowOr(in.Now), in.ReplyWindowID)
	if err != nil {
		return actapi.WindowState{}, storeErr("expire window", err)
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
	return actapi.WindowState{State: w.State, ExpiresAt: w.ExpiresAt, SendsLeft: w.SendsLeft()}, nil
}

// StartPoller starts the AccountPoller of an account generation, or tells the running one
// to rotate to it: a poller still running under its legacy id is signalled, otherwise
// signal-with-start under the installation's id (the rule of wfapi.Installation.PollerIDs).
func (a *Activities) StartPoller(ctx context.Context, in actapi.AccountRef) error {
	if a.Temporal == nil {
		return errNoTemporal
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return storeErr("installation", err)
	}
	rotate := wfapi.RotateSignal{Generation: in.Generation}
	ids := inst.PollerIDs(in.AccountKey)
	for _, legacy := range ids[1:] {
		err := a.Temporal.SignalWorkflow(ctx, legacy, "", wfapi.SignalRotate, rotate)
		if err == nil {
			return nil
		}
		if !isNotFound(err) {
			return fmt.Errorf("signal poller %s: %w", legacy, err)
		}
	}
	_, err = a.Temporal.SignalWithStartWorkflow(ctx, ids[0], wfapi.SignalRotate, rotate,
		wfapi.StartOptions(client.StartWorkflowOptions{ID: ids[0], TaskQueue: a.cfg().TaskQueue}, in.AccountKey, ""),
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
		_, err := SignalPoller(ctx, a.Temporal, inst, key, wfapi.SignalStop, wfapi.StopSignal{Reason: "account replaced or removed"})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("stop poller of %s: %w", key, err)
		}
	}
	return nil
}

// SignalPoller signals an account's poller under the rule of wfapi.Installation.PollerIDs:
// the installation's poller id first and, when no such workflow runs, the legacy one. It
// returns the workflow id signalled; when no poller runs, the error is the
// *serviceerror.NotFound of the last id tried.
func SignalPoller(ctx context.Context, tc client.Client, inst wfapi.Installation, accountKey, signal string, arg any) (string, error) {
	if tc == nil {
		return "", errNoTemporal
	}
	var err error
	for _, id := range inst.PollerIDs(accountKey) {
		if err = tc.SignalWorkflow(ctx, id, "", signal, arg); err == nil {
			return id, nil
		}
		if !isNotFound(err) {
			return "", fmt.Errorf("signal poller %s: %w", id, err)
		}
	}
	return "", err
}

// RunningPoller finds an account's running poller under the rule of
// wfapi.Installation.PollerIDs and returns its workflow id and run id; id is "" when no
// poller runs.
func RunningPoller(ctx context.Context, tc client.Client, inst wfapi.Installation, accountKey string) (id, runID string, err error) {
	if tc == nil {
		return "", "", errNoTemporal
	}
	for _, id := range inst.PollerIDs(accountKey) {
		d, err := tc.DescribeWorkflow(ctx, id, "")
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("describe %s: %w", id, err)
		}
		if d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return id, d.WorkflowExecution.RunID, nil
		}
	}
	return "", "", nil
}

// WindowRefOf is the reference of an open window as the store describes it.
func WindowRefOf(o store.OpenedWindow) actapi.WindowRef {
	return actapi.WindowRef{ReplyWindowID: o.ReplyWindowID, AccountKey: o.AccountKey, MessageKey: o.MessageKey, PeerID: o.PeerID,
		ExpiresAt: o.ExpiresAt, Deliverable: o.Deliverable, MaxSends: o.MaxSends, SendsUsed: o.SendsUsed}
}
