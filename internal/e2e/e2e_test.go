// Package e2e runs ilinkflow end to end: the real Temporal dev server (the pinned
// `temporal` CLI), the real PostgreSQL and the iLink simulator over loopback, with the
// worker running in the test process (gateway.Run).
package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestMain(m *testing.M) {
	testkit.WaitingParallel(8)
	code := devserver.Main(m)
	removeWorkerBinary()
	removeStarterBinary()
	_ = os.Remove(emptyConfigFile)
	os.Exit(code)
}

var keyring = testkit.Keyring

// recorder is the agent handler of the test: it keeps every delivery (and so every
// session token, which must never appear in history).
type recorder struct {
	mu         sync.Mutex
	deliveries []handoff.Delivery
}

func (r *recorder) Deliver(_ context.Context, d handoff.Delivery) (handoff.Answer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
	return handoff.Answer{}, nil
}

func (r *recorder) tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.deliveries {
		out = append(out, d.SessionToken.Reveal())
	}
	return out
}

// system is one running gateway with its simulator, store and Temporal namespace.
type system struct {
	t       testing.TB
	ctx     context.Context
	tc      client.Client
	ns      string
	tq      string
	store   *store.Store
	pool    *pgxpool.Pool
	sim     *ilinksim.Server
	srv     *httptest.Server
	ctl     *ilinksim.Control
	handler *recorder
	limits  store.Limits
}

// startOption adjusts the worker's configuration and options before it starts (e.g. to
// configure the agent handler instead of the test's recorder).
type startOption func(*gateway.Config, *gateway.Options)

func start(t *testing.T, limits store.Limits, opts ...startOption) *system {
	t.Helper()
	dev := devserver.Start(t)
	ns, tc := newNamespace(t, dev)
	return startIn(t, ns, tc, devserver.TaskQueue(t), limits, opts...)
}

// newNamespace is dev.NewNamespace with the client dialed with the payload codec of
// keyring, as production clients are: payloads are encrypted in Temporal.
func newNamespace(t *testing.T, dev *devserver.Server) (string, client.Client) {
	t.Helper()
	return dev.NewNamespaceDial(t, client.Options{DataConverter: codecConverter(t)})
}

// codecConverter is the data converter of the e2e clients: the payload codec of keyring.
func codecConverter(t testing.TB) converter.DataConverter {
	t.Helper()
	dc, err := payloadcodec.DataConverter(keyring)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// dialCodec opens another client to namespace ns with the payload codec of keys, closed
// at t's cleanup.
func dialCodec(t *testing.T, dev *devserver.Server, ns string, keys *sealing.Keyring) client.Client {
	t.Helper()
	dc, err := payloadcodec.DataConverter(keys)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := dev.Dial(context.Background(), client.Options{Namespace: ns, DataConverter: dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return tc
}

// startIn starts a gateway in namespace ns on task queue tq, with a database (an
// installation), a simulator and an agent recorder of its own: several of them in one
// namespace are installations side by side.
func startIn(t *testing.T, ns string, tc client.Client, tq string, limits store.Limits, opts ...startOption) *system {
	t.Helper()
	pool := dbtest.NewPool(t)
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = time.Second
	simCfg.ThrottleBurst = 0
	sim := ilinksim.New(simCfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	cfg := gateway.DefaultConfig()
	cfg.Retention = store.RetentionPolicy{} // no retention schedule: its runs would join the namespace's workflows the tests count
	cfg.TaskQueue = tq
	cfg.ILinkBaseURL = srv.URL
	cfg.ILinkCDNBaseURL = srv.URL + "/c2c"
	cfg.Limits = limits
	cfg.SendGap = 5 * time.Millisecond
	cfg.PollSession = 3 * time.Second
	cfg.Heartbeat = time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.HTTPAddr = "" // no HTTP server: tests run in parallel (replyapi_test.go serves it on port 0)
	st, err := store.New(pool, keyring, limits)
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: context.Background(), tc: tc, ns: ns, tq: cfg.TaskQueue, store: st, pool: pool, sim: sim, srv: srv,
		ctl: ilinksim.NewControl(srv.URL, srv.Client()), handler: &recorder{}, limits: limits}

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	gopts := gateway.Options{Pool: pool, Keyring: keyring, Temporal: tc, Handler: s.handler,
		Ready: func(gateway.ReconcileReport) { close(ready) }}
	for _, o := range opts {
		o(&cfg, &gopts)
	}
	go func() {
		done <- gateway.Run(ctx, cfg, gopts)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("gateway did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("gateway did not become ready")
	}
	return s
}

// eventually polls cond until it holds or the deadline passes (waiting for the system,
// not asserting timing).
func (s *system) eventually(what string, within time.Duration, cond func() (bool, error)) {
	s.t.Helper()
	testkit.Eventually(s.t, what, within, cond)
}

// enroll runs an Enrollment to confirmation by a scripted QR scan of owner.
func (s *system) enroll(offerID, owner string) wfapi.EnrollmentState {
	s.t.Helper()
	run, err := s.tc.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offerID), TaskQueue: s.tq},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offerID, RequestedBy: "e2e", Lifetime: wfapi.Duration(time.Minute), PollGap: wfapi.Duration(100 * time.Millisecond)})
	if err != nil {
		s.t.Fatal(err)
	}
	var qrcode string
	s.eventually("QR code issued", 30*time.Second, func() (bool, error) {
		sessions, err := s.ctl.QRSessions(s.ctx)
		for _, q := range sessions {
			if q.Status == "wait" {
				qrcode = q.QRCode
				return true, nil
			}
		}
		return false, err
	})
	if _, err := s.ctl.ScanQR(s.ctx, qrcode, owner); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.ctl.ConfirmQR(s.ctx, qrcode); err != nil {
		s.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := run.Get(s.ctx, &st); err != nil {
		s.t.Fatal(err)
	}
	if st.Status != "confirmed" || st.AccountKey == "" {
		s.t.Fatalf("enrollment ended %+v", st)
	}
	return st
}

func (s *system) botOf(owner string) ilinksim.BotInfo {
	s.t.Helper()
	bots, err := s.ctl.Bots(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := len(bots) - 1; i >= 0; i-- {
		if bots[i].Owner == owner && !bots[i].Dead {
			return bots[i]
		}
	}
	s.t.Fatalf("no live simulator bot for %s", owner)
	return ilinksim.BotInfo{}
}

// installation is the installation of the system's database.
func (s *system) installation() wfapi.Installation {
	s.t.Helper()
	inst, err := s.store.Installation(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return inst
}

// windowWF is the workflow id of one of the system's reply windows.
func (s *system) windowWF(windowID int64) string { return s.installation().WindowWorkflowID(windowID) }

// pollerWF is the workflow id of the poller of one of the system's accounts.
func (s *system) pollerWF(accountKey string) string { return s.installation().PollerID(accountKey) }

func (s *system) running(workflowID string) bool {
	d, err := s.tc.DescribeWorkflow(s.ctx, workflowID, "")
	return err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// openWindow waits for the account's open window and its workflow's agent session.
func (s *system) openWindow(accountKey string, not int64) (store.Window, wfapi.WindowState) {
	s.t.Helper()
	var w store.Window
	var ws wfapi.WindowState
	s.eventually("an open window with a workflow and a session", time.Minute, func() (bool, error) {
		ws2, err := s.store.ListWindows(s.ctx, store.WindowFilter{AccountKey: accountKey, State: vocab.WindowOpen})
		if err != nil || len(ws2) != 1 || ws2[0].ReplyWindowID == not {
			return false, err
		}
		w = ws2[0]
		v, err := s.tc.QueryWorkflow(s.ctx, s.windowWF(w.ReplyWindowID), "", wfapi.QueryWindowState)
		if err != nil {
			return false, err
		}
		if err := v.Get(&ws); err != nil {
			return false, err
		}
		return ws.SessionID != "", nil
	})
	return w, ws
}

// send sends a reply through the window's send Update, asking for the refusal rather
// than a hold when the window cannot carry it (the tests of the quota itself).
func (s *system) send(windowID int64, text string) (wfapi.SendResult, error) {
	h, err := s.tc.UpdateWorkflow(s.ctx, client.UpdateWorkflowOptions{
		WorkflowID: s.windowWF(windowID), UpdateName: wfapi.UpdateSend,
		Args: []any{wfapi.SendRequest{Type: "text", Text: text, NoHold: true}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return wfapi.SendResult{}, err
	}
	var res wfapi.SendResult
	err = h.Get(s.ctx, &res)
	return res, err
}

func (s *system) waitClosed(workflowID string, within time.Duration) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, within)
	defer cancel()
	if err := s.tc.GetWorkflow(ctx, workflowID, "").Get(ctx, nil); err != nil {
		s.t.Fatalf("workflow %s did not complete: %v", workflowID, err)
	}
}

func refusalCode(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

func TestEndToEndEnrollPollReplySupersedeExpireReplace(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	// Long enough that ten sends fit in the first window on a loaded machine (CI runs every
	// package at once, the e2e tests in parallel): with 20 s the tenth send once found the
	// window expired while the 200-reply burst test ran beside it.
	limits.WindowLifetime = time.Minute
	limits.FinalSlots = 0 // every send of the window is open to any reply here
	s := start(t, limits)
	const owner = "o9cq8e2eowner000000000001@im.wechat"

	// Enrollment by scripted QR scan → the poller starts.
	first := s.enroll("qo_e2e_first", owner)
	s.eventually("poller running", 30*time.Second, func() (bool, error) { return s.running(s.pollerWF(first.AccountKey)), nil })
	bot := s.botOf(owner)

	// A user message becomes a deliverable message with an open window and its workflow.
	in1, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "hello gateway")
	if err != nil {
		t.Fatal(err)
	}
	w1, ws1 := s.openWindow(first.AccountKey, 0)
	if len(s.handler.tokens()) == 0 {
		t.Fatal("the deliverable message was not handed to the agent")
	}

	// Ten sends are accepted; the eleventh is refused by the validator without a call.
	for i := 1; i <= 10; i++ {
		res, err := s.send(w1.ReplyWindowID, fmt.Sprintf("reply %d", i))
		if err != nil || res.Status != vocab.AttemptSent {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
	}
	if _, err := s.send(w1.ReplyWindowID, "eleventh"); refusalCode(err) != string(vocab.CodeReplyQuotaExhausted) {
		t.Fatalf("eleventh send: %v, want a reply_quota_exhausted refusal", err)
	}
	sent, err := s.ctl.Sent(s.ctx, bot.BotID)
	if err != nil || len(sent) != 10 {
		t.Fatalf("simulator received %d sends (%v), want 10", len(sent), err)
	}
	_ = ws1

	// A newer user message supersedes the window: its workflow ends.
	in2, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "a newer message")
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := s.openWindow(first.AccountKey, w1.ReplyWindowID)
	s.waitClosed(s.windowWF(w1.ReplyWindowID), 30*time.Second)
	if got, _ := s.store.GetWindow(s.ctx, w1.ReplyWindowID); got.State != vocab.WindowSuperseded {
		t.Fatalf("first window is %s, want superseded", got.State)
	}
	if res, err := s.send(w2.ReplyWindowID, "one reply in the new window"); err != nil || res.Status != vocab.AttemptSent {
		t.Fatalf("send in the new window: %+v %v", res, err)
	}

	// The new window expires on its timer.
	s.waitClosed(s.windowWF(w2.ReplyWindowID), limits.WindowLifetime+time.Minute)
	if got, _ := s.store.GetWindow(s.ctx, w2.ReplyWindowID); got.State != vocab.WindowExpired {
		t.Fatalf("second window is %s, want expired", got.State)
	}

	// A second enrollment of the same owner replaces the account and stops its poller.
	// iLink answers binded_redirect while the owner's bot is alive in our token list, so
	// the old bot dies first (the owner bound it elsewhere); its poller sees -14 and pauses.
	if err := s.ctl.KillBot(s.ctx, bot.BotID); err != nil {
		t.Fatal(err)
	}
	second := s.enroll("qo_e2e_second", owner)
	if len(second.Replaced) != 1 || second.Replaced[0] != first.AccountKey {
		t.Fatalf("second enrollment replaced %v, want [%s]", second.Replaced, first.AccountKey)
	}
	s.waitClosed(s.pollerWF(first.AccountKey), time.Minute)
	old, _ := s.store.GetAccount(s.ctx, first.AccountKey)
	if old.Status != vocab.AccountReplaced {
		t.Fatalf("first account is %s, want replaced", old.Status)
	}
	s.eventually("new poller running", 30*time.Second, func() (bool, error) { return s.running(s.pollerWF(second.AccountKey)), nil })

	// No secret in history: bot tokens, context tokens and session tokens.
	secrets := []string{bot.Token, s.botOf(owner).Token, in1.ContextToken, in2.ContextToken}
	secrets = append(secrets, s.handler.tokens()...)
	for _, m := range sent {
		secrets = append(secrets, m.ContextToken)
	}
	s.assertNoSecretInHistory(secrets)
	s.recordHistories()
	s.reportActions(w2.ReplyWindowID)
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// The poller's state query reflects an operator's pause at once, while its poll activity
// is still running (the signal is applied when it arrives, not when the poll returns).
func TestThePollerStateReflectsAPauseAtOnce(t *testing.T) {
	t.Parallel()
	s := start(t, store.DefaultLimits(), func(c *gateway.Config, _ *gateway.Options) { c.PollSession = time.Hour })
	acct := s.enroll("qo_e2e_pause_state", "o9cq8pause-state@im.wechat")
	id := s.pollerWF(acct.AccountKey)
	s.eventually("the bot polled", 30*time.Second, func() (bool, error) {
		a, err := s.store.GetAccount(s.ctx, acct.AccountKey)
		return err == nil && a.LastPollAt != nil, err
	})
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := s.tc.SignalWorkflow(s.ctx, id, "", wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: "e2e"}); err != nil {
		t.Fatal(err)
	}
	v, err := s.tc.QueryWorkflow(s.ctx, id, "", wfapi.QueryPollerState)
	if err != nil {
		t.Fatal(err)
	}
	var st wfapi.PollerState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "paused" || st.PausedUntil == nil || !st.PausedUntil.Equal(until) {
		t.Fatalf("state right after the pause signal: %+v, want paused until %v", st, until)
	}
}
