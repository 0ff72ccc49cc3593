package gateway_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// syncBuffer is testkit.SyncBuffer.
type syncBuffer = testkit.SyncBuffer

// Run wires everything against the real dev server and PostgreSQL: it migrates, serves
// the task queue, reconciles (the registered account gets its poller), reports ready, and
// returns nil once its context is cancelled.
func TestRunServesReconcilesAndStops(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ns, tc := srv.NewNamespace(t)
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	st, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	acct := register(ctx, t, st, time.Now())

	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress = srv.HostPort
	cfg.TemporalNamespace = ns
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.DatabaseURL = "postgres://unused@127.0.0.1:1/unused" // the injected pool is used
	cfg.StalePause = 3 * time.Minute
	cfg.ShutdownGrace = time.Second
	cfg.HTTPAddr = "" // no HTTP server: tests run in parallel
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan gateway.ReconcileReport, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(runCtx, cfg, gateway.Options{
			Logger: logger, Pool: pool, Keyring: testKeys,
			Ready: func(r gateway.ReconcileReport) { ready <- r },
		})
	}()

	var rep gateway.ReconcileReport
	select {
	case rep = <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("Run never became ready\n%s", logs.String())
	}
	if rep.Accounts != 1 || rep.PollersStarted != 1 {
		t.Fatalf("start-up reconcile %+v", rep)
	}
	installation, err := st.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inst := installation.ID
	id := wfapi.AccountPollerID(inst, acct.key)
	info := describe(ctx, t, tc, id)
	if info == nil || info.GetTaskQueue() != cfg.TaskQueue {
		t.Fatalf("poller after Run: %v", info)
	}
	var in wfapi.PollerInput
	startInput(ctx, t, tc, id, info.GetExecution().GetRunId(), &in)
	if in.AccountKey != acct.key || in.Generation != acct.generation || in.Config.StalePause.D() != cfg.StalePause {
		t.Fatalf("poller input %+v: the configured stale pause must reach the poller", in)
	}

	// The worker polls the task queue for workflow and activity tasks. A poller shows up
	// on the server once its first poll request arrives.
	waitForPollers(ctx, t, tc.WorkflowService(), ns, cfg.TaskQueue)

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancellation: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after cancellation")
	}
	out := logs.String()
	for _, want := range []string{"worker started", "reconciled", "worker stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "bot-token-") {
		t.Fatalf("the log shows a bot token:\n%s", out)
	}
}

func waitForPollers(ctx context.Context, t *testing.T, svc workflowservice.WorkflowServiceClient, ns, queue string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		for {
			resp, err := svc.DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: ns, TaskQueue: &taskqueue.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: kind,
			})
			if err != nil {
				t.Fatalf("describe task queue: %v", err)
			}
			if len(resp.GetPollers()) > 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no %v poller on %s", kind, queue)
			case <-tick.C:
			}
		}
	}
}

func TestRunRefusesABadConfigurationBeforeConnecting(t *testing.T) {
	t.Parallel()
	cfg := gateway.DefaultConfig() // no key ring
	err := gateway.Run(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "sealing key") {
		t.Fatalf("Run without a key ring: %v", err)
	}
}

func TestRunReportsAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	cfg := gateway.DefaultConfig()
	cfg.DatabaseURL = "postgres://postgres:hunter2@127.0.0.1:1/test?connect_timeout=5"
	err := gateway.Run(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Keyring: testKeys})
	if err == nil || !strings.Contains(err.Error(), "connect PostgreSQL") {
		t.Fatalf("Run with an unreachable database: %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the password: %v", err)
	}
}
