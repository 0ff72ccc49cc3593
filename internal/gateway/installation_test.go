package gateway_test

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Two installations (two databases) in one namespace, on a task queue without a worker so
// that what the reconciles did is exactly what the server holds. In installation A a
// window's workflow and an account's poller already run; installation B's first window has
// the same database serial as A's. Each reconcile finds its own workflows under its own
// ids, and neither touches the other's.
func TestReconcileLeavesAnotherInstallationsWorkflowsAlone(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	queue := devserver.TaskQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	limits := store.DefaultLimits()
	now := time.Now().UTC()

	// Installation A: account a with an open window and a reply a crash left pending; the
	// window's workflow and a's poller run.
	poolA := dbtest.NewPool(t)
	stA, err := store.New(poolA, testKeys, limits)
	if err != nil {
		t.Fatal(err)
	}
	instA, err := stA.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := register(ctx, t, stA, now)
	pageA := a.commit(ctx, t, stA, now, now.Add(-time.Second), "hello from A")
	if pageA.Deliverable == nil {
		t.Fatalf("page %+v", pageA)
	}
	window := pageA.Deliverable.ReplyWindowID
	tok := sealing.NewSecret("agent-session-token-" + randomHex(t, 8))
	if _, err := stA.OpenAgentSession(ctx, now, store.OpenSessionInput{ReplyWindowID: window, Token: tok}); err != nil {
		t.Fatal(err)
	}
	pending := reservePending(ctx, t, stA, now, a, tok, "on my way")
	stored, err := stA.GetWindow(ctx, window)
	if err != nil {
		t.Fatal(err)
	}
	aWindowWF, aPollerWF := instA.WindowWorkflowID(window), instA.PollerID(a.key)
	start := func(id, workflowType string, in any) string {
		t.Helper()
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, workflowType, in)
		if err != nil {
			t.Fatal(err)
		}
		return run.GetRunID()
	}
	aWindowRun := start(aWindowWF, wfapi.ReplyWindowWorkflow, wfapi.WindowInput{ReplyWindowID: window,
		AccountKey: a.key, MessageKey: stored.SourceMessageKey, ExpiresAt: stored.ExpiresAt, MaxSends: stored.MaxSends, Deliverable: true})
	aPollerRun := start(aPollerWF, wfapi.AccountPollerWorkflow, wfapi.PollerInput{AccountKey: a.key, Generation: a.generation})

	// Installation B: its first window has the serial of A's.
	stB, err := store.New(dbtest.NewPool(t), testKeys, limits)
	if err != nil {
		t.Fatal(err)
	}
	instB, err := stB.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if instB.ID == instA.ID {
		t.Fatalf("two databases share installation id %s", instA.ID)
	}
	c := register(ctx, t, stB, now)
	pageB := c.commit(ctx, t, stB, now, now.Add(-time.Second), "hello from B")
	if pageB.Deliverable == nil || pageB.Deliverable.ReplyWindowID != window {
		t.Fatalf("B's first page %+v: want window serial %d like A's", pageB, window)
	}

	// B's reconcile starts B's workflows, under B's ids, and touches nothing of A's.
	rep, err := gateway.Reconcile(ctx, stB, tc, queue)
	if err != nil {
		t.Fatalf("reconcile B: %v", err)
	}
	want := gateway.ReconcileReport{Accounts: 1, PollersStarted: 1, Windows: 1, WindowsStarted: 1}
	if !equalReports(rep, want) {
		t.Fatalf("B's report\n got %+v\nwant %+v", rep, want)
	}
	bWindowWF, bPollerWF := wfapi.ReplyWindowID(instB.ID, window), wfapi.AccountPollerID(instB.ID, c.key)
	bWindowRun, bPollerRun := running(ctx, t, tc, bWindowWF, queue), running(ctx, t, tc, bPollerWF, queue)
	untouched := func(id, runID string, wantSignals int) {
		t.Helper()
		info := describe(ctx, t, tc, id)
		if info.GetExecution().GetRunId() != runID || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("%s: %v, want run %s still running", id, info, runID)
		}
		if sigs := signals(ctx, t, tc, id, runID); len(sigs) != wantSignals {
			t.Fatalf("%s got %d signals, want %d", id, len(sigs), wantSignals)
		}
	}
	untouched(aWindowWF, aWindowRun, 0)
	untouched(aPollerWF, aPollerRun, 0)

	// A's reconcile finds its window's workflow running (and leaves its pending reply to
	// it), leaves its running poller as it is (no second run, no signal), and touches
	// nothing of B's.
	rep, err = gateway.Reconcile(ctx, stA, tc, queue)
	if err != nil {
		t.Fatalf("reconcile A: %v", err)
	}
	want = gateway.ReconcileReport{PendingLeft: 1, Accounts: 1, PollersRunning: 1, Windows: 1, WindowsRunning: 1}
	if !equalReports(rep, want) {
		t.Fatalf("A's report\n got %+v\nwant %+v", rep, want)
	}
	if att, err := stA.GetAttempt(ctx, pending.AttemptID); err != nil || att.Status != vocab.AttemptPending {
		t.Fatalf("pending reply of the running window: %+v %v, want left pending", att, err)
	}
	untouched(aWindowWF, aWindowRun, 0)
	untouched(aPollerWF, aPollerRun, 0)
	untouched(bWindowWF, bWindowRun, 0)
	untouched(bPollerWF, bPollerRun, 1) // the signal-with-start that started it
}

// running fails the test unless the latest run of id runs on queue, and returns its run id.
func running(ctx context.Context, t *testing.T, tc client.Client, id, queue string) string {
	t.Helper()
	info := describe(ctx, t, tc, id)
	if info == nil || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetTaskQueue() != queue {
		t.Fatalf("%s: %v, want it running on %s", id, info, queue)
	}
	return info.GetExecution().GetRunId()
}
