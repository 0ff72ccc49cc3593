package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
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
// couple of seconds without an error and the simulator's port is free again.
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
	if l, err := net.Listen("tcp", simAddr); err != nil {
		t.Fatalf("simulator port %s still taken: %v", simAddr, err)
	} else {
		l.Close()
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
