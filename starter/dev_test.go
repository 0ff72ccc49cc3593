package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// devEnv is what `starter dev` runs against in these tests: an already running Temporal
// server (which dev connects to instead of starting one), a namespace, a schema of its own
// and a dev key file in a temporary directory.
type devEnv struct {
	args    []string
	keyFile string
}

func newDevEnv(t *testing.T) devEnv {
	t.Helper()
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "dev-sealing-key")
	return devEnv{keyFile: keyFile, args: []string{"dev", "--temporal-address", dev.HostPort, "--temporal-namespace", ns,
		"--task-queue", devserver.TaskQueue(t), "--database-url", dbtest.SchemaURL(schema),
		"--sim-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--dev-key-file", keyFile}}
}

// runDevWith runs `starter dev` with stdin and returns its output.
func (e devEnv) runDevWith(t *testing.T, stdin io.Reader, extra ...string) string {
	t.Helper()
	out, _ := e.runDevLogged(t, stdin, extra...)
	return out
}

// runDevLogged runs `starter dev` with stdin and returns its output and its log
// (stderr).
func (e devEnv) runDevLogged(t *testing.T, stdin io.Reader, extra ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append(append([]string{}, e.args...), extra...), stdin, &out, &errOut, func(string) string { return "" })
	if err != nil {
		t.Fatalf("dev: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestDevRunsEverythingAndTheDemoBotAnswers runs `starter dev` as a newcomer would: the
// demo bot is enrolled and a typed message gets the echo agent's reply. A message longer
// than one iLink message is not cut silently: the chat and the echo both say so.
func TestDevRunsEverythingAndTheDemoBotAnswers(t *testing.T) {
	t.Parallel()
	e := newDevEnv(t)
	out := e.runDevWith(t, strings.NewReader("hello from a newcomer\n"+strings.Repeat("a", 20000)+"\n"))
	t.Logf("dev output:\n%s", strings.ReplaceAll(out, strings.Repeat("a", 100), ""))
	for _, want := range []string{"ilinkflow is running", "reply API", "metrics", "web front end", "/ui/ (operator token: ", "demo bot", "bot> echo: hello from a newcomer",
		"(your message is 20000 bytes; one iLink message carries at most 16384, so the echo is cut and says so)",
		"aaaa [cut: your message is 20000 bytes; one iLink message carries at most 16384]\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dev output lacks %q:\n%s", want, out)
		}
	}
}

// TestDevChatOfTwentyMessagesGetsTwentyReplies chats twenty messages: the demo simulator
// runs on real time, so its 3-sends burst limit refills and no reply is throttled (on a
// clock that never moves, the third reply of every chat was refused).
func TestDevChatOfTwentyMessagesGetsTwentyReplies(t *testing.T) {
	t.Parallel()
	e := newDevEnv(t)
	var in strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&in, "message %d\n", i)
	}
	out := e.runDevWith(t, strings.NewReader(in.String()))
	if strings.Contains(out, "refused") || strings.Contains(out, "no reply") {
		t.Fatalf("a reply was refused or missing:\n%s", out)
	}
	for i := 1; i <= 20; i++ {
		if n := strings.Count(out, fmt.Sprintf("bot> echo: message %d\n", i)); n != 1 {
			t.Fatalf("message %d got %d echoes:\n%s", i, n, out)
		}
	}
}

// TestDevSecondRunUsesTheFirstRunsKeyAndDemoUser runs `starter dev` twice against the
// same database: the first run creates the dev key file (0600), the second reads it, can
// open the first run's accounts, retires the first run's demo account (whose simulator
// is gone) before its worker starts, re-enrolls the same demo user and answers. Neither
// run logs a warning or an error: a normal re-run is not a problem (the first run's
// account used to be polled with its dead token, and Ctrl-C cut long polls whose
// notifystop then found the simulator closed).
func TestDevSecondRunUsesTheFirstRunsKeyAndDemoUser(t *testing.T) {
	t.Parallel()
	e := newDevEnv(t)
	first, firstLog := e.runDevLogged(t, strings.NewReader("first run\n"), "--log-level", "info")
	if !strings.Contains(first, "created the dev-only key file "+e.keyFile) || !strings.Contains(first, "bot> echo: first run") {
		t.Fatalf("first run:\n%s", first)
	}
	st, err := os.Stat(e.keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("dev key file: %v %v", st, err)
	}
	second, secondLog := e.runDevLogged(t, strings.NewReader("second run\n"), "--log-level", "info")
	for _, want := range []string{"using the dev-only key file " + e.keyFile, "the previous run's demo account", "owner " + demoOwner, "bot> echo: second run"} {
		if !strings.Contains(second, want) {
			t.Fatalf("second run lacks %q:\n%s", want, second)
		}
	}
	for run, log := range map[string]string{"first": firstLog, "second": secondLog} {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Errorf("the %s run logged %s\nits output:\n%s\nits log:\n%s", run, line, map[string]string{"first": first, "second": second}[run], log)
			}
		}
	}
}

func TestDevKeyringIsCreatedOnceWithMode0600(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "dev-sealing-key")
	k1, created, err := devKeyring(path)
	if err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	k2, created, err := devKeyring(path)
	if err != nil || created {
		t.Fatalf("second: created %v, %v", created, err)
	}
	sealed, err := k1.Seal(sealing.PurposeBotToken, "acct", sealing.NewSecret("token"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Open(sealing.PurposeBotToken, "acct", sealed); err != nil || got.Reveal() != "token" {
		t.Fatalf("the second run cannot open the first run's value: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := devKeyring(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key file readable by others was accepted: %v", err)
	}
}

// syncBuffer is testkit.SyncBuffer.
type syncBuffer = testkit.SyncBuffer

// TestDevStopsPromptlyWhenCancelledMidPrompt cancels `starter dev` (as Ctrl-C does) while
// the chat waits at the prompt with standard input blocked: the command returns within a
// couple of seconds without an error and nothing listens on the simulator's port again.
func TestDevStopsPromptlyWhenCancelledMidPrompt(t *testing.T) {
	t.Parallel()
	e := newDevEnv(t)
	simAddr := testkit.FreeAddr(t)
	stdinR, stdinW := io.Pipe() // never written: the read blocks as on a terminal
	t.Cleanup(func() { stdinW.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append(append([]string{}, e.args...), "--sim-addr", simAddr), stdinR, &out, &errOut, func(string) string { return "" })
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "you> ") {
		select {
		case err := <-done:
			t.Fatalf("dev ended before the prompt: %v\n%s\n%s", err, out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prompt:\n%s\n%s", out.String(), errOut.String())
		}
	}
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev after Ctrl-C: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("dev still running 5 s after cancellation:\n%s", out.String())
	}
	t.Logf("dev stopped %s after cancellation", time.Since(start).Round(time.Millisecond))
	// Nothing listens there any more: a connection is refused. (Binding the port again
	// would also fail while another test's outgoing connection happens to use it as its
	// local port, which says nothing about the simulator.)
	if c, err := net.DialTimeout("tcp", simAddr, 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("simulator port %s still accepts connections", simAddr)
	}
	if !strings.Contains(out.String(), "stopped.") {
		t.Fatalf("no stop notice:\n%s", out.String())
	}
}

// TestDevServesTheTemporalSDKMetricsBesideTheProducts: /metrics under `starter dev` has
// the Temporal SDK's temporal_* series (its client is dialed with the worker's registry),
// as the README promises, beside ilinkflow_*.
func TestDevServesTheTemporalSDKMetricsBesideTheProducts(t *testing.T) {
	t.Parallel()
	e := newDevEnv(t)
	stdin, typed := io.Pipe()
	var out, errOut testkit.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), e.args, stdin, &out, &errOut, func(string) string { return "" })
	}()
	if _, err := io.WriteString(typed, "hello metrics\n"); err != nil {
		t.Fatal(err)
	}
	metricsURL := regexp.MustCompile(`http://\S+/metrics`)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "bot> echo: hello metrics") {
		select {
		case err := <-done:
			t.Fatalf("dev ended before the echo: %v\n%s\n%s", err, out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo within 2 minutes:\n%s", out.String())
		}
	}
	url := metricsURL.FindString(out.String())
	if url == "" {
		t.Fatalf("dev printed no /metrics URL:\n%s", out.String())
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ntemporal_request", "\nilinkflow_"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics under dev lacks %q series", strings.TrimSpace(want))
		}
	}
	_ = typed.Close()
	if err := <-done; err != nil {
		t.Fatalf("dev: %v\n%s", err, errOut.String())
	}
}

// devRun is a `starter dev` running in the background with a pipe as its standard input.
type devRun struct {
	out, errOut *syncBuffer
	stdin       *io.PipeWriter
	done        chan error
}

// startDev starts `starter dev` and waits for its prompt.
func (e devEnv) startDev(t *testing.T) *devRun {
	t.Helper()
	stdin, typed := io.Pipe()
	r := &devRun{out: &syncBuffer{}, errOut: &syncBuffer{}, stdin: typed, done: make(chan error, 1)}
	go func() {
		r.done <- run(context.Background(), e.args, stdin, r.out, r.errOut, func(string) string { return "" })
	}()
	t.Cleanup(func() { _ = typed.Close() })
	r.waitFor(t, "you> ", 2*time.Minute)
	return r
}

// waitFor waits until dev has printed want.
func (r *devRun) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(r.out.String(), want) {
		select {
		case err := <-r.done:
			t.Fatalf("dev ended before printing %q: %v\n%s\n%s", want, err, r.out.String(), r.errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not print %q within %s:\n%s\n%s", want, within, r.out.String(), r.errOut.String())
		}
	}
}

// stop ends dev's input, as end of input does, and waits for it to end.
func (r *devRun) stop(t *testing.T) {
	t.Helper()
	_ = r.stdin.Close()
	if err := <-r.done; err != nil {
		t.Fatalf("dev: %v\n%s", err, r.errOut.String())
	}
}

var (
	bannerCommand = regexp.MustCompile(`(?m)^  decoded history    (temporal workflow show .*)$`)
	bannerCodec   = regexp.MustCompile(`(?m)^  payload codec      (http://\S+/codec) \(token: ([0-9a-f]{32,})\)`)
	chatWindow    = regexp.MustCompile(`ReplyWindow (ilink-window/\S+),`)
)

// TestDevEncryptsPayloadsLikeAWorkerAndItsBannerCommandShowsThemDecoded: under `starter
// dev` every payload in Temporal is encrypted with the codec keys of the dev key file, as
// a production worker's are with its sealing keys, and dev serves /codec/ with a token.
// A user's distinctive text goes through the chat; the `temporal` CLI without the codec
// shows the history of the message's ReplyWindow without the text (and the poller's
// without its fields), the exact command the banner printed shows the poller's history
// decoded, and the same command with the ReplyWindow's id (as the chat says) shows the
// text. A second run, with the same dev key file, prints the same token and decodes the
// first run's history.
func TestDevEncryptsPayloadsLikeAWorkerAndItsBannerCommandShowsThemDecoded(t *testing.T) {
	t.Parallel()
	cli := devserver.CLI(t)
	e := newDevEnv(t)
	const text = "heron-7f3a crosses the quiet canal at dusk"
	// sh runs a command line as a user pastes it into a shell, with the CLI on PATH.
	sh := func(line string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}

	first := e.startDev(t)
	banner := first.out.String()
	m, c := bannerCommand.FindStringSubmatch(banner), bannerCodec.FindStringSubmatch(banner)
	if m == nil || c == nil {
		t.Fatalf("the banner lacks the codec endpoint, its token or the decoded-history command:\n%s", banner)
	}
	command, endpoint, token := m[1], c[1], c[2]
	t.Logf("banner:\n%s\n%s", c[0], m[0])
	for _, want := range []string{"--codec-endpoint " + endpoint, "--codec-auth 'Bearer " + token + "'", "--address ", "--namespace "} {
		if !strings.Contains(command, want) {
			t.Fatalf("the banner's command lacks %q: %s", want, command)
		}
	}
	poller := regexp.MustCompile(`--workflow-id (\S+)`).FindStringSubmatch(command)[1]
	if !strings.HasPrefix(poller, "ilink-account/") {
		t.Fatalf("the banner's command shows %s, not the demo bot's AccountPoller", poller)
	}
	withoutCodec, _, _ := strings.Cut(command, " --codec-endpoint ")

	if _, err := io.WriteString(first.stdin, text+"\n"); err != nil {
		t.Fatal(err)
	}
	first.waitFor(t, "bot> echo: "+text, time.Minute)
	first.waitFor(t, "decoded history\" command above", 10*time.Second)
	window := chatWindow.FindStringSubmatch(first.out.String())[1]
	inWindow := func(cmd string) string { return strings.Replace(cmd, poller, window, 1) }

	// Without the codec: neither the text nor the payloads' fields are readable.
	plain := sh(inWindow(withoutCodec))
	if strings.Contains(plain, text) || strings.Contains(plain, "heron") {
		t.Fatalf("the ReplyWindow's history shows the user's text without the codec:\n%s", plain)
	}
	if !strings.Contains(plain, base64.StdEncoding.EncodeToString([]byte(payloadcodec.Encoding))) {
		t.Fatalf("the ReplyWindow's payloads are not encrypted by the codec:\n%s", plain)
	}
	if p := sh(withoutCodec); strings.Contains(p, "AccountKey") {
		t.Fatalf("the poller's history shows its input's fields without the codec:\n%s", p)
	}
	// The banner's command, exactly: the poller's history decoded.
	if p := sh(command); !strings.Contains(p, "AccountKey") {
		t.Fatalf("the banner's command does not show the poller's payloads decoded:\n%s", p)
	}
	decoded := sh(inWindow(command))
	if !strings.Contains(decoded, text) {
		t.Fatalf("the banner's command with the ReplyWindow's id does not show the text:\n%s", decoded)
	}
	t.Logf("without the codec: %s\nwith it: %s", lineWith(plain, "ActivityTaskScheduled", "input.payloads[0].data"), lineWith(decoded, "ActivityTaskScheduled", "Content.text"))
	first.stop(t)

	// The next run: the same key file, the same token, and the first run's history decodes.
	second := e.startDev(t)
	m2 := bannerCommand.FindStringSubmatch(second.out.String())
	if m2 == nil || !strings.Contains(m2[1], "--codec-auth 'Bearer "+token+"'") {
		t.Fatalf("the second run's banner has another token or no command:\n%s", second.out.String())
	}
	if d := sh(strings.Replace(m2[1], regexp.MustCompile(`--workflow-id (\S+)`).FindStringSubmatch(m2[1])[1], window, 1)); !strings.Contains(d, text) {
		t.Fatalf("the second run does not decode the first run's history:\n%s", d)
	}
	second.stop(t)
}

var bannerUI = regexp.MustCompile(`(?m)^  Temporal UI        (http://\S+) \(decodes the payloads through the payload codec below\)$`)

// TestDevStartsTheDevServerWhoseUIDecodesThroughTheCodecEndpoint: with no Temporal
// server at its address, `starter dev` starts the CLI's dev server itself, with
// --ui-codec-endpoint: the UI server's settings (/api/v1/settings, which its pages read)
// name the banner's codec endpoint, with no access token or credentials to pass; the
// demo bot's AccountPoller input, read encrypted from Temporal and posted to that
// endpoint as the browser on the UI posts it (Origin of the UI, X-Namespace, no token),
// comes back decoded; from another origin it is refused, and without an Origin (the CLI,
// curl) the token is still needed.
func TestDevStartsTheDevServerWhoseUIDecodesThroughTheCodecEndpoint(t *testing.T) {
	t.Parallel()
	cli := devserver.CLI(t)
	if help, err := exec.Command(cli, "server", "start-dev", "--help").CombinedOutput(); err != nil || !strings.Contains(string(help), "--ui-codec-endpoint") {
		t.Fatalf("the CLI's start-dev has no --ui-codec-endpoint: %v\n%s", err, help)
	}
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	temporalAddr, uiAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, uiPort, _ := net.SplitHostPort(uiAddr)
	const ns = "ilinkflow-ui"
	e := devEnv{keyFile: filepath.Join(t.TempDir(), "dev-sealing-key"), args: []string{"dev", "--temporal-address", temporalAddr,
		"--temporal-namespace", ns, "--ui-port", uiPort, "--task-queue", devserver.TaskQueue(t), "--database-url", dbtest.SchemaURL(schema),
		"--sim-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}}
	e.args = append(e.args, "--dev-key-file", e.keyFile)
	r := e.startDev(t)
	defer r.stop(t)
	banner := r.out.String()
	ui, c, m := bannerUI.FindStringSubmatch(banner), bannerCodec.FindStringSubmatch(banner), bannerCommand.FindStringSubmatch(banner)
	if ui == nil || c == nil || m == nil || !strings.Contains(banner, "starting the dev server") {
		t.Fatalf("the banner lacks the dev server's UI decoding through the codec endpoint:\n%s", banner)
	}
	uiURL, endpoint, token := ui[1], c[1], c[2]
	t.Logf("banner:\n%s\n%s", ui[0], c[0])
	if uiURL != "http://"+uiAddr {
		t.Fatalf("the UI is at %s, want http://%s", uiURL, uiAddr)
	}

	// What the UI's pages read: the codec endpoint, no access token, no credentials.
	resp, err := http.Get(uiURL + "/api/v1/settings")
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		Codec struct {
			Endpoint                            string
			PassAccessToken, IncludeCredentials bool
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&settings)
	resp.Body.Close()
	if err != nil || settings.Codec.Endpoint != endpoint || settings.Codec.PassAccessToken || settings.Codec.IncludeCredentials {
		t.Fatalf("the UI's settings: %+v (%v), want the codec endpoint %s", settings.Codec, err, endpoint)
	}

	// The poller's input as Temporal holds it: encrypted.
	tc, err := client.Dial(client.Options{HostPort: temporalAddr, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	poller := regexp.MustCompile(`--workflow-id (\S+)`).FindStringSubmatch(m[1])[1]
	it := tc.GetWorkflowHistory(context.Background(), poller, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	input := first.GetWorkflowExecutionStartedEventAttributes().GetInput()
	if len(input.GetPayloads()) == 0 || string(input.Payloads[0].GetMetadata()["encoding"]) != payloadcodec.Encoding {
		t.Fatalf("the poller's input is not encrypted: %v", input)
	}
	body, err := protojson.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	post := func(origin, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", ns)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if origin == uiURL && resp.StatusCode == http.StatusOK && resp.Header.Get("Access-Control-Allow-Origin") != uiURL {
			t.Fatalf("the UI's decode is answered without its CORS origin: %v", resp.Header)
		}
		return resp.StatusCode, string(b)
	}
	code, out := post(uiURL, "")
	var dec struct{ Payloads []struct{ Data []byte } }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &dec) != nil || len(dec.Payloads) == 0 || !strings.Contains(string(dec.Payloads[0].Data), "AccountKey") {
		t.Fatalf("the UI's decode without the token: %d %s", code, out)
	}
	t.Logf("decoded for the UI: %s", dec.Payloads[0].Data)
	if code, _ := post("http://127.0.0.1:1", ""); code != http.StatusForbidden {
		t.Fatalf("another origin without the token: %d, want 403", code)
	}
	if code, _ := post("", ""); code != http.StatusUnauthorized {
		t.Fatalf("no origin, no token: %d, want 401", code)
	}
	if code, _ := post("", "Bearer "+token); code != http.StatusOK {
		t.Fatalf("no origin, the token: %d, want 200", code)
	}

	// The web console links the demo bot to its workflows in this UI.
	web := regexp.MustCompile(`(?m)^  web front end      (http://\S+)/ \(operator token: (\S+)\)$`).FindStringSubmatch(banner)
	if web == nil {
		t.Fatalf("the banner lacks the web front end:\n%s", banner)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, web[1]+"/login", strings.NewReader(url.Values{"token": {web[2]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = hc.Do(req) // follows the redirect to the accounts page
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := uiURL + "/namespaces/" + ns + "/workflows?query="; resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
		t.Fatalf("the accounts page (%d) has no link to the bot's workflows in the Temporal UI (%s)", resp.StatusCode, want)
	}
}

// lineWith is the first line of out containing want after the first line containing
// after.
func lineWith(out, after, want string) string {
	_, rest, _ := strings.Cut(out, after)
	for _, l := range strings.Split(rest, "\n") {
		if strings.Contains(l, want) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
