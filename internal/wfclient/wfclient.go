// Package wfclient starts, signals and finds ilinkflow's workflows through a Temporal
// client: the one way a ReplyWindow workflow is started (LaunchWindow, with its first
// offer), and the poller lookups under the installation's workflow ids. The activities,
// the worker's start-up reconcile and the operator's commands share it.
package wfclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// ErrNoTemporal is returned when there is no Temporal client to start or signal with.
var ErrNoTemporal = temporal.NewNonRetryableApplicationError(
	"no Temporal client configured", activities.ErrTypeInvalidInput, nil)

// IsNotFound reports whether err is Temporal's "no such workflow".
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// windowInput is the one ReplyWindow input of a window (LaunchWindow's); offer is the
// first offer made before the start (nil: none).
func windowInput(w activities.WindowRef, reofferAfter time.Duration, offer *wfapi.Offer) wfapi.WindowInput {
	return wfapi.WindowInput{
		ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey, PeerID: w.PeerID,
		ExpiresAt: w.ExpiresAt, MaxSends: w.MaxSends, SendsUsed: w.SendsUsed, Deliverable: w.Deliverable,
		FinalSlots: w.FinalSlots, HeldWaiting: w.HeldWaiting, RemindBefore: wfapi.Duration(w.RemindBefore), ReofferAfter: wfapi.Duration(reofferAfter), Offered: offer,
	}
}

// WindowOutcome is what startWindow found.
type WindowOutcome int

// startWindow outcomes.
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

// WindowLaunch is what LaunchWindow needs to give a window its ReplyWindow workflow.
type WindowLaunch struct {
	// Temporal and TaskQueue are where the workflow starts.
	Temporal  client.Client
	TaskQueue string
	// WorkflowID is the window's workflow id (store.Store.WindowWorkflowID).
	WorkflowID string
	// Window is the window as the store opened it; ReofferAfter is the worker's
	// re-offer interval (WindowInput).
	Window       activities.WindowRef
	ReofferAfter time.Duration
	// HandOff makes the window's first offer before its workflow starts (the HandOff
	// activity's function, run in the caller's process). Only the caller whose commit
	// opened the window just now sets it: no workflow and no agent session of the window
	// can exist yet, so the offer is surely the first. nil (a sync or reconcile, which
	// may find the workflow running): no offer before the start, and the workflow offers
	// at once.
	HandOff func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error)
}

// LaunchWindow is the one function that gives a window its ReplyWindow workflow, whoever
// asks (the poll that opened it, the poller's SyncWindows, the start-up reconcile), and
// the one place a first offer is made outside the workflow: with l.HandOff set, a
// deliverable window's message is handed off first (firstOffer) and the workflow starts
// with the outcome (wfapi.WindowInput.Offered), which costs it no HandOff activity; the
// workflow itself makes an offer only when none came with its start. The start is
// startWindow's (idempotent).
func LaunchWindow(ctx context.Context, l WindowLaunch) (WindowOutcome, error) {
	var offer *wfapi.Offer
	if l.HandOff != nil && l.Window.Deliverable {
		offer = firstOffer(ctx, l.Window, l.HandOff)
	}
	return startWindow(ctx, l.Temporal, l.TaskQueue, l.WorkflowID, windowInput(l.Window, l.ReofferAfter, offer))
}

// firstOffer hands a window's message off before its workflow exists (attempt 1). It
// returns nil when the workflow must offer itself: a failure for now (its HandOff
// activity retries with back-off). A permanent failure (the activity marked the message
// failed) is an offer that failed, so that the workflow makes none.
func firstOffer(ctx context.Context, w activities.WindowRef,
	handOff func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error)) *wfapi.Offer {
	out, err := handOff(ctx, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1})
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrTypeHandOffFailed {
			return &wfapi.Offer{MessageKey: w.MessageKey, Failed: true}
		}
		return nil
	}
	return &wfapi.Offer{SessionID: out.SessionID, MessageKey: out.MessageKey, Delivered: out.Delivered,
		Replies: out.Replies, Handled: out.Handled}
}

// startWindow starts a ReplyWindow workflow, with one set of options; LaunchWindow is its
// one caller (TestAReplyWindowIsStartedFromOnePlace):
// unless its id is taken, a running workflow is left alone and a closed one is not run
// again (REJECT_DUPLICATE), so starting is idempotent and "already started" is not an
// error. Only when the id is taken does it ask Temporal which of the two it was. id is the
// window's workflow id (store.Store.WindowWorkflowID).
func startWindow(ctx context.Context, tc client.Client, taskQueue, id string, in wfapi.WindowInput) (WindowOutcome, error) {
	if tc == nil {
		return 0, ErrNoTemporal
	}
	if id == "" {
		return 0, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("start window workflow %d: no workflow id", in.ReplyWindowID), activities.ErrTypeInvalidInput, nil)
	}
	_, err := tc.ExecuteWorkflow(ctx, wfapi.StartOptions(client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// FAIL plus the error below tells "already running" from "started", which
		// USE_EXISTING hides; the effect on a running workflow is the same: none.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// Started from a worker of the task queue (the poll that opened the window), the
		// first workflow task comes back in the start's answer and runs here, without a
		// trip through matching: on a task queue of several partitions that trip is where
		// a first reply waited up to 2 s. Elsewhere (no worker of the queue in this
		// process) the start is an ordinary one.
		EnableEagerStart: true,
	}, in.AccountKey, in.PeerID), wfapi.ReplyWindowWorkflow, in)
	if err == nil {
		return WindowStarted, nil
	}
	if !temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return 0, fmt.Errorf("start window workflow %s: %w", id, err)
	}
	d, err := tc.DescribeWorkflow(ctx, id, "")
	if err != nil && !IsNotFound(err) {
		return 0, fmt.Errorf("describe %s: %w", id, err)
	}
	if err == nil && d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return WindowRunning, nil
	}
	return WindowClosed, nil
}

// SignalPoller signals an account's poller under the installation's poller id
// (wfapi.Installation.PollerID) and returns that id; when no poller runs, the error is
// Temporal's *serviceerror.NotFound (IsNotFound).
func SignalPoller(ctx context.Context, tc client.Client, inst wfapi.Installation, accountKey, signal string, arg any) (string, error) {
	if tc == nil {
		return "", ErrNoTemporal
	}
	id := inst.PollerID(accountKey)
	if err := tc.SignalWorkflow(ctx, id, "", signal, arg); err != nil {
		if IsNotFound(err) {
			return "", err
		}
		return "", fmt.Errorf("signal poller %s: %w", id, err)
	}
	return id, nil
}

// RunningWorkflowIDs lists, through Temporal's visibility, the ids of the running
// workflows whose id starts with prefix (one of wfapi's id prefixes): a few list calls
// where a lookup per workflow would cost a describe each. Visibility lags the workflows'
// starts and ends by a moment, so a caller treats the answer as a hint: an id missing from
// it is looked up (or started, idempotently) one by one.
func RunningWorkflowIDs(ctx context.Context, tc client.Client, prefix string) (map[string]bool, error) {
	if tc == nil {
		return nil, ErrNoTemporal
	}
	query := fmt.Sprintf("WorkflowId STARTS_WITH %q AND ExecutionStatus = 'Running'", prefix)
	ids := map[string]bool{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list running workflows %s*: %w", prefix, err)
		}
		for _, e := range resp.GetExecutions() {
			ids[e.GetExecution().GetWorkflowId()] = true
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return ids, nil
		}
	}
}

// RunningPoller finds an account's running poller (under wfapi.Installation.PollerID) and
// returns its workflow id and run id; id is "" when no poller runs.
func RunningPoller(ctx context.Context, tc client.Client, inst wfapi.Installation, accountKey string) (id, runID string, err error) {
	if tc == nil {
		return "", "", ErrNoTemporal
	}
	id = inst.PollerID(accountKey)
	d, err := tc.DescribeWorkflow(ctx, id, "")
	switch {
	case IsNotFound(err):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("describe %s: %w", id, err)
	case d.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "", "", nil
	}
	return id, d.WorkflowExecution.RunID, nil
}

// SignalAccountResumed tells the workflows of an account's open windows that the account
// is active again (wfapi.SignalAccountResumed), so that what a pause refused is offered
// to the agent again without waiting for the user to write. A window whose workflow is
// not running is skipped (its workflow, when started, hands off itself); the first other
// failure is returned after every window was tried.
func SignalAccountResumed(ctx context.Context, tc client.Client, inst wfapi.Installation, windowIDs []int64) error {
	if tc == nil {
		return ErrNoTemporal
	}
	var first error
	for _, id := range windowIDs {
		wid := inst.WindowWorkflowID(id)
		if err := tc.SignalWorkflow(ctx, wid, "", wfapi.SignalAccountResumed, nil); err != nil && !IsNotFound(err) && first == nil {
			first = fmt.Errorf("signal resumed window %s: %w", wid, err)
		}
	}
	return first
}

// FailDeadPollActivity fails the PollAccount activity of an account's running poller
// that Temporal counts as started by the worker identity (a worker found dead or frozen;
// "" for none) or, with a non-zero startedBefore, started before it by any worker not in
// atWork (the workers known to be at work, which take the lease in their own time), or,
// with a non-zero abandonedBefore, started before that by any worker (one at work that has
// not taken the lease since dropped the task), so that Temporal retries it (with cause's
// retry delay) on another worker. It reports whether there was one. An activity not
// started yet is left alone.
func FailDeadPollActivity(ctx context.Context, tc client.Client, namespace string, inst wfapi.Installation,
	accountKey, identity string, startedBefore time.Time, atWork map[string]bool, abandonedBefore time.Time, cause error) (bool, error) {
	if tc == nil {
		return false, ErrNoTemporal
	}
	id := inst.PollerID(accountKey)
	desc, err := tc.DescribeWorkflow(ctx, id, "")
	switch {
	case IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("describe %s: %w", id, err)
	}
	d := desc.RawResponse
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for _, pa := range d.GetPendingActivities() {
		byThat := identity != "" && pa.GetLastWorkerIdentity() == identity
		started := pa.GetLastStartedTime().AsTime()
		early := (!startedBefore.IsZero() && started.Before(startedBefore) && !atWork[pa.GetLastWorkerIdentity()]) ||
			(!abandonedBefore.IsZero() && started.Before(abandonedBefore))
		if pa.GetActivityType().GetName() != activities.PollAccount || pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED ||
			!(byThat || early) {
			continue
		}
		err := tc.CompleteActivityByID(ctx, namespace, id, runID, pa.GetActivityId(), nil, cause)
		switch {
		case IsNotFound(err):
			return false, nil // it ended meanwhile
		case err != nil:
			return false, fmt.Errorf("fail the dead poll activity of %s: %w", id, err)
		}
		return true, nil
	}
	return false, nil
}
