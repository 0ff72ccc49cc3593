package devserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func greet(ctx workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

// The shared server runs a workflow end to end, and every caller gets the same server.
func TestSharedServerRunsAWorkflow(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	if again := Start(t); again != srv {
		t.Fatal("Start returned a second server in a binary whose TestMain calls Main")
	}
	if srv.HostPort == "" || srv.Namespace != DefaultNamespace || srv.Client == nil {
		t.Fatalf("server %+v", srv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	queue := TaskQueue(t)
	w := worker.New(srv.Client, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(greet, workflow.RegisterOptions{Name: "greet"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	run, err := srv.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet-" + queue, TaskQueue: queue}, "greet", "ilinkflow")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello ilinkflow" {
		t.Fatalf("workflow returned %q", got)
	}
}

// The dynamic config that makes continue-as-new reachable in a real-time test is applied.
func TestSharedServerSuggestsContinueAsNewEarly(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	queue := TaskQueue(t)
	w := worker.New(srv.Client, queue, worker.Options{})
	// Signals add one event each: the suggestion comes once the history passes the
	// configured threshold, long before the server default of 4096 events.
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (int, error) {
		ch := workflow.GetSignalChannel(ctx, "tick")
		n := 0
		for !workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			ch.Receive(ctx, nil)
			n++
		}
		for ch.ReceiveAsync(nil) {
			n++ // drain, so that no signal is left unhandled
		}
		return n, nil
	}, workflow.RegisterOptions{Name: "until-suggested"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	id := "can-" + queue
	run, err := srv.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "until-suggested")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var signals int
	go func() { done <- run.Get(ctx, &signals) }()
	finished := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if signals == 0 || signals > 2*SuggestContinueAsNewEvents {
			t.Fatalf("continue-as-new suggested after %d signals, want well under the server default", signals)
		}
		t.Logf("continue-as-new suggested after %d signals", signals)
	}
	for sent := 0; sent <= 4*SuggestContinueAsNewEvents; sent++ {
		if err := srv.Client.SignalWorkflow(ctx, id, "", "tick", nil); err != nil {
			// The workflow completed (or the signal failed and Get reports why).
			finished(<-done)
			return
		}
		select {
		case err := <-done:
			finished(err)
			return
		default:
		}
	}
	t.Fatalf("no continue-as-new suggestion after %d signals", 4*SuggestContinueAsNewEvents)
}

// Two namespaces of one server hold the same workflow id independently.
func TestNewNamespaceIsolatesWorkflowIDs(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nsA, a := srv.NewNamespace(t)
	nsB, b := srv.NewNamespace(t)
	if nsA == nsB || nsA == srv.Namespace {
		t.Fatalf("namespaces %q %q %q", nsA, nsB, srv.Namespace)
	}
	queue := TaskQueue(t)
	opts := client.StartWorkflowOptions{ID: "ilink-window/1", TaskQueue: queue, WorkflowExecutionErrorWhenAlreadyStarted: true}
	runA, err := a.ExecuteWorkflow(ctx, opts, "nobody-runs-this")
	if err != nil {
		t.Fatal(err)
	}
	runB, err := b.ExecuteWorkflow(ctx, opts, "nobody-runs-this")
	if err != nil {
		t.Fatalf("the same id in another namespace: %v", err)
	}
	if runA.GetRunID() == runB.GetRunID() {
		t.Fatal("one run shared by two namespaces")
	}
	if _, err := a.ExecuteWorkflow(ctx, opts, "nobody-runs-this"); err == nil {
		t.Fatal("a second start in the same namespace was accepted")
	}
}

// A private server (New) starts, serves and stops; Stop is idempotent.
func TestNewAndStop(t *testing.T) {
	t.Parallel()
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := New(ctx, Options{Namespace: "private-ns"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("health: %v", err)
	}
	c, err := srv.Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "private-ns"}); err != nil {
		t.Fatalf("namespace was not registered: %v", err)
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.Output())
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

func TestFindCLIOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	explicit := writeExe(t, filepath.Join(dir, "explicit"))
	gobin := filepath.Join(dir, "gopath", "bin")
	inGobin := writeExe(t, filepath.Join(gobin, "temporal"))
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvCLI {
				return v
			}
			return ""
		}
	}
	onPath := func(string) (string, error) { return "/usr/bin/temporal", nil }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	bins := func() []string { return []string{filepath.Join(dir, "nothing"), gobin} }

	cases := []struct {
		name   string
		getenv func(string) string
		look   func(string) (string, error)
		want   string
	}{
		{"env wins", env(explicit), onPath, explicit},
		{"then PATH", env(""), onPath, "/usr/bin/temporal"},
		{"then GOPATH/bin", env(""), notOnPath, inGobin},
	}
	for _, c := range cases {
		got, err := findCLI(c.getenv, c.look, bins)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestFindCLIMissingNamesTheInstallCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	none := func(string) string { return "" }
	_, err := findCLI(none, notOnPath, func() []string { return []string{dir} })
	if err == nil || !strings.Contains(err.Error(), InstallCommand) {
		t.Fatalf("missing CLI: %v; want the install command %q", err, InstallCommand)
	}

	// A TEMPORAL_CLI that points nowhere is an error, not a silent fallback.
	bad := filepath.Join(dir, "no-such-temporal")
	_, err = findCLI(func(string) string { return bad }, func(string) (string, error) { return "/usr/bin/temporal", nil }, func() []string { return nil })
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), InstallCommand) {
		t.Fatalf("bad %s: %v", EnvCLI, err)
	}

	// A file without the executable bit is refused.
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findCLI(func(string) string { return plain }, notOnPath, func() []string { return nil }); err == nil {
		t.Fatal("a non-executable TEMPORAL_CLI was accepted")
	}
}

func TestTaskQueueIsUniqueAndReadable(t *testing.T) {
	t.Parallel()
	a, b := TaskQueue(t), TaskQueue(t)
	if a == b || !strings.HasPrefix(a, "test-TestTaskQueueIsUniqueAndReadable-") {
		t.Fatalf("task queues %q %q", a, b)
	}
	t.Run("sub/with spaces", func(t *testing.T) {
		q := TaskQueue(t)
		if strings.ContainsAny(q, " /") {
			t.Fatalf("task queue %q", q)
		}
	})
}

func TestTailKeepsTheEnd(t *testing.T) {
	t.Parallel()
	tl := &OutputTail{Max: 8}
	_, _ = tl.Write([]byte("0123456789"))
	_, _ = tl.Write([]byte("ab"))
	if got := tl.String(); got != "456789ab" {
		t.Fatalf("tail %q", got)
	}
	if !strings.Contains(tl.Suffix(), "456789ab") || (&OutputTail{Max: 8}).Suffix() != "" {
		t.Fatal("suffix")
	}
}

func writeExe(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A server restarted with a database file comes back on the same address with its state:
// a workflow started before the restart is still there, the clients and the worker of
// before reconnect by themselves, and the workflow completes.
func TestARestartedServerKeepsItsStateOnTheSameAddress(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := StartPrivate(t, Options{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	ns, c := srv.NewNamespace(t)
	queue := TaskQueue(t)
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		var name string
		workflow.GetSignalChannel(ctx, "name").Receive(ctx, &name)
		return "hello " + name, nil
	}, workflow.RegisterOptions{Name: "wait-for-name"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "restart-" + queue, TaskQueue: queue}, "wait-for-name")
	if err != nil {
		t.Fatal(err)
	}

	addr := srv.HostPort
	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeWorkflow(ctx, run.GetID(), ""); err == nil {
		t.Fatal("a halted server answered")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.HostPort != addr {
		t.Fatalf("restarted on %s, was %s", srv.HostPort, addr)
	}
	// The namespace registered before the restart is served again (possibly a moment after
	// the frontend answers), and the signal reaches the workflow of before.
	for {
		err := c.SignalWorkflow(ctx, run.GetID(), "", "name", "again")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("signal after the restart (namespace %s): %v", ns, err)
		}
		t.Logf("signal after the restart: %v (retrying)", err)
		tm := time.NewTimer(200 * time.Millisecond)
		select {
		case <-tm.C:
		case <-ctx.Done():
		}
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello again" {
		t.Fatalf("workflow returned %q", got)
	}
	if _, err := srv.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err != nil {
		t.Fatalf("the server's own client after the restart: %v", err)
	}
}

// Without a database file the state would be gone: Restart refuses.
func TestAServerWithoutADatabaseFileRefusesToRestart(t *testing.T) {
	srv := &Server{}
	if err := srv.Restart(context.Background()); err == nil || !strings.Contains(err.Error(), "DBFile") {
		t.Fatalf("restart of an in-memory server: %v", err)
	}
}

// In -short mode every way a test gets a server or the CLI skips the test, before it looks
// for the CLI.
func TestInShortModeATestNeedingTheServerOrTheCLISkips(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks -short mode")
	}
	for name, get := range map[string]func(*testing.T){
		"Start":        func(t *testing.T) { Start(t) },
		"StartPrivate": func(t *testing.T) { StartPrivate(t, Options{}) },
		"CLI":          func(t *testing.T) { CLI(t) },
	} {
		t.Run(name, func(t *testing.T) {
			var skipped bool
			t.Run("test", func(t *testing.T) {
				defer func() { skipped = t.Skipped() }()
				get(t)
			})
			if !skipped {
				t.Fatalf("%s did not skip in -short mode", name)
			}
		})
	}
}

// In -short mode a test binary never installs the CLI: EnsureCLI answers that it is
// missing, and says nothing of an install.
func TestInShortModeEnsureCLINeverInstalls(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks -short mode (outside it, a missing CLI is installed)")
	}
	t.Setenv(EnvCLI, filepath.Join(t.TempDir(), "missing", "temporal"))
	t.Setenv("ILINKFLOW_NO_CLI_INSTALL", "")
	var log strings.Builder
	if p, err := EnsureCLI(context.Background(), &log); err == nil {
		t.Fatalf("EnsureCLI found %s where there is none", p)
	}
	if log.Len() != 0 {
		t.Fatalf("EnsureCLI tried an install in -short mode: %s", log.String())
	}
}
