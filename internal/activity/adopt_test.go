package activity

import (
	"context"
	"errors"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
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
	var res activities.PollResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the adopted attempt ended with %v", err)
	}
	if res.Messages != 1 || res.Pages < 1 {
		t.Fatalf("the adopted attempt's result %+v, want the message written as the worker died", res)
	}
	assertEndedOnAttempt(ctx, t, h, run, task.GetAttempt())
	if live, _, err := h.pollLeaseCounts(ctx); err != nil || live != 0 {
		t.Fatalf("leases after the adopted poll ended: %d live %v", live, err)
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
	if live, _, err := h.pollLeaseCounts(ctx); err != nil || live != 0 {
		t.Fatalf("leases after the stop: %d live %v", live, err)
	}
	// A stopped worker adopts nothing more.
	if n, err := NewLeaseSupervisor(h.acts).adopt(ctx); err != nil || n != 0 {
		t.Fatalf("a stopped worker adopted %d polls (%v)", n, err)
	}
}

// A frozen worker keeps its liveness session, so its poll is adopted only once its lease
// expired: the adopter polls the bot under the frozen worker's attempt and ends that
// attempt. The frozen worker, thawed, finds its lease lost before its next getupdates and
// leaves the attempt to the adopter (it sends Temporal no result of its own, which would
// end the attempt under the adopter's poll and have it retried).
func TestAFrozenWorkersExpiredPollIsAdoptedAndTheThawedWorkerLeavesItsAttemptToTheAdopter(t *testing.T) {
	h := newHarness(t, func(o *options) { o.config = func(c *Config) { c.PollSession = 10 * time.Second } })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take, run := standInPollRun(ctx, t, h)
	task := take("frozen-worker")

	// The frozen worker: its own process state (keeper and liveness session), the same
	// database, Temporal and iLink.
	frozen := &Activities{Store: h.store, Pool: h.pool, Config: h.acts.Config, Logger: h.acts.Logger, Temporal: h.acts.Temporal}
	frozenLive := StartLiveness(frozen)
	t.Cleanup(frozenLive.Stop)
	<-frozenLive.Ready()
	fk := frozen.keeper()
	fk.mu.Lock()
	frozenKey := fk.livenessKey
	fk.mu.Unlock()
	in := activities.PollInput{AccountKey: h.key, Generation: 1, LeaseEpoch: time.Now().UnixNano()}
	claim := store.PollLease{AccountKey: h.key, Holder: fk.holder, Epoch: in.LeaseEpoch, Attempt: task.GetAttempt(),
		HolderKey: frozenKey, TaskToken: task.GetTaskToken(), Generation: in.Generation}
	if ok, _, err := h.store.TakePollLease(ctx, claim, time.Second); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	adopter := StartLiveness(h.acts)
	t.Cleanup(adopter.Stop)
	<-adopter.Ready()
	sup := NewLeaseSupervisor(h.acts)
	if n, err := sup.adopt(ctx); err != nil || n != 0 {
		t.Fatalf("adopted %d polls (%v) of a live worker whose lease has not expired", n, err)
	}
	// Frozen: nothing renews the lease.
	testkit.Eventually(t, "the frozen worker's poll adopted once its lease expired", 30*time.Second, func() (bool, error) {
		n, err := sup.Once(ctx)
		return n == 1, err
	})
	h.inject(ilinksim.InjectRequest{Text: "written while the worker was frozen"})

	// Thawed: its poll's lease is past its local validity (it was not renewed for the
	// freeze), so the poll stops before its next getupdates and finds its attempt adopted.
	l := fk.hold(claim, time.Now().Add(-time.Minute))
	res, err := frozen.pollLeased(ctx, in, l, time.Minute)
	if !errors.Is(err, errAttemptAdopted) || res.Pages != 0 {
		t.Fatalf("the thawed worker's poll ended with %+v, %v; want it to leave its adopted attempt", res, err)
	}
	var got activities.PollResult
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("the adopted attempt ended with %v", err)
	}
	if got.Messages != 1 {
		t.Fatalf("the adopted attempt's result %+v, want the message written during the freeze", got)
	}
	assertEndedOnAttempt(ctx, t, h, run, task.GetAttempt())
}

// backdateLease moves the lease's taking (its attempt's start) back by d.
func backdateLease(ctx context.Context, t *testing.T, h *harness, d time.Duration) {
	t.Helper()
	if _, err := h.pool.Exec(ctx, "UPDATE poll_leases SET taken_at = taken_at - $2::bigint * interval '1 millisecond' WHERE account_key = $1",
		h.key, d.Milliseconds()); err != nil {
		t.Fatal(err)
	}
}

// A dead worker's poll whose session is over (it was in its last long poll) is adopted
// while the attempt's overrun lasts: the adopter polls once more, commits what that long
// poll brings, and ends the attempt.
func TestADeadWorkersPollPastItsSessionIsAdoptedForOneLongPoll(t *testing.T) {
	h := newHarness(t, func(o *options) { o.config = func(c *Config) { c.PollSession = 2 * time.Second } })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take, run := standInPollRun(ctx, t, h)
	task := take("dead-worker")
	deadWorkersPoll(ctx, t, h, task)
	backdateLease(ctx, t, h, 2*time.Second+adoptOverrun/2)
	h.inject(ilinksim.InjectRequest{Text: "written in the dead poll's last long poll"})

	if n, err := NewLeaseSupervisor(h.acts).Once(ctx); err != nil || n != 1 {
		t.Fatalf("the supervisor replaced %d polls (%v), want the dead worker's one adopted", n, err)
	}
	var res activities.PollResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("the adopted attempt ended with %v", err)
	}
	if res.Messages != 1 {
		t.Fatalf("the adopted attempt's result %+v, want the message its one long poll brought", res)
	}
	assertEndedOnAttempt(ctx, t, h, run, task.GetAttempt())
}

// Past its session and the overrun, a dead worker's poll attempt is too near its
// start-to-close to go on: it is not adopted but failed, and Temporal retries it.
func TestADeadWorkersPollPastItsSessionAndOverrunIsRetriedNotAdopted(t *testing.T) {
	h := newHarness(t, func(o *options) { o.config = func(c *Config) { c.PollSession = 2 * time.Second } })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	take, _ := standInPollRun(ctx, t, h)
	task := take("dead-worker")
	deadWorkersPoll(ctx, t, h, task)
	backdateLease(ctx, t, h, 2*time.Second+adoptOverrun+time.Second)

	if n, err := NewLeaseSupervisor(h.acts).Once(ctx); err != nil || n != 1 {
		t.Fatalf("the supervisor replaced %d polls (%v), want the dead worker's one retried", n, err)
	}
	if h.acts.keeper().pollsRunning(h.key) {
		t.Fatal("the poll past its session and overrun was adopted")
	}
	if got := take("live-worker").GetAttempt(); got != task.GetAttempt()+1 {
		t.Fatalf("attempt %d handed out, want the retry %d", got, task.GetAttempt()+1)
	}
}

// assertEndedOnAttempt fails the test unless the stand-in poll's activity started only as
// attempt (it went on under that attempt to its end, never retried).
func assertEndedOnAttempt(ctx context.Context, t *testing.T, h *harness, run client.WorkflowRun, attempt int32) {
	t.Helper()
	iter := h.acts.Temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() != attempt {
			t.Fatalf("the poll ended on attempt %d, want attempt %d going on", a.GetAttempt(), attempt)
		}
	}
}
