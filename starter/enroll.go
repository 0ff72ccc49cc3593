package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// enrollEvent is one line of `starter enroll --json`.
type enrollEvent struct {
	Event      string   `json:"event"` // qr, status, need_code, wrong_code, done, route
	Status     string   `json:"status,omitempty"`
	QRContent  string   `json:"qr_content,omitempty"`
	AccountKey string   `json:"account_key,omitempty"`
	Generation int32    `json:"generation,omitempty"`
	Replaced   []string `json:"replaced,omitempty"`
	Error      string   `json:"error,omitempty"`
	// Route is the route an enrollment with route flags gave the new bot (event route).
	Route *routeResult `json:"route,omitempty"`
}

func enrollCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("enroll", help{"enroll [--offer-id ID] [--lifetime D] [route flags] [--json] [flags]",
		"Enrolls a bot: shows the QR code to scan with WeChat, each status change and the verification-code prompt, and ends with the account key (--json: one JSON event per line, the code read from stdin). " +
			"With a route's flags (as starter route takes them; a workflow route's queue is --agent-task-queue) the new bot is routed to its own agent the moment it is enrolled.",
		"starter enroll --requested-by alice\nstarter enroll --mcp-agent support"}, withTemporal|withDB|withJSON, stderr, getenv)
	offer := fs.String("offer-id", "", "login offer id (qo_...; default: random)")
	lifetime := fs.Duration("lifetime", 5*time.Minute, "how long the QR login stays open")
	requestedBy := fs.String("requested-by", envOr(getenv, "USER", "operator"), "who asked for the enrollment (audit)")
	every := fs.Duration("refresh", 500*time.Millisecond, "how often the state is read")
	rf := addRouteFlags(fs, false, "agent-task-queue")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	route, err := enrollRoute(ctx, c, rf, *requestedBy, getenv)
	if err != nil {
		return err
	}
	if route.st != nil {
		defer route.close()
	}
	if *lifetime <= 0 {
		return usagef("enroll: --lifetime %s: must be positive", *lifetime)
	}
	if *every <= 0 {
		return usagef("enroll: --refresh %s: must be positive", *every)
	}
	if *offer == "" {
		var raw [8]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		*offer = "qo_" + hex.EncodeToString(raw[:])
	}
	tc, err := dialTemporal(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer tc.Close()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(*offer), TaskQueue: c.taskQueue},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: *offer, RequestedBy: *requestedBy, Lifetime: wfapi.Duration(*lifetime)})
	if err != nil {
		return fmt.Errorf("start enrollment: %w", err)
	}
	f := &enrollFollower{c: c, tc: tc, run: run, lines: bufio.NewScanner(stdin), terminal: isTerminal(stdin), stdout: stdout, stderr: stderr,
		askedAt: -1, started: time.Now()}
	done := make(chan error, 1)
	var final wfapi.EnrollmentState
	go func() { done <- run.Get(ctx, &final) }()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("enrollment: %w", err)
			}
			if err := f.ended(final); err != nil {
				return err
			}
			return route.apply(ctx, f, final.AccountKey)
		case <-ctx.Done():
			_ = tc.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), wfapi.SignalCancel, nil)
			return ctx.Err()
		case <-tick.C:
			if err := f.refresh(ctx); err != nil {
				return err
			}
		}
	}
}

// enrollFollower shows a running enrollment to the operator: its QR code, each status,
// and the verification-code prompts, whose answers it signals to the workflow.
type enrollFollower struct {
	c     *conn
	tc    client.Client
	run   client.WorkflowRun
	lines *bufio.Scanner
	// terminal: stdin is a terminal, which may cut a pasted line (warnIfCut).
	terminal bool
	stdout   io.Writer
	stderr   io.Writer

	lastStatus, shownQR string
	// askedAt is the count of refused codes when the code was last asked for (-1: not
	// asked): a prompt is shown once per code iLink wants.
	askedAt int
	hinted  bool
	started time.Time
}

// emit writes one event: a JSON line with --json, else the text.
func (f *enrollFollower) emit(ev enrollEvent, text string) error {
	if f.c.json {
		return printJSON(f.stdout, ev)
	}
	_, err := fmt.Fprintln(f.stdout, text)
	return err
}

// ended shows how the enrollment ended; an enrollment that did not confirm is an error.
func (f *enrollFollower) ended(final wfapi.EnrollmentState) error {
	if final.Status != f.lastStatus && final.Status != "" {
		// The workflow ended before a query showed its last status: show it now, so the
		// statuses always end with the final one.
		if err := f.emit(enrollEvent{Event: "status", Status: final.Status}, "status: "+final.Status); err != nil {
			return err
		}
	}
	if err := f.emit(enrollEvent{Event: "done", Status: final.Status, AccountKey: final.AccountKey, Generation: final.Generation,
		Replaced: final.Replaced, Error: final.Error}, doneText(final)); err != nil {
		return err
	}
	if final.Status != vocab.EnrollmentConfirmed {
		return fmt.Errorf("enrollment ended %s", final.Status)
	}
	return nil
}

// refresh reads the enrollment's state and shows what changed: a new QR code, a new
// status, a request for the verification code (read from the terminal and signalled).
func (f *enrollFollower) refresh(ctx context.Context) error {
	if f.shownQR == "" && !f.hinted && time.Since(f.started) >= enrollHintAfter {
		// Without a worker on the task queue nothing moves: say so instead of sitting silent.
		f.hinted = true
		fmt.Fprintf(f.stderr, "starter: no QR code after %s: is a worker running on task queue %q (namespace %q, Temporal at %s)? Start one with `go run ./worker` (see the README, \"Run a worker\").\n",
			enrollHintAfter, f.c.taskQueue, f.c.namespace, f.c.temporal)
	}
	v, err := f.tc.QueryWorkflow(ctx, f.run.GetID(), f.run.GetRunID(), wfapi.QueryEnrollmentState)
	if err != nil {
		return nil // the first workflow task may not have run yet
	}
	var st wfapi.EnrollmentState
	if err := v.Get(&st); err != nil {
		return err
	}
	if st.QRContent != "" && st.QRContent != f.shownQR {
		f.shownQR = st.QRContent
		if err := f.emit(enrollEvent{Event: "qr", QRContent: st.QRContent}, renderQR(st.QRContent)); err != nil {
			return err
		}
	}
	if st.Status != f.lastStatus && st.Status != vocab.EnrollmentStarting {
		f.lastStatus = st.Status
		if err := f.emit(enrollEvent{Event: "status", Status: st.Status}, "status: "+st.Status); err != nil {
			return err
		}
	}
	if st.NeedsCode && st.WrongCodes > f.askedAt {
		if err := f.askCode(ctx, st); err != nil {
			return err
		}
	}
	if !st.NeedsCode && st.Status != vocab.EnrollmentNeedsCode {
		f.askedAt = st.WrongCodes - 1 // iLink may ask again later: prompt then
	}
	return nil
}

// askCode prompts for the verification code (saying when the last one was wrong) and
// signals it to the enrollment.
func (f *enrollFollower) askCode(ctx context.Context, st wfapi.EnrollmentState) error {
	ev, text := enrollEvent{Event: "need_code"}, "WeChat shows a number: type it here and press Enter:"
	if f.askedAt >= 0 && st.WrongCodes > 0 {
		ev, text = enrollEvent{Event: "wrong_code"}, "That code was wrong: type the number WeChat shows now and press Enter:"
	}
	f.askedAt = st.WrongCodes
	if err := f.emit(ev, text); err != nil {
		return err
	}
	code, err := f.readCode()
	if err != nil {
		return err
	}
	if err := f.tc.SignalWorkflow(ctx, f.run.GetID(), f.run.GetRunID(), wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code}); err != nil {
		return fmt.Errorf("send the verification code: %w", err)
	}
	return nil
}

// readCode reads the verification code. A line the terminal may have cut is not sent (a
// code is a few digits: that line is a mistaken paste, and a wrong code costs an attempt
// at iLink): the user is warned (warnIfCut; on stderr with --json, whose stdout carries
// JSON lines only) and asked again.
func (f *enrollFollower) readCode() (string, error) {
	w := f.stdout
	if f.c.json {
		w = f.stderr
	}
	for {
		if !f.lines.Scan() {
			return "", errors.New("no verification code on standard input")
		}
		if !warnIfCut(w, f.lines.Text(), f.terminal) {
			return strings.TrimSpace(f.lines.Text()), nil
		}
		fmt.Fprintln(w, "That line was not sent as the code: type the number WeChat shows and press Enter:")
	}
}

// enrollHintAfter is how long enroll waits for a QR code before it suggests that no
// worker is running.
var enrollHintAfter = 10 * time.Second

// renderQR draws the QR code of content for a terminal, with the content below it.
func renderQR(content string) string {
	q, err := qrcode.New(content, qrcode.Medium)
	if err != nil {
		return "scan this link with WeChat: " + content
	}
	return q.ToSmallString(false) + "\nscan with WeChat: " + content
}

func doneText(st wfapi.EnrollmentState) string {
	if st.Status != vocab.EnrollmentConfirmed {
		msg := "enrollment ended: " + st.Status
		if st.Error != "" {
			msg += " (" + st.Error + ")"
		}
		return msg
	}
	msg := fmt.Sprintf("enrolled: account %s (generation %d)", st.AccountKey, st.Generation)
	if len(st.Replaced) > 0 {
		msg += "; replaced " + strings.Join(st.Replaced, ", ")
	}
	return msg
}

// enrollRouteChoice is the route an enrollment gives its new bot: none without route
// flags.
type enrollRouteChoice struct {
	in    store.RouteInput
	st    *store.Store
	close func()
}

// enrollRoute checks the route flags of an enrollment before anyone scans a QR code: the
// route's settings, and that its MCP agent exists and is not revoked. The secret of a
// webhook route comes from a file: stdin carries the verification code.
func enrollRoute(ctx context.Context, c *conn, rf *routeFlags, by string, getenv func(string) string) (enrollRouteChoice, error) {
	if rf.modes() == 0 {
		return enrollRouteChoice{}, nil
	}
	if *rf.secretFile == "-" {
		return enrollRouteChoice{}, usagef("enroll: --webhook-secret-file -: stdin carries the verification code; give the secret in a file")
	}
	in, err := rf.input("enroll", by, nil, getenv)
	if err != nil {
		return enrollRouteChoice{}, err
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return enrollRouteChoice{}, err
	}
	if in.Kind == vocab.RouteMCP {
		agents, err := st.ListMCPAgents(ctx)
		if err != nil {
			closeFn()
			return enrollRouteChoice{}, err
		}
		i := slices.IndexFunc(agents, func(a store.MCPAgent) bool { return a.Name == in.MCPAgent })
		switch {
		case i < 0:
			closeFn()
			return enrollRouteChoice{}, fmt.Errorf("enroll: no MCP agent is named %s (starter mcp-agent add %s) [%s]", in.MCPAgent, in.MCPAgent, vocab.CodeMCPAgentNotFound)
		case agents[i].RevokedAt != nil:
			closeFn()
			return enrollRouteChoice{}, fmt.Errorf("enroll: the token of MCP agent %s is revoked (starter mcp-agent token %s issues a new one)", in.MCPAgent, in.MCPAgent)
		}
	}
	return enrollRouteChoice{in: in, st: st, close: closeFn}, nil
}

// apply routes the enrolled bot (nothing without a route).
func (r enrollRouteChoice) apply(ctx context.Context, f *enrollFollower, accountKey string) error {
	if r.st == nil {
		return nil
	}
	in := r.in
	in.AccountKey = accountKey
	got, err := r.st.SetRoute(ctx, time.Now(), in)
	if err != nil {
		return fmt.Errorf("enrolled %s, but its route was not set (starter route --account %s ...): %w", accountKey, accountKey, err)
	}
	res := routeResult{AccountKey: accountKey, Route: got.Kind, WebhookHost: got.WebhookHost, WorkflowType: got.WorkflowType,
		TaskQueue: got.TaskQueue, MCPAgent: got.MCPAgent, Version: got.Version, Changed: true}
	return f.emit(enrollEvent{Event: "route", AccountKey: accountKey, Route: &res},
		fmt.Sprintf("route: %s answers to %s (route version %d)", accountKey, routeText(res), got.Version))
}
