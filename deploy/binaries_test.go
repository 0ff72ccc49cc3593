package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// The stamp the binaries are built with.
const (
	stampVersion = "v0.0.0-deploytest"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
	stampDate    = "2026-12-02T10:00:00Z"
)

// built holds the binaries .ci/build-binaries built, once per test binary.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// binaries builds worker, starter and ilinksim with .ci/build-binaries (the Dockerfile's
// build) and returns their directory; under -short the test skips.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the release binaries (not in -short)")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "ilinkflow-deploytest-"); built.err != nil {
			return
		}
		cmd := exec.Command(filepath.Join(root, ".ci/build-binaries"), built.dir)
		cmd.Env = append(os.Environ(), "VERSION="+stampVersion, "COMMIT="+stampCommit, "DATE="+stampDate)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf(".ci/build-binaries: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

func TestTheBuildScriptStampsVersionCommitAndDateIntoTheBinaries(t *testing.T) {
	dir := binaries(t)
	for _, bin := range []string{"worker", "starter"} {
		out, err := exec.Command(filepath.Join(dir, bin), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, out)
		}
		want := bin + " " + stampVersion + " (commit " + stampCommit + ", built " + stampDate + ", go"
		if !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version = %q, want it to start with %q", bin, out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ilinksim")); err != nil {
		t.Errorf("ilinksim was not built: %v", err)
	}
}

// process is a binary the test started, stopped at cleanup.
type process struct {
	cmd    *exec.Cmd
	out    *testkit.SyncBuffer
	exited chan struct{} // closed when the process has ended
}

func start(t *testing.T, bin string, env map[string]string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, out: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.out.String())
		}
	})
	return p
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(bytes.TrimSpace(body)), nil
}

// TestTheChartsContainersRunAndEveryProbePathIsServed runs the chart's two containers as
// it renders them: the migration Job's command on an empty schema, then the worker with
// the ConfigMap's settings and the Secret's variables (test values; the listeners on
// free loopback ports, Temporal and PostgreSQL the test's). Every probe path of the
// worker's Deployment must answer 200 on the admin listener.
func TestTheChartsContainersRunAndEveryProbePathIsServed(t *testing.T) {
	objs := render(t, "ci/minimal-values.yaml")
	dir := binaries(t)
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	schema := dbtest.NewSchema(t)
	keys, err := sealing.GenerateKeySpec(1)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"DATABASE_URL": dbtest.SchemaURL(schema), sealing.EnvKeys: keys}
	httpAddr, adminAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	local := map[string]string{
		"TEMPORAL_ADDRESS": dev.HostPort, "TEMPORAL_NAMESPACE": ns, "ILINKFLOW_TASK_QUEUE": devserver.TaskQueue(t),
		"ILINKFLOW_HTTP_ADDR": httpAddr, "ILINKFLOW_ADMIN_ADDR": adminAddr,
	}
	environment := func(c container) map[string]string {
		env := map[string]string{}
		for k, v := range c.env {
			if s, ok := secrets[k]; ok {
				v = s // this test's database and key instead of the values file's
			}
			if l, ok := local[k]; ok {
				v = l
			}
			env[k] = v
		}
		return env
	}
	var worker *container
	for _, c := range containers(t, objs) {
		if strings.HasPrefix(c.workload, "Job/") {
			cmd := list(c.spec["command"])
			if len(cmd) < 2 {
				t.Fatalf("%s: command %v", c.workload, cmd)
			}
			bin := filepath.Join(dir, filepath.Base(toString(cmd[0])))
			var args []string
			for _, a := range cmd[1:] {
				args = append(args, toString(a))
			}
			run := exec.Command(bin, args...)
			for k, v := range environment(c) {
				run.Env = append(run.Env, k+"="+v)
			}
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("%s (%s %v): %v\n%s", c.workload, filepath.Base(bin), args, err, out)
			}
		}
		if strings.HasPrefix(c.workload, "Deployment/") {
			worker = &c
		}
	}
	if worker == nil {
		t.Fatal("no worker Deployment")
	}
	var args []string
	for _, a := range list(worker.spec["args"]) {
		args = append(args, toString(a))
	}
	w := start(t, filepath.Join(dir, "worker"), environment(*worker), args...)

	for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
		path, _ := dig(worker.spec, probe, "httpGet", "path").(string)
		if path == "" {
			t.Errorf("the worker has no %s path", probe)
			continue
		}
		url := "http://" + adminAddr + path
		testkit.Eventually(t, probe+" "+path+" answers 200", 2*time.Minute, func() (bool, error) {
			select {
			case <-w.exited:
				t.Fatalf("the worker exited before %s %s answered 200 (its output follows)", probe, path)
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			code, body, err := get(ctx, url)
			if err != nil {
				return false, err
			}
			if code == http.StatusNotFound {
				// The admin listener serves all its routes from its start: 404 is final.
				t.Fatalf("%s %s: 404, the admin listener does not serve it: %s", probe, url, body)
			}
			return code == http.StatusOK, fmt.Errorf("%s: %d %s", url, code, body)
		})
	}
}
