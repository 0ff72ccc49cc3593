package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// builtStarter is the operator's CLI, built once for the test binary's process tests.
var builtStarter struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// starterBinary returns the starter command built from ../starter, building it on first use.
func starterBinary(t *testing.T) string {
	t.Helper()
	builtStarter.once.Do(func() {
		if builtStarter.dir, builtStarter.err = os.MkdirTemp("", "ilinkflow-e2e-starter-"); builtStarter.err != nil {
			return
		}
		bin := filepath.Join(builtStarter.dir, "starter")
		if out, err := exec.Command("go", "build", "-o", bin, "../../starter").CombinedOutput(); err != nil {
			builtStarter.err = fmt.Errorf("build the starter: %w\n%s", err, out)
			return
		}
		builtStarter.bin = bin
	})
	if builtStarter.err != nil {
		t.Fatal(builtStarter.err)
	}
	return builtStarter.bin
}

// removeStarterBinary removes the starter built by starterBinary (TestMain, after the tests).
func removeStarterBinary() {
	if builtStarter.dir != "" {
		_ = os.RemoveAll(builtStarter.dir)
	}
}

// proc is a process a test runs (a worker, the starter) with its output kept.
type proc struct {
	cmd     *exec.Cmd
	out     *testkit.SyncBuffer
	exited  chan struct{}
	exitErr error
	began   time.Time
	ended   time.Time
}

// startProc runs bin with env and args; tb's cleanup stops it (SIGTERM, then SIGKILL after
// 30 s) and prints its output when tb failed.
func startProc(tb testing.TB, name, bin string, env []string, args ...string) *proc {
	tb.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, p.out, p.out
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		p.ended = time.Now()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		p.stop()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", name, crashTail(p.out.String(), 60))
		}
	})
	return p
}

// stop ends the process gracefully (SIGTERM), killing it after 30 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitLog waits until the output holds want, failing tb when the process exits first or
// within passes.
func (p *proc) waitLog(tb testing.TB, want string, within time.Duration) {
	tb.Helper()
	tm := time.NewTimer(within)
	defer tm.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.exited:
			if strings.Contains(p.out.String(), want) {
				return
			}
			tb.Fatalf("the process exited (%v) before logging %q:\n%s", p.exitErr, want, crashTail(p.out.String(), 40))
		case <-tm.C:
			tb.Fatalf("%q not logged within %v:\n%s", want, within, crashTail(p.out.String(), 40))
		case <-tick.C:
		}
	}
}

var servingRE = regexp.MustCompile(`msg="serving HTTP" .*\baddr=(\S+)`)

// httpAddr is the address the worker's log says it serves HTTP on.
func (p *proc) httpAddr(tb testing.TB) string {
	tb.Helper()
	m := servingRE.FindStringSubmatch(p.out.String())
	if m == nil {
		tb.Fatalf("the worker logged no HTTP address:\n%s", crashTail(p.out.String(), 40))
	}
	return m[1]
}

// tlsWorkerEnv is a process rig's worker environment without any Temporal setting, plus
// more: the test gives the Temporal connection only through the standard variables.
func tlsWorkerEnv(r *procRig, more map[string]string) []string {
	set := map[string]string{
		"ILINKFLOW_TASK_QUEUE": r.tq,
		"DATABASE_URL":         r.dbURL,
		sealing.EnvKeys:        r.keys,
		"ILINK_BASE_URL":       r.srv.URL,
		"ILINK_CDN_BASE_URL":   r.srv.URL + "/c2c",
		"ILINKFLOW_LOG_FORMAT": "text",
		"ILINKFLOW_HTTP_ADDR":  "127.0.0.1:0",
		"ILINKFLOW_HANDLER":    "echo",
		"ILINKFLOW_SEND_GAP":   "5ms",
		// Keep the user's own Temporal config file out of the test.
		"TEMPORAL_CONFIG_FILE": emptyConfigFile,
	}
	for k, v := range more {
		set[k] = v
	}
	return crashEnv(set)
}

// emptyConfigFile is an empty Temporal client config file (TestMain removes it).
var emptyConfigFile = func() string {
	f, err := os.CreateTemp("", "ilinkflow-e2e-temporal-*.toml")
	if err != nil {
		panic(err)
	}
	_ = f.Close()
	return f.Name()
}()

// enrollWithStarter runs `starter enroll --json` with env, scans and confirms its QR code
// at the simulator, and returns the new bot once the command printed its account key.
func enrollWithStarter(t *testing.T, r *procRig, env []string) ilinksim.BotInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, starterBinary(t), "enroll", "--json", "--refresh", "100ms", "--lifetime", "3m")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var account string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ev struct {
			Event, Status string
			AccountKey    string `json:"account_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("starter enroll printed %q", sc.Text())
		}
		switch {
		case ev.Event == "qr":
			if _, err := r.ctl.ScanQR(ctx, "", ""); err != nil {
				t.Fatal(err)
			}
		case ev.Event == "status" && ev.Status == "scaned":
			if _, err := r.ctl.ConfirmQR(ctx, ""); err != nil {
				t.Fatal(err)
			}
		case ev.Event == "done":
			account = ev.AccountKey
		}
	}
	if err := cmd.Wait(); err != nil || account == "" {
		t.Fatalf("starter enroll: %v (account %q)\n%s", err, account, stderr.String())
	}
	bots, err := r.ctl.Bots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bots {
		if b.BotID != r.bot.BotID && !b.Dead {
			return b
		}
	}
	t.Fatalf("no enrolled bot at the simulator: %+v", bots)
	return ilinksim.BotInfo{}
}

// awaitEcho injects text from the bot's owner and waits for the echo agent's answer.
func awaitEcho(t *testing.T, r *procRig, bot ilinksim.BotInfo, text string) {
	t.Helper()
	if _, err := r.ctl.InjectText(r.ctx, bot.BotID, "", text); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the echo answer", 2*time.Minute, func() (bool, error) {
		sent, err := r.ctl.Sent(r.ctx, bot.BotID)
		if err != nil {
			return false, err
		}
		for _, m := range sent {
			if m.Text == "echo: "+text {
				return true, nil
			}
		}
		return false, nil
	})
}

// workerReady is the log line of a worker that has reconciled.
const workerReady = "msg=reconciled"

// TestWorkerAndStarterReachAMutualTLSFrontendThroughTheStandardSettingsOnly runs the
// worker and `starter enroll` as processes against the dev server behind a TLS-terminating
// proxy that requires a client certificate of the test CA. Configured only through the
// standard Temporal variables (first case) or only through a profile of a TOML client
// config file (second case), they enroll a bot at the simulator and answer its message.
func TestWorkerAndStarterReachAMutualTLSFrontendThroughTheStandardSettingsOnly(t *testing.T) {
	t.Parallel()
	for _, viaProfile := range []bool{false, true} {
		name := "environment variables"
		if viaProfile {
			name = "TOML profile"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newProcRig(t, 500*time.Millisecond, store.DefaultLimits())
			ca := testkit.NewCA(t, "ilinkflow test CA")
			proxy := testkit.NewTLSProxy(t, r.devHP, ca.Server(t, "localhost").TLS, ca.Pool)
			dir := t.TempDir()
			caPath := ca.WriteCert(t, dir, "ca")
			certPath, keyPath := ca.Client(t, "worker").WriteFiles(t, dir, "client")
			temporal := map[string]string{
				"TEMPORAL_ADDRESS":                 proxy.Addr,
				"TEMPORAL_NAMESPACE":               r.ns,
				"TEMPORAL_TLS_CLIENT_CERT_PATH":    certPath,
				"TEMPORAL_TLS_CLIENT_KEY_PATH":     keyPath,
				"TEMPORAL_TLS_SERVER_CA_CERT_PATH": caPath,
				"TEMPORAL_TLS_SERVER_NAME":         "localhost",
			}
			if viaProfile {
				file := filepath.Join(dir, "temporal.toml")
				body := fmt.Sprintf("[profile.ilinkflow]\naddress = %q\nnamespace = %q\n\n[profile.ilinkflow.tls]\n"+
					"client_cert_path = %q\nclient_key_path = %q\nserver_ca_cert_path = %q\nserver_name = \"localhost\"\n",
					proxy.Addr, r.ns, certPath, keyPath, caPath)
				if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				temporal = map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "ilinkflow"}
			}
			w := startProc(t, "worker", r.bin, tlsWorkerEnv(r, temporal))
			w.waitLog(t, workerReady, 3*time.Minute)
			if !strings.Contains(w.out.String(), "temporal.tls=true temporal.client_cert=true") {
				t.Fatalf("the worker's log does not say it connected with TLS and a client certificate:\n%s", crashTail(w.out.String(), 20))
			}
			// The starter encrypts what it sends with the sealing keys, as the worker does.
			starterSet := map[string]string{"ILINKFLOW_TASK_QUEUE": r.tq, sealing.EnvKeys: r.keys, "TEMPORAL_CONFIG_FILE": emptyConfigFile}
			for k, v := range temporal {
				starterSet[k] = v
			}
			bot := enrollWithStarter(t, r, crashEnv(starterSet))
			awaitEcho(t, r, bot, "hello over mutual TLS")
			if len(proxy.Requests()) == 0 {
				t.Fatal("no request went through the TLS proxy")
			}
		})
	}
}

// TestWorkerRefusedByTheTLSFrontendExitsWithinAMinuteWithAOneLineError starts the worker
// against the mutual-TLS proxy with a client certificate of another CA, and in plaintext:
// each exits non-zero within 60 s, its last line the error naming the cause.
func TestWorkerRefusedByTheTLSFrontendExitsWithinAMinuteWithAOneLineError(t *testing.T) {
	t.Parallel()
	r := newProcRig(t, 500*time.Millisecond, store.DefaultLimits())
	ca, other := testkit.NewCA(t, "ilinkflow test CA"), testkit.NewCA(t, "another CA")
	proxy := testkit.NewTLSProxy(t, r.devHP, ca.Server(t).TLS, ca.Pool)
	dir := t.TempDir()
	caPath := ca.WriteCert(t, dir, "ca")
	badCert, badKey := other.Client(t, "intruder").WriteFiles(t, dir, "other")
	cases := []struct {
		name, code string
		env        map[string]string
	}{
		{"client certificate of another CA", "temporal_handshake_refused", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr,
			"TEMPORAL_NAMESPACE": r.ns, "TEMPORAL_TLS_CLIENT_CERT_PATH": badCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": badKey,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH": caPath}},
		{"plaintext to the TLS port", "temporal_handshake_refused", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr, "TEMPORAL_NAMESPACE": r.ns}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := startProc(t, "worker", r.bin, tlsWorkerEnv(r, tc.env))
			select {
			case <-w.exited:
			case <-time.After(60 * time.Second):
				t.Fatalf("the worker still runs after 60 s:\n%s", crashTail(w.out.String(), 20))
			}
			var exit *exec.ExitError
			if !errors.As(w.exitErr, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit %v, want a non-zero status", w.exitErr)
			}
			lines := strings.Split(strings.TrimRight(w.out.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "worker: Temporal at "+proxy.Addr) || !strings.Contains(last, "["+tc.code+"]") {
				t.Fatalf("last line %q, want the one-line error with [%s]:\n%s", last, tc.code, crashTail(w.out.String(), 20))
			}
			if n := strings.Count(w.out.String(), tc.code); n != 1 {
				t.Fatalf("the error appears %d times, want once:\n%s", n, w.out.String())
			}
			// The proxy records a refusal after it sent the alert the worker exits on: wait
			// for its record rather than race it.
			for deadline := time.Now().Add(30 * time.Second); len(proxy.Refused()) == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the proxy refused no handshake")
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("after %v: %s", w.ended.Sub(w.began).Round(time.Millisecond), last)
		})
	}
}

// TestAPIKeyIsSentAsBearerMetadataAndNeverLoggedOrServedInMetrics runs the worker against
// a TLS-terminating proxy that reads the headers of every request on the way through,
// configured with TEMPORAL_API_KEY (TLS on by default with a key) and the test CA: every
// request the worker makes carries "authorization: Bearer <key>", a message is answered,
// and the key appears neither in the worker's log (at debug level) nor in /metrics.
func TestAPIKeyIsSentAsBearerMetadataAndNeverLoggedOrServedInMetrics(t *testing.T) {
	t.Parallel()
	r := newProcRig(t, 500*time.Millisecond, store.DefaultLimits())
	ca := testkit.NewCA(t, "ilinkflow test CA")
	proxy := testkit.NewTLSProxy(t, r.devHP, ca.Server(t).TLS, nil)
	const apiKey = "ilk-test-api-key-7Hq2vX9mZr4Lp0sW"
	w := startProc(t, "worker", r.bin, tlsWorkerEnv(r, map[string]string{
		"TEMPORAL_ADDRESS":                 proxy.Addr,
		"TEMPORAL_NAMESPACE":               r.ns,
		"TEMPORAL_API_KEY":                 apiKey,
		"TEMPORAL_TLS_SERVER_CA_CERT_DATA": string(ca.CertPEM),
		"ILINKFLOW_LOG_LEVEL":              "debug",
	}))
	w.waitLog(t, workerReady, 3*time.Minute)
	awaitEcho(t, r, r.bot, "hello with an API key")

	reqs := proxy.Requests()
	paths := map[string]bool{}
	for _, q := range reqs {
		if q.Authorization != "Bearer "+apiKey {
			t.Fatalf("request %s carried authorization %q, want the Bearer key", q.Path, q.Authorization)
		}
		paths[q.Path[strings.LastIndexByte(q.Path, '/')+1:]] = true
	}
	for _, m := range []string{"GetSystemInfo", "DescribeNamespace", "PollWorkflowTaskQueue", "RespondWorkflowTaskCompleted"} {
		if !paths[m] {
			t.Fatalf("no %s request seen through the proxy (saw %v)", m, paths)
		}
	}
	resp, err := http.Get("http://" + w.httpAddr(t) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "temporal_") {
		t.Fatalf("/metrics: %d %v (%d bytes)", resp.StatusCode, err, len(body))
	}
	w.stop()
	for what, text := range map[string]string{"the worker's log": w.out.String(), "/metrics": string(body)} {
		if strings.Contains(text, apiKey) || strings.Contains(text, apiKey[8:24]) {
			t.Fatalf("the API key appears in %s", what)
		}
	}
	if !strings.Contains(w.out.String(), "temporal.api_key=true") {
		t.Fatalf("the log should say an API key is used:\n%s", crashTail(w.out.String(), 20))
	}
}
