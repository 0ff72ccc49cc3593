package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// TestEnrollJSONShowsQRStatusesSaysAWrongVerificationCodeWasWrongAndAsksAgain runs
// `starter enroll --json` against a worker, the real dev server, PostgreSQL and the
// simulator: the QR code is printed, statuses arrive in order, a wrong verification code
// typed at the prompt is answered by a wrong_code event that asks again (not a silent
// re-prompt), the right one is accepted, and the command ends with the account key.
func TestEnrollJSONShowsQRStatusesSaysAWrongVerificationCodeWasWrongAndAsksAgain(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ns, tc := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = 200 * time.Millisecond
	srv := httptest.NewServer(ilinksim.New(simCfg).Handler())
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	keys := testkit.Keyring

	cfg := gateway.DefaultConfig()
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.ILinkBaseURL = srv.URL
	cfg.ILinkCDNBaseURL = srv.URL + "/c2c"
	cfg.PollSession = 2 * time.Second
	cfg.Heartbeat = time.Second
	cfg.HTTPAddr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Pool: pool, Keyring: keys, Temporal: tc,
			Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}

	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	cmdDone := make(chan error, 1)
	go func() {
		cmdDone <- run(ctx, []string{"enroll", "--json", "--temporal-address", dev.HostPort, "--temporal-namespace", ns,
			"--task-queue", cfg.TaskQueue, "--offer-id", "qo_cli_test", "--refresh", "50ms", "--lifetime", "2m"},
			stdinR, stdoutW, io.Discard, func(string) string { return "" })
		stdoutW.Close()
	}()

	var events []enrollEvent
	var statuses []string
	lines := bufio.NewScanner(stdoutR)
	for lines.Scan() {
		var ev enrollEvent
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON event: %q", lines.Text())
		}
		events = append(events, ev)
		switch ev.Event {
		case "qr":
			if _, err := ctl.ScanQR(ctx, "", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := ctl.RequireVerifyCode(ctx, "", "135790"); err != nil {
				t.Fatal(err)
			}
		case "need_code":
			if _, err := io.WriteString(stdinW, "000000\n"); err != nil { // a wrong code first
				t.Fatal(err)
			}
		case "wrong_code":
			if _, err := io.WriteString(stdinW, "135790\n"); err != nil {
				t.Fatal(err)
			}
		case "status":
			statuses = append(statuses, ev.Status)
			if ev.Status == "scaned" && contains(statuses, "need_verifycode") {
				if _, err := ctl.ConfirmQR(ctx, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := <-cmdDone; err != nil {
		t.Fatalf("enroll: %v (events %+v)", err, events)
	}
	if len(events) == 0 || events[0].Event != "qr" || events[0].QRContent == "" {
		t.Fatalf("the QR code must come first: %+v", events)
	}
	last := events[len(events)-1]
	if last.Event != "done" || last.Status != "confirmed" || last.AccountKey == "" {
		t.Fatalf("last event %+v", last)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Event)
	}
	if !inOrder(kinds, "qr", "need_code", "wrong_code", "done") || strings.Count(strings.Join(kinds, " "), "_code") != 2 {
		t.Fatalf("events %v, want one need_code, then one wrong_code after the wrong code", kinds)
	}
	if !inOrder(statuses, "need_verifycode", "scaned", "confirmed") {
		t.Fatalf("statuses out of order: %v", statuses)
	}
	st, err := store.New(pool, keys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if a, err := st.GetAccount(ctx, last.AccountKey); err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("enrolled account: %+v %v", a, err)
	}

	// The operator's other commands, against the same system.
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	common := []string{"--json", "--temporal-address", dev.HostPort, "--temporal-namespace", ns, "--task-queue", cfg.TaskQueue,
		"--database-url", dbtest.SchemaURL(schema)}
	dbOnly := []string{"--json", "--database-url", dbtest.SchemaURL(schema)} // accounts and windows read the store only
	starter := func(args ...string) []byte {
		t.Helper()
		flags := common
		if args[0] == "accounts" || args[0] == "windows" {
			flags = dbOnly
		}
		var out, errOut bytes.Buffer
		if err := run(ctx, append(args, flags...), nil, &out, &errOut, func(string) string { return "" }); err != nil {
			t.Fatalf("starter %v: %v\n%s", args, err, errOut.String())
		}
		return out.Bytes()
	}
	var accounts []accountRow
	if err := json.Unmarshal(starter("accounts"), &accounts); err != nil || len(accounts) != 1 || accounts[0].AccountKey != last.AccountKey {
		t.Fatalf("accounts: %+v %v", accounts, err)
	}
	var steered struct {
		Status          string `json:"status"`
		PollerSignalled bool   `json:"poller_signalled"`
	}
	for _, step := range []struct{ verb, want string }{{"pause", vocab.AccountPaused}, {"resume", vocab.AccountActive}, {"remove", vocab.AccountDisabled}} {
		if err := json.Unmarshal(starter(step.verb, "--account", last.AccountKey), &steered); err != nil {
			t.Fatal(err)
		}
		if steered.Status != step.want || !steered.PollerSignalled {
			t.Fatalf("%s: %+v, want %s with the poller told", step.verb, steered, step.want)
		}
	}
	var windows []windowRow
	if err := json.Unmarshal(starter("windows"), &windows); err != nil {
		t.Fatalf("windows: %v", err)
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// inOrder reports whether want appears in got as a subsequence.
func inOrder(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestEnrollWithoutAWorkerSaysSo runs `starter enroll` against Temporal with no worker on
// its task queue: instead of sitting silent it says that no QR code came and names the
// task queue a worker should poll.
func TestEnrollWithoutAWorkerSaysSo(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	old := enrollHintAfter
	enrollHintAfter = 200 * time.Millisecond
	t.Cleanup(func() { enrollHintAfter = old })
	queue := devserver.TaskQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"enroll", "--temporal-address", dev.HostPort, "--temporal-namespace", ns, "--task-queue", queue, "--refresh", "50ms"},
			strings.NewReader(""), &out, &errOut, func(string) string { return "" })
	}()
	want := fmt.Sprintf("no QR code after 200ms: is a worker running on task queue %q", queue)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errOut.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("enroll ended: %v\n%s", err, errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hint:\n%s", errOut.String())
		}
	}
	cancel()
	<-done
	if n := strings.Count(errOut.String(), "no QR code"); n != 1 {
		t.Fatalf("hint printed %d times", n)
	}
}

// TestEnrollWithARouteRoutesTheNewBotAndRefusesAnUnknownAgentBeforeAnyQRCode enrolls a
// bot with --mcp-agent: the bot is routed the moment it is enrolled (the route event comes
// after done); an unknown agent is refused before any enrollment starts.
func TestEnrollWithARouteRoutesTheNewBotAndRefusesAnUnknownAgentBeforeAnyQRCode(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ns, tc := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = 200 * time.Millisecond
	srv := httptest.NewServer(ilinksim.New(simCfg).Handler())
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := st.CreateMCPAgent(ctx, time.Now(), "support", "test"); err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.ILinkBaseURL = srv.URL
	cfg.ILinkCDNBaseURL = srv.URL + "/c2c"
	cfg.PollSession = 2 * time.Second
	cfg.Heartbeat = time.Second
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Pool: pool, Keyring: testkit.Keyring, Temporal: tc,
			Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	flags := []string{"--json", "--temporal-address", dev.HostPort, "--temporal-namespace", ns, "--task-queue", cfg.TaskQueue,
		"--database-url", dbtest.SchemaURL(schema), "--refresh", "50ms", "--lifetime", "2m"}

	// An unknown agent: refused before the enrollment starts (no QR code, no workflow).
	var out, errOut bytes.Buffer
	err = run(ctx, append([]string{"enroll", "--mcp-agent", "ghost", "--offer-id", "qo_cli_route_ghost"}, flags...), nil, &out, &errOut,
		func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), string(vocab.CodeMCPAgentNotFound)) || out.Len() != 0 {
		t.Fatalf("enroll --mcp-agent ghost: %v, stdout %q", err, out.String())
	}
	if _, err := tc.DescribeWorkflow(ctx, wfapi.EnrollmentID("qo_cli_route_ghost"), ""); err == nil {
		t.Fatal("a refused enrollment started its workflow")
	}
	// The secret of a webhook route cannot come on stdin: stdin carries the code.
	if code := runMain(ctx, append([]string{"enroll", "--webhook-url", "https://agent.example/", "--webhook-secret-file", "-"}, flags...),
		nil, &out, &errOut, func(string) string { return "" }); code != 2 {
		t.Fatalf("enroll --webhook-secret-file -: exit %d", code)
	}

	stdoutR, stdoutW := io.Pipe()
	cmdDone := make(chan error, 1)
	go func() {
		cmdDone <- run(ctx, append([]string{"enroll", "--mcp-agent", "support", "--offer-id", "qo_cli_route"}, flags...),
			strings.NewReader(""), stdoutW, io.Discard, func(string) string { return "" })
		stdoutW.Close()
	}()
	var events []enrollEvent
	lines := bufio.NewScanner(stdoutR)
	for lines.Scan() {
		var ev enrollEvent
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON event: %q", lines.Text())
		}
		events = append(events, ev)
		if ev.Event == "qr" {
			if _, err := ctl.ScanQR(ctx, "", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := ctl.ConfirmQR(ctx, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := <-cmdDone; err != nil {
		t.Fatalf("enroll: %v (events %+v)", err, events)
	}
	last := events[len(events)-1]
	if last.Event != "route" || last.Route == nil || last.Route.Route != vocab.RouteMCP || last.Route.MCPAgent != "support" ||
		events[len(events)-2].Event != "done" || last.AccountKey != events[len(events)-2].AccountKey {
		t.Fatalf("the last events: %+v", events[len(events)-2:])
	}
	if r, found, err := st.GetRoute(ctx, last.AccountKey); err != nil || !found || r.Kind != vocab.RouteMCP || r.MCPAgent != "support" {
		t.Fatalf("the enrolled bot's route: %+v %v %v", r, found, err)
	}
}
