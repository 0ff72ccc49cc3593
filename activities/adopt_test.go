package activities

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// deadWorkersPoll has the stand-in poll's first attempt picked up by a worker that then
// dies holding the bot's lease (its liveness key held by no session), and starts this
// worker's liveness session; it returns the lease the dead attempt held.
func deadWorkersPoll(ctx context.Context, t *testing.T, h *harness, task *workflowservice.PollActivityTaskQueueResponse) store.PollLease {
	t.Helper()
	if err := h.store.RegisterPollWorker(ctx, "dead-worker", 4242); err != nil {
		t.Fatal(err)
	}
	l := store.PollLease{AccountKey: h.key, Holder: "dead-worker", Epoch: time.Now().UnixNano(), Attempt: task.GetAttempt(),
		HolderKey: 4242, TaskToken: task.GetTaskToken(), Generation: 1}
	if ok, _, err := h.store.TakePollLease(ctx, l, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	live := StartLiveness(h.acts)
	t.Cleanup(live.Stop)
	<-live.Ready()
	return l
}

// A dead worker's poll is adopted, not retried: the supervisor that finds the holder dead
// polls the bot in its own process under the dead attempt (no retry is handed out, so no
// retry timer or dispatch stands between the death and the next getupdates), commits
// what iLink hands it, and ends the attempt with the poll's result once the attempt's
// session is over.
func TestADeadWorkersPollIsAdoptedUnderItsAttemptAndEndsItWithThePollsResult(t *testing.T) {
	h := newHarness(t, func(o *options) { o.config = func(c *Config) { c.PollSession = 2 * time.Second } })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take, run := standInPollRun(ctx, t, h)
	task := take("dead-worker")
	deadWorkersPoll(ctx, t, h, task)
	h.inject(ilinksim.InjectRequest{Text: "written as the worker died"})

	if n, err := NewLeaseSupervisor(h.acts).Once(ctx); err != nil || n != 1 {
		t.Fatalf("the supervisor replaced %d polls (%v), want the dead worker's one adopted", n, err)
	}
	var res actapi.PollResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the adopted attempt ended with %v", err)
	}
	if res.Messages != 1 || res.Pages < 1 {
		t.Fatalf("the adopted attempt's result %+v, want the message written as the worker died", res)
	}
	iter := h.acts.Temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() != task.GetAttempt() {
			t.Fatalf("the poll ended on attempt %d, want the dead worker's attempt %d going on", a.GetAttempt(), task.GetAttempt())
		}
	}
	if c, err := h.store.CountPollLeases(ctx); err != nil || c.Live != 0 {
		t.Fatalf("leases after the adopted poll ended: %+v %v", c, err)
	}
}

// A worker that stops hands the polls it adopted over as it does its activities' polls:
// each ends after its long poll, releases the lease and fails its attempt with a retry
// Temporal hands out at once.
func TestAnAdoptedPollHandsItsBotOverWhenItsWorkerStops(t *testing.T) {
	h := newHarness(t, func(o *options) { o.config = func(c *Config) { c.PollSession = time.Hour } })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take, _ := standInPollRun(ctx, t, h)
	task := take("dead-worker")
	deadWorkersPoll(ctx, t, h, task)
	if n, err := NewLeaseSupervisor(h.acts).Once(ctx); err != nil || n != 1 {
		t.Fatalf("the supervisor replaced %d polls (%v), want the dead worker's one adopted", n, err)
	}
	if !h.acts.keeper().pollsRunning(h.key) {
		t.Fatal("the adopted poll does not count as running in this worker")
	}
	StopAdoptedPolls(h.acts, time.Minute)
	if h.acts.keeper().pollsRunning(h.key) {
		t.Fatal("the adopted poll still runs after the stop")
	}
	if got := take("live-worker").GetAttempt(); got != task.GetAttempt()+1 {
		t.Fatalf("after the stop: attempt %d handed out, want the retry %d", got, task.GetAttempt()+1)
	}
	if c, err := h.store.CountPollLeases(ctx); err != nil || c.Live != 0 {
		t.Fatalf("leases after the stop: %+v %v", c, err)
	}
	// A stopped worker adopts nothing more.
	if n, err := NewLeaseSupervisor(h.acts).adopt(ctx); err != nil || n != 0 {
		t.Fatalf("a stopped worker adopted %d polls (%v)", n, err)
	}
}
