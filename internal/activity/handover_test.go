package activity

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// A stopping worker hands over a poll lease it still holds (a poll that outlived the
// stop's grace): the poll loses it at once, the lease row is free for the next poll, and
// the bot's poller is told to replace the poll with that lease's epoch and attempt.
func TestAStoppingWorkerHandsAHeldPollLeaseOverToThePoller(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dev := devserver.Start(t)
	_, tc := dev.NewNamespace(t)
	h.acts.Temporal = tc

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

	l, err := h.acts.keeper().take(ctx, activities.PollInput{AccountKey: h.key, LeaseEpoch: 9}, 3)
	if err != nil {
		t.Fatal(err)
	}
	n, err := HandOverLeases(ctx, h.acts)
	if err != nil || n != 1 {
		t.Fatalf("hand-over: %d leases, %v; want 1", n, err)
	}
	if err := l.check(); err == nil {
		t.Fatal("the poll still holds its lease after the hand-over")
	}
	if live, expired, err := h.pollLeaseCounts(ctx); err != nil || live != 0 || expired != 0 {
		t.Fatalf("the lease row is still held: %d live, %d expired %v", live, expired, err)
	}
	var got wfapi.PollLostSignal
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got.Epoch != 9 || got.Attempt != 3 {
		t.Fatalf("the poller was told %+v, want epoch 9 attempt 3", got)
	}
	if n, err := HandOverLeases(ctx, h.acts); err != nil || n != 0 {
		t.Fatalf("a second hand-over: %d, %v; want nothing left", n, err)
	}
}

// pollLeaseCounts counts the poll leases held live and held but expired.
func (h *harness) pollLeaseCounts(ctx context.Context) (live, expired int, err error) {
	err = h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE holder IS NOT NULL AND expires_at > clock_timestamp()),
		count(*) FILTER (WHERE holder IS NOT NULL AND expires_at <= clock_timestamp()) FROM poll_leases`).Scan(&live, &expired)
	return live, expired, err
}
