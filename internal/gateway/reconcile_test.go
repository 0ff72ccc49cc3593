package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Reconcile against the real dev server and PostgreSQL, on a task queue that has no
// worker: nothing runs, so what reconcile started is exactly what the server holds.
func TestReconcileStartsPollersAndWindowsAndRecoversAttempts(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	queue := devserver.TaskQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	limits := store.DefaultLimits()
	st, err := store.New(dbtest.NewPool(t), testKeys, limits)
	if err != nil {
		t.Fatal(err)
	}
	installation, err := st.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inst := installation.ID
	now := time.Now().UTC()

	// Account A: two messages; the second supersedes the first's window. An agent session
	// on the open window reserved a send that a crash left pending.
	a := register(ctx, t, st, now)
	first := a.commit(ctx, t, st, now, now.Add(-2*time.Second), "hello")
	second := a.commit(ctx, t, st, now, now.Add(-time.Second), "are you there?")
	if first.Deliverable == nil || second.Deliverable == nil || !slices.Contains(second.RetiredWindowIDs, first.Deliverable.ReplyWindowID) {
		t.Fatalf("pages: %+v then %+v", first, second)
	}
	retired, open := first.Deliverable.ReplyWindowID, second.Deliverable.ReplyWindowID
	tok := sealing.NewSecret("agent-session-token-" + randomHex(t, 8))
	if _, err := st.OpenAgentSession(ctx, now, store.OpenSessionInput{ReplyWindowID: open, Token: tok}); err != nil {
		t.Fatal(err)
	}
	pending := reservePending(ctx, t, st, now, a, tok, "on my way")
	// Account B: active, idle. Account C: paused, so it gets no poller.
	b := register(ctx, t, st, now)
	c := register(ctx, t, st, now)
	if _, err := st.PauseAccount(ctx, now, c.key, c.generation, now.Add(time.Hour), "operator"); err != nil {
		t.Fatal(err)
	}

	rep, err := gateway.Reconcile(ctx, st, tc, queue)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	want := gateway.ReconcileReport{
		RecoveredAttempts: 1, Accounts: 2, PollersStarted: 2, PausedWithoutPoller: []string{c.key},
		Windows: 1, WindowsStarted: 1,
	}
	if !equalReports(rep, want) {
		t.Fatalf("report\n got %+v\nwant %+v", rep, want)
	}

	// The pollers exist, run on the queue, and got their generation.
	pollerRuns := map[string]string{}
	for _, acct := range []*bot{a, b} {
		id := wfapi.AccountPollerID(inst, acct.key)
		info := describe(ctx, t, tc, id)
		if info == nil || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
			info.GetType().GetName() != wfapi.AccountPollerWorkflow || info.GetTaskQueue() != queue {
			t.Fatalf("poller %s: %v", id, info)
		}
		runID := info.GetExecution().GetRunId()
		pollerRuns[id] = runID
		var in wfapi.PollerInput
		startInput(ctx, t, tc, id, runID, &in)
		if in.AccountKey != acct.key || in.Generation != acct.generation {
			t.Fatalf("poller input %+v", in)
		}
		sigs := signals(ctx, t, tc, id, runID)
		var rot wfapi.RotateSignal
		if len(sigs) != 1 || sigs[0].GetSignalName() != wfapi.SignalRotate ||
			testConverter.FromPayloads(sigs[0].GetInput(), &rot) != nil || rot.Generation != acct.generation {
			t.Fatalf("poller %s signals %v", id, sigs)
		}
	}
	if info := describe(ctx, t, tc, wfapi.AccountPollerID(inst, c.key)); info != nil {
		t.Fatalf("the paused account got a poller: %v", info)
	}

	// The open window has its workflow with the stored window's facts; the retired one none.
	windowID := wfapi.ReplyWindowID(inst, open)
	info := describe(ctx, t, tc, windowID)
	if info == nil || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		info.GetType().GetName() != wfapi.ReplyWindowWorkflow || info.GetTaskQueue() != queue {
		t.Fatalf("window workflow: %v", info)
	}
	windowRun := info.GetExecution().GetRunId()
	stored, err := st.GetWindow(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	var win wfapi.WindowInput
	startInput(ctx, t, tc, windowID, windowRun, &win)
	if win.ReplyWindowID != open || win.AccountKey != a.key || win.MessageKey != second.Deliverable.MessageKey ||
		!win.ExpiresAt.Equal(stored.ExpiresAt) || win.MaxSends != limits.MaxSends || !win.Deliverable || win.SendsUsed != 0 {
		t.Fatalf("window input %+v (stored %+v)", win, stored)
	}
	if info := describe(ctx, t, tc, wfapi.ReplyWindowID(inst, retired)); info != nil {
		t.Fatalf("the superseded window got a workflow: %v", info)
	}

	// The orphaned reservation was released and recorded.
	att, err := st.GetAttempt(ctx, pending.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if att.Status != vocab.AttemptFailed || att.ErrorCode != "abandoned_before_transmit" || att.FailType != vocab.FailReleased {
		t.Fatalf("attempt after reconcile %+v", att)
	}
	if stored.Reserved != 0 || stored.SendsLeft() != limits.MaxSends {
		t.Fatalf("window after reconcile %+v", stored)
	}

	// A second reconcile starts nothing new and does not fail. The pending attempt of a
	// window whose workflow runs is that workflow's to resume: it is left alone.
	reserve := func(text string) store.Attempt {
		t.Helper()
		return reservePending(ctx, t, st, now, a, tok, text)
	}
	owned := reserve("a live worker is about to send this")
	rep, err = gateway.Reconcile(ctx, st, tc, queue)
	if err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	want = gateway.ReconcileReport{
		PendingLeft: 1, Accounts: 2, PollersRunning: 2, PausedWithoutPoller: []string{c.key}, Windows: 1, WindowsRunning: 1,
	}
	if att, _ := st.GetAttempt(ctx, owned.AttemptID); att.Status != vocab.AttemptPending {
		t.Fatalf("attempt of a running window workflow is %s after reconcile, want pending", att.Status)
	}
	if !equalReports(rep, want) {
		t.Fatalf("second report\n got %+v\nwant %+v", rep, want)
	}
	for id, runID := range pollerRuns {
		if got := describe(ctx, t, tc, id).GetExecution().GetRunId(); got != runID {
			t.Fatalf("poller %s has a new run %s (was %s)", id, got, runID)
		}
	}
	if got := describe(ctx, t, tc, windowID).GetExecution().GetRunId(); got != windowRun {
		t.Fatalf("window workflow has a new run %s (was %s)", got, windowRun)
	}

	// Left longer than the grace, it is recovered all the same (its Send gave up).
	rep, err = gateway.ReconcileWithOptions(ctx, st, tc, gateway.ReconcileOptions{TaskQueue: queue,
		Now: func() time.Time { return now.Add(gateway.DefaultPendingGrace) }})
	if err != nil || rep.RecoveredAttempts != 1 || rep.PendingLeft != 0 {
		t.Fatalf("reconcile after the grace: %+v %v, want the attempt recovered", rep, err)
	}
	orphan := reserve("the window's workflow dies before this is sent")

	// A poller that died is started again (an active account always has one); a window
	// workflow that closed is not (REJECT_DUPLICATE) and is reported instead; the pending
	// attempt it left is recovered.
	aPoller := wfapi.AccountPollerID(inst, a.key)
	if err := tc.TerminateWorkflow(ctx, aPoller, "", "test: poller died"); err != nil {
		t.Fatal(err)
	}
	if err := tc.TerminateWorkflow(ctx, windowID, "", "test: window workflow died"); err != nil {
		t.Fatal(err)
	}
	rep, err = gateway.Reconcile(ctx, st, tc, queue)
	if err != nil {
		t.Fatalf("third reconcile: %v", err)
	}
	want = gateway.ReconcileReport{
		RecoveredAttempts: 1, Accounts: 2, PollersStarted: 1, PollersRunning: 1, PausedWithoutPoller: []string{c.key},
		Windows: 1, WindowsClosed: []int64{open},
	}
	if att, _ := st.GetAttempt(ctx, orphan.AttemptID); att.Status != vocab.AttemptFailed || att.ErrorCode != "abandoned_before_transmit" {
		t.Fatalf("attempt of a terminated window workflow: %+v, want recovered", att)
	}
	if !equalReports(rep, want) {
		t.Fatalf("third report\n got %+v\nwant %+v", rep, want)
	}
	if info := describe(ctx, t, tc, aPoller); info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		info.GetExecution().GetRunId() == pollerRuns[aPoller] {
		t.Fatalf("dead poller not restarted: %v", info)
	}
	if info := describe(ctx, t, tc, windowID); info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED ||
		info.GetExecution().GetRunId() != windowRun {
		t.Fatalf("closed window workflow was run again: %v", info)
	}
}

func TestReconcileRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := gateway.Reconcile(ctx, nil, nil, "q"); err == nil {
		t.Fatal("reconcile without a store and client ran")
	}
	st, err := store.New(dbtest.NewPool(t), testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := gateway.Reconcile(ctx, st, tc, ""); err == nil {
		t.Fatal("reconcile without a task queue ran")
	}
	// Pollers started through activities bound to another queue would run nowhere.
	acts := &activity.Activities{Store: st, Temporal: tc} // default queue "ilinkflow"
	_, err = gateway.ReconcileWithOptions(ctx, st, tc, gateway.ReconcileOptions{TaskQueue: "other", Activities: acts})
	if err == nil || !strings.Contains(err.Error(), "other") {
		t.Fatalf("reconcile with activities on another queue: %v", err)
	}
}

func equalReports(a, b gateway.ReconcileReport) bool {
	return a.RecoveredAttempts == b.RecoveredAttempts && a.PendingLeft == b.PendingLeft && a.Accounts == b.Accounts &&
		a.PollersStarted == b.PollersStarted && a.PollersRunning == b.PollersRunning &&
		slices.Equal(a.PausedWithoutPoller, b.PausedWithoutPoller) && a.Windows == b.Windows &&
		a.WindowsStarted == b.WindowsStarted && a.WindowsRunning == b.WindowsRunning &&
		slices.Equal(a.WindowsClosed, b.WindowsClosed) && a.WindowsTruncated == b.WindowsTruncated
}
