package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// The engine's ceiling: the Temporal work of one answered message on the echo path,
// without the database, the iLink simulator or the payload codec. Per message, as the
// worker does it (docs/scale-test.md, "actions per message"):
//
//   - the poll (here the closed loop) starts the message's window workflow with the same
//     start options (search attributes, id policies) and signals "retired" to the bot's
//     previous window;
//   - the window workflow runs the send activity (the reply reaches the user when it
//     runs; the same activity marks the message handled), then waits on a timer (its
//     expiry) or the retired signal, whichever comes first.
//
// That is one workflow start, one activity, one timer and one signal per message (the
// first message of a bot has no previous window to signal), as the worker's own histories
// show; the run counts both from history, step by step.
const (
	engineWorkflow = "CeilingWindow"
	engineSend     = "CeilingSend"
)

// engineInput names the message of a ceiling window.
type engineInput struct {
	ID string
}

// ceilingWindow is the engine ceiling's window workflow.
func ceilingWindow(ctx workflow.Context, in engineInput) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, engineSend, in).Get(ctx, nil); err != nil {
		return err
	}
	retired := workflow.GetSignalChannel(ctx, wfapi.SignalRetired)
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, 24*time.Hour), func(workflow.Future) {})
	sel.AddReceive(retired, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	return nil
}

// engineSystem drives ceiling windows on their own task queue of the run's namespace,
// served by a worker in this process.
type engineSystem struct {
	tc   client.Client
	tq   string
	pfx  string
	mu   sync.Mutex
	wait map[string]chan time.Time // message id -> when its send ran
	sent map[string]int
	prev map[int]string // bot -> its previous window
	dup  atomic.Int64
}

func (r *run) newEngineSystem(ctx context.Context) (satSystem, func(), error) {
	e := &engineSystem{tc: r.tc, tq: "ceiling-" + r.suffix, pfx: "ceiling-" + r.suffix + "-",
		wait: map[string]chan time.Time{}, sent: map[string]int{}, prev: map[int]string{}}
	// The worker's own Temporal settings: as many pollers of each kind (one per default
	// partition of a task queue) and, below, windows started eagerly.
	w := worker.New(r.tc, e.tq, worker.Options{
		MaxConcurrentActivityTaskPollers: gateway.TaskPollers,
		MaxConcurrentWorkflowTaskPollers: gateway.TaskPollers,
	})
	w.RegisterWorkflowWithOptions(ceilingWindow, workflow.RegisterOptions{Name: engineWorkflow})
	w.RegisterActivityWithOptions(e.send, activity.RegisterOptions{Name: engineSend})
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the engine's worker: %w", err)
	}
	return e, w.Stop, nil
}

// send is the ceiling's send activity: the reply reaches the user now.
func (e *engineSystem) send(_ context.Context, in engineInput) error {
	now := time.Now()
	e.mu.Lock()
	e.sent[in.ID]++
	if e.sent[in.ID] == 2 {
		e.dup.Add(1)
	}
	ch := e.wait[in.ID]
	delete(e.wait, in.ID)
	e.mu.Unlock()
	if ch != nil {
		ch <- now
	}
	return nil
}

func (e *engineSystem) exchange(ctx context.Context, b, n int) error {
	_, err := e.exchangeTimed(ctx, b, n)
	return err
}

func (e *engineSystem) exchangeTimed(ctx context.Context, b, n int) (time.Duration, error) {
	id := e.pfx + strconv.Itoa(n)
	ch := make(chan time.Time, 1)
	e.mu.Lock()
	e.wait[id] = ch
	prev := e.prev[b]
	e.prev[b] = id
	e.mu.Unlock()
	began := time.Now()
	_, err := e.tc.ExecuteWorkflow(ctx, wfapi.StartOptions(client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                e.tq,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		EnableEagerStart:                         true, // as wfclient.startWindow
	}, "ilk_ceiling_"+strconv.Itoa(b), "peer"), engineWorkflow, engineInput{ID: id})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", id, err)
	}
	if prev != "" {
		if err := e.tc.SignalWorkflow(ctx, prev, "", wfapi.SignalRetired, nil); err != nil && !wfclient.IsNotFound(err) {
			return 0, fmt.Errorf("signal %s: %w", prev, err)
		}
	}
	select {
	case at := <-ch:
		return at.Sub(began), nil
	case <-ctx.Done():
		e.mu.Lock()
		delete(e.wait, id)
		e.mu.Unlock()
		return 0, ctx.Err()
	}
}

func (e *engineSystem) doubled() int { return int(e.dup.Load()) }
