package activities

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
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
	dev, err := devserver.New(ctx, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Stop(); err != nil {
			t.Errorf("devserver: stop: %v", err)
		}
	})
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
	if c, err := h.store.CountPollLeases(ctx); err != nil || c.Expired != 0 || c.Live != 0 {
		t.Fatalf("the lease was not claimed: %+v %v", c, err)
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
