package activity

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// A supervisor that claimed a dead worker's lease while Temporal was unreachable still
// tells the bot's poller once Temporal is back: the claim freed the lease row, so no later
// scan would find it again, and the poller would wait for its dead activity's
// start-to-close timeout (20 minutes) before polling again. Found by the crash test's
// Temporal restart.
func TestALeaseClaimedWhileTemporalIsDownIsToldToThePollerWhenItIsBack(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dev := harnessTemporal(ctx, t, h)
	tc := h.acts.Temporal

	// A stand-in for the bot's poller under its workflow id: it reports the poll-lost
	// signal it gets.
	queue := devserver.TaskQueue(t)
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (wfapi.PollLostSignal, error) {
		var got wfapi.PollLostSignal
		workflow.GetSignalChannel(ctx, wfapi.SignalPollLost).Receive(ctx, &got)
		return got, nil
	}, workflow.RegisterOptions{Name: "poller-stand-in"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	inst, err := h.store.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: inst.PollerID(h.key), TaskQueue: queue}, "poller-stand-in")
	if err != nil {
		t.Fatal(err)
	}

	// A dead worker's lease, expired.
	dead := store.PollLease{AccountKey: h.key, Holder: "dead-worker", Epoch: 7, Attempt: 2}
	if ok, _, err := h.store.TakePollLease(ctx, dead, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if _, err := h.pool.Exec(ctx, "UPDATE poll_leases SET expires_at = clock_timestamp() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}

	sup := NewLeaseSupervisor(h.acts)
	if err := dev.Halt(); err != nil {
		t.Fatal(err)
	}
	down, cancelDown := context.WithTimeout(ctx, 3*time.Second)
	n, _ := sup.Once(down)
	cancelDown()
	if n != 0 {
		t.Fatalf("told %d pollers with Temporal down", n)
	}
	if live, expired, err := h.pollLeaseCounts(ctx); err != nil || expired != 0 || live != 0 {
		t.Fatalf("the lease was not claimed: %d live, %d expired %v", live, expired, err)
	}

	if err := dev.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for told := 0; told == 0; {
		if told, err = sup.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if told == 0 {
			if ctx.Err() != nil {
				t.Fatal("the poller was never told after Temporal came back")
			}
			pause := time.NewTimer(200 * time.Millisecond) // between scans, as the supervisor's ticker
			select {
			case <-pause.C:
			case <-ctx.Done():
			}
		}
	}
	var got wfapi.PollLostSignal
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got.Epoch != dead.Epoch || got.Attempt != dead.Attempt {
		t.Fatalf("the poller was told %+v, want epoch %d attempt %d", got, dead.Epoch, dead.Attempt)
	}
}

// A worker that stops drops a poll task its pollers received as the stop began (the SDK
// runs no task once stopping, on a server without graceful poll shutdown), and Temporal
// counts it as started there: without FailDroppedPolls the bot would wait out its poll's
// start-to-close. A poll that runs in the stopping worker is left alone.
func TestAPollTaskDroppedByAStoppingWorkerIsRetriedAtOnceAndARunningOneIsLeftAlone(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take := standInPoll(ctx, t, h)
	k := h.acts.keeper()
	// This worker's pollers receive the task and drop it (it is never run).
	if got := take(k.holder); got != 1 {
		t.Fatalf("first task: attempt %d, want 1", got)
	}

	// While a poll of the bot runs in this process, its activity is not failed.
	done := k.polling(h.key)
	if n, err := FailDroppedPolls(ctx, h.acts); err != nil || n != 0 {
		t.Fatalf("failed %d polls (%v) while the bot's poll runs here, want 0", n, err)
	}
	done()
	if n, err := FailDroppedPolls(ctx, h.acts); err != nil || n != 1 {
		t.Fatalf("failed %d polls (%v), want the dropped one", n, err)
	}
	// Retried at once: the next task of the queue is its second attempt.
	if got := take(k.holder); got != 2 {
		t.Fatalf("after FailDroppedPolls: attempt %d, want 2", got)
	}
}

// A poll handed on (or claimed from a dead worker) leaves its lease free and claimed;
// when the worker that picks its retry up dies before it takes the lease, the peer that
// marks that worker dead fails the retry at once, as for any poll it picked up: the
// recheck of claimed leases would find it only seconds later.
func TestAHandedOnPollPickedUpByAWorkerThatDiedBeforeItsLeaseIsRetriedAtOnce(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A lease handed on by its holder: free, claimed since now.
	l := store.PollLease{AccountKey: h.key, Holder: "busy-worker", Epoch: 1, Attempt: 1}
	if ok, _, err := h.store.TakePollLease(ctx, l, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if ok, err := h.store.HandOnPollLease(ctx, l); err != nil || !ok {
		t.Fatalf("hand on: %v %v", ok, err)
	}
	take := standInPoll(ctx, t, h)
	// The retry goes to a worker whose liveness key no session holds: it died.
	if err := h.store.RegisterPollWorker(ctx, "dead-worker", 4242); err != nil {
		t.Fatal(err)
	}
	if got := take("dead-worker"); got != 1 {
		t.Fatalf("first task: attempt %d, want 1", got)
	}
	if n, err := NewLeaseSupervisor(h.acts).Once(ctx); err != nil || n != 1 {
		t.Fatalf("the supervisor replaced %d polls (%v), want the dead worker's one", n, err)
	}
	if got := take("live-worker"); got != 2 {
		t.Fatalf("after the scan: attempt %d, want 2", got)
	}
}

// standInPoll starts a dev server and, under the bot's poller id, a stand-in poller that
// runs one PollAccount activity retried at once, whose worker runs no activity; it
// returns a function that takes the activity's next task as the named worker (its
// attempt), as a worker's pollers would, without running it.
func standInPoll(ctx context.Context, t *testing.T, h *harness) (take func(identity string) int32) {
	t.Helper()
	takeTask, _ := standInPollRun(ctx, t, h)
	return func(identity string) int32 {
		t.Helper()
		return takeTask(identity).GetAttempt()
	}
}

// standInPollRun is standInPoll's stand-in poller: take hands out the poll activity's
// next task (its attempt and task token) as the named worker; the run's result is the
// activity's.
func standInPollRun(ctx context.Context, t *testing.T, h *harness) (take func(identity string) *workflowservice.PollActivityTaskQueueResponse, run client.WorkflowRun) {
	t.Helper()
	harnessTemporal(ctx, t, h)
	tc, ns := h.acts.Temporal, h.acts.Config.Namespace
	queue := devserver.TaskQueue(t)
	w := worker.New(tc, queue, worker.Options{LocalActivityWorkerOnly: true})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (activities.PollResult, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Hour,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 5},
		})
		var res activities.PollResult
		err := workflow.ExecuteActivity(ctx, activities.PollAccount).Get(ctx, &res)
		return res, err
	}, workflow.RegisterOptions{Name: "poller-stand-in"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	inst, err := h.store.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err = tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: inst.PollerID(h.key), TaskQueue: queue}, "poller-stand-in")
	if err != nil {
		t.Fatal(err)
	}
	return func(identity string) *workflowservice.PollActivityTaskQueueResponse {
		t.Helper()
		resp, err := tc.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
			Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, Identity: identity})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetTaskToken()) == 0 {
			t.Fatal("no poll task handed out")
		}
		return resp
	}, run
}

// harnessTemporal starts a dev server for the test and gives h's activities a client of a
// fresh namespace on it.
func harnessTemporal(ctx context.Context, t *testing.T, h *harness) *devserver.Server {
	t.Helper()
	dev, err := devserver.New(ctx, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Stop(); err != nil {
			t.Errorf("devserver: stop: %v", err)
		}
	})
	ns, tc := dev.NewNamespace(t)
	h.acts.Temporal, h.acts.Config.Namespace = tc, ns
	return dev
}

// A poll task that a worker at work received and never ran (seen once in a chaos run) is
// left to that worker for a while, as a busy worker may take the lease seconds after the
// start, and then failed all the same by the recheck of its free lease: its bot would
// otherwise wait for the poll's start-to-close.
func TestAPollStartedByAWorkerAtWorkThatNeverTakesItsLeaseIsRetriedAfterAWhile(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take := standInPoll(ctx, t, h)
	live := StartLiveness(h.acts)
	t.Cleanup(live.Stop)
	<-live.Ready()
	k := h.acts.keeper()
	// The bot's last poll released its lease; the next one is picked up here and dropped.
	l := store.PollLease{AccountKey: h.key, Holder: k.holder, Epoch: 1, Attempt: 1}
	if ok, _, err := h.store.TakePollLease(ctx, l, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if ok, err := h.store.ReleasePollLease(ctx, l); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if got := take(k.holder); got != 1 {
		t.Fatalf("first task: attempt %d, want 1", got)
	}
	if err := h.store.TouchPollWorker(ctx, k.holder); err != nil {
		t.Fatal(err)
	}
	inst, err := h.store.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dueForRecheck := func() {
		t.Helper()
		if _, err := h.pool.Exec(ctx, "UPDATE poll_leases SET claimed_at = claimed_at - interval '1 minute' WHERE account_key = $1", h.key); err != nil {
			t.Fatal(err)
		}
	}
	s := NewLeaseSupervisor(h.acts)
	s.AbandonedAfter = time.Hour
	dueForRecheck()
	if n, err := s.stuck(ctx, inst); err != nil || n != 0 {
		t.Fatalf("failed %d polls (%v) that a worker at work started a moment ago, want 0", n, err)
	}
	s.AbandonedAfter = time.Millisecond
	testkit.Eventually(t, "the abandoned poll failed", 30*time.Second, func() (bool, error) {
		if err := h.store.TouchPollWorker(ctx, k.holder); err != nil { // the worker stays at work
			return false, err
		}
		dueForRecheck()
		n, err := s.stuck(ctx, inst)
		return n == 1, err
	})
	if got := take("live-worker"); got != 2 {
		t.Fatalf("after the recheck: attempt %d, want the retry 2", got)
	}
}
