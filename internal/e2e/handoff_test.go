package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// Each handler kind against the real dev server, PostgreSQL
// and the simulator, configured the way an operator does (gateway.Config, built by
// handoff.New inside gateway.Run), not injected.

const webhookSecret = "e2e-webhook-secret-0123456789abcdef"

// configured makes the worker build its handler from the configuration.
func configured(set func(*gateway.Config)) startOption {
	return func(cfg *gateway.Config, o *gateway.Options) {
		o.Handler = nil
		set(cfg)
	}
}

// logSink keeps the worker's log (also written to stderr) to look for secrets in it.
type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// logsTo sends the worker's log to sink as well.
func logsTo(sink *logSink) startOption {
	return func(_ *gateway.Config, o *gateway.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(sink, os.Stderr), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// assertNotLogged fails if any secret appears in the worker's log.
func (l *logSink) assertNotLogged(t *testing.T, secrets ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() == 0 {
		t.Fatal("nothing was logged")
	}
	for _, secret := range nonEmpty(secrets) {
		if strings.Contains(l.b.String(), secret) {
			t.Errorf("a secret (%d bytes) appears in the worker's log", len(secret))
		}
	}
}

// receiver is the agent's webhook endpoint: it verifies every request with
// webhook.Verify, keeps every delivery and answers as its test tells it.
type receiver struct {
	t          *testing.T
	secret     string
	mu         sync.Mutex
	deliveries []webhook.Delivery
	arrived    chan int
	answer     func(n int, d webhook.Delivery) (int, string)
}

func newReceiver(t *testing.T, answer func(n int, d webhook.Delivery) (int, string)) (*receiver, string) {
	return newReceiverWith(t, webhookSecret, answer)
}

// newReceiverWith is newReceiver for an agent whose requests are signed with secret (a
// bot's route has a secret of its own).
func newReceiverWith(t *testing.T, secret string, answer func(n int, d webhook.Delivery) (int, string)) (*receiver, string) {
	r := &receiver{t: t, secret: secret, answer: answer, arrived: make(chan int, 100)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/ilinkflow"
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil {
		err = webhook.Verify([]byte(r.secret), req.Header.Get(webhook.HeaderTimestamp),
			req.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute)
	}
	if err != nil {
		r.t.Errorf("webhook request does not verify: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var d webhook.Delivery
	if err := json.Unmarshal(body, &d); err != nil {
		r.t.Errorf("webhook body: %v", err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	n := len(r.deliveries)
	r.mu.Unlock()
	r.arrived <- n
	status, answer := r.answer(n, d)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (r *receiver) all() []webhook.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webhook.Delivery(nil), r.deliveries...)
}

// next waits for the n-th delivery.
func (r *receiver) next(n int, within time.Duration) webhook.Delivery {
	r.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-r.arrived:
			if got >= n {
				return r.all()[n-1]
			}
		case <-deadline:
			r.t.Fatalf("delivery %d did not arrive within %v (%d so far)", n, within, len(r.all()))
		}
	}
}

// webhookConfig is the start option of a gateway that hands messages to the webhook at url.
func webhookConfig(url string, reoffer time.Duration) startOption {
	return configured(func(cfg *gateway.Config) { useWebhook(cfg, url, reoffer) })
}

// useWebhook makes cfg hand messages to the test webhook at url, signed with webhookSecret,
// offering a message again after reoffer (0: never).
func useWebhook(cfg *gateway.Config, url string, reoffer time.Duration) {
	cfg.Handler = handoff.KindWebhook
	cfg.WebhookURL = url
	cfg.WebhookSecret = sealing.NewSecret(webhookSecret)
	cfg.WebhookTimeout = 10 * time.Second
	cfg.ReofferAfter = reoffer
}

// enrolledBot enrolls a bot for owner and waits for its poller.
func (s *system) enrolledBot(offerID, owner string) (string, ilinksim.BotInfo) {
	s.t.Helper()
	st := s.enroll(offerID, owner)
	s.eventually("poller running", 30*time.Second, func() (bool, error) { return s.running(s.pollerWF(st.AccountKey)), nil })
	return st.AccountKey, s.botOf(owner)
}

// storedWindow waits for the account's open window (with or without an agent session).
func (s *system) storedWindow(accountKey string) store.Window {
	s.t.Helper()
	var w store.Window
	s.eventually("an open window", time.Minute, func() (bool, error) {
		ws, err := s.store.ListWindows(s.ctx, store.WindowFilter{AccountKey: accountKey, State: vocab.WindowOpen})
		if err != nil || len(ws) != 1 {
			return false, err
		}
		w = ws[0]
		return true, nil
	})
	return w
}

// messageReaches waits until the message has the status.
func (s *system) messageReaches(key, status string, within time.Duration) store.Message {
	s.t.Helper()
	var m store.Message
	s.eventually("message "+status, within, func() (bool, error) {
		var err error
		m, err = s.store.GetMessage(s.ctx, key)
		return err == nil && m.Status == status, err
	})
	return m
}

// sentTexts waits until the simulator received n accepted texts from the bot and returns them.
func (s *system) sentTexts(botID string, n int) []string {
	s.t.Helper()
	var texts []string
	s.eventually(fmt.Sprintf("%d replies at the simulator", n), time.Minute, func() (bool, error) {
		var err error
		texts, err = acceptedTexts(s.ctx, s.ctl, botID)
		return err == nil && len(texts) >= n, err
	})
	return texts
}

func (s *system) windowState(windowID int64) wfapi.WindowState {
	s.t.Helper()
	v, err := s.tc.QueryWorkflow(s.ctx, s.windowWF(windowID), "", wfapi.QueryWindowState)
	if err != nil {
		s.t.Fatal(err)
	}
	var ws wfapi.WindowState
	if err := v.Get(&ws); err != nil {
		s.t.Fatal(err)
	}
	return ws
}

// assertAbsentFromHistory fails if any secret appears in any event of any workflow run.
func (s *system) assertAbsentFromHistory(secrets []string) {
	s.t.Helper()
	secrets = nonEmpty(secrets)
	if len(secrets) == 0 {
		s.t.Fatal("no secret to look for")
	}
	for _, e := range s.executions() {
		var b strings.Builder
		collectText(e.history.ProtoReflect(), &b)
		for _, secret := range secrets {
			if strings.Contains(b.String(), secret) {
				s.t.Errorf("a secret (%d bytes) appears in the history of %s (%s)", len(secret), e.workflowID, e.workflowType)
			}
		}
	}
}

// replayGateway replays every history of the gateway's workflows the test ran against
// the current code: the hand-off paths (replies, finish, re-offer timers) are
// deterministic.
func (s *system) replayGateway() {
	s.t.Helper()
	n := 0
	for _, e := range s.executions() {
		switch e.workflowType {
		case wfapi.ReplyWindowWorkflow, wfapi.AccountPollerWorkflow, wfapi.EnrollmentWorkflow:
		default:
			continue
		}
		// The histories' payloads are encrypted: the replayer decodes them with the codec.
		r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: codecConverter(s.t)})
		if err != nil {
			s.t.Fatal(err)
		}
		workflows.Register(r)
		if err := r.ReplayWorkflowHistory(nil, e.history); err != nil {
			s.t.Errorf("replay %s (%s): %v", e.workflowID, e.workflowType, err)
		}
		n++
	}
	if n < 3 {
		s.t.Fatalf("replayed %d histories, want at least the enrollment, the poller and the window", n)
	}
}

func TestHandOffWebhookSignedDeliveryRepliesAndHandles(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	rcv, url := newReceiver(t, func(_ int, d webhook.Delivery) (int, string) {
		return http.StatusOK, fmt.Sprintf(`{"replies": ["webhook got: %s", "and a second reply"], "handled": true}`, d.Message.Summary)
	})
	logs := &logSink{}
	s := start(t, limits, webhookConfig(url, 0), logsTo(logs))
	const owner = "o9cq8e2ewebhook00000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_webhook", owner)

	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "hello webhook"); err != nil {
		t.Fatal(err)
	}
	w := s.storedWindow(accountKey)
	d := rcv.next(1, time.Minute)
	if d.Message.MessageKey != w.SourceMessageKey || d.Message.Summary != "hello webhook" || d.Message.PeerID != owner ||
		d.Window.ReplyWindowID != w.ReplyWindowID || d.Window.SendsLeft != limits.MaxSends || !d.Window.ExpiresAt.Equal(w.ExpiresAt) ||
		d.SessionID == "" || len(d.SessionToken) < 32 {
		t.Fatalf("delivery %+v for window %+v", d, w)
	}
	texts := s.sentTexts(bot.BotID, 2)
	if strings.Join(texts, "|") != "webhook got: hello webhook|and a second reply" {
		t.Fatalf("simulator received %q", texts)
	}
	s.messageReaches(w.SourceMessageKey, vocab.MessageHandled, 30*time.Second)
	// The delivered token is a real session's (an unknown token is "not valid"), and the
	// handled message closed it.
	sess, err := s.store.ValidateSession(s.ctx, time.Now(), store.ByToken(sealing.NewSecret(d.SessionToken)))
	if store.CodeOf(err) != vocab.CodeInvalidAgentSession || !strings.Contains(err.Error(), "not active") {
		t.Fatalf("session of a handled message: %+v %v, want invalid_agent_session (not active)", sess, err)
	}
	s.eventually("window verdict", 30*time.Second, func() (bool, error) {
		return s.windowState(w.ReplyWindowID).Verdict == vocab.MessageHandled, nil
	})
	if got := len(rcv.all()); got != 1 {
		t.Fatalf("%d deliveries, want 1", got)
	}
	s.assertAbsentFromHistory([]string{d.SessionToken, webhookSecret})
	logs.assertNotLogged(t, d.SessionToken, webhookSecret)
	s.replayGateway()
}

// testAgent is an agent written as a Temporal workflow: it answers through the window
// with the agent package's activities and marks the message handled.
func testAgent(ctx workflow.Context, in agent.Input) (string, error) {
	res, err := agent.WorkflowReplyTo(ctx, in, "agent workflow got: "+in.Summary, "")
	if err != nil {
		return "", err
	}
	if err := agent.WorkflowFinish(ctx, in.WindowWorkflowID, true, ""); err != nil {
		return "", err
	}
	return res.Status, nil
}

func TestHandOffWorkflowAgentRepliesAndFinishesThroughTheAgentPackage(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	agentQueue := devserver.TaskQueue(t) + "-agent"
	s := start(t, limits, configured(func(cfg *gateway.Config) {
		cfg.Handler = handoff.KindWorkflow
		cfg.AgentWorkflow = "TestAgent"
		cfg.AgentTaskQueue = agentQueue
	}))
	// The agent's own worker, on its own task queue, with the agent package's activities.
	aw := worker.New(s.tc, agentQueue, worker.Options{})
	aw.RegisterWorkflowWithOptions(testAgent, workflow.RegisterOptions{Name: "TestAgent"})
	agent.RegisterActivities(aw, s.tc)
	if err := aw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aw.Stop)

	const owner = "o9cq8e2eagentwf0000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_agentwf", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "hello agent workflow"); err != nil {
		t.Fatal(err)
	}
	w := s.storedWindow(accountKey)
	agentID := s.installation().AgentWorkflowID(w.SourceMessageKey)
	s.eventually("agent workflow started", time.Minute, func() (bool, error) {
		_, err := s.tc.DescribeWorkflow(s.ctx, agentID, "")
		return err == nil, nil
	})
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	var status string
	if err := s.tc.GetWorkflow(ctx, agentID, "").Get(ctx, &status); err != nil || status != vocab.AttemptSent {
		t.Fatalf("agent workflow: %q %v, want its reply sent", status, err)
	}
	if texts := s.sentTexts(bot.BotID, 1); len(texts) != 1 || texts[0] != "agent workflow got: hello agent workflow" {
		t.Fatalf("simulator received %q", texts)
	}
	s.messageReaches(w.SourceMessageKey, vocab.MessageHandled, 30*time.Second)

	// The agent workflow's input names the window and the session, never a token.
	hist := s.tc.GetWorkflowHistory(s.ctx, agentID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	if err != nil {
		t.Fatal(err)
	}
	// It is encrypted in history; the agent's data converter reads it.
	raw := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	if strings.Contains(raw.String(), "hello agent workflow") {
		t.Fatal("the agent workflow's input is in plaintext in history")
	}
	dc, err := agent.DataConverter(keyring)
	if err != nil {
		t.Fatal(err)
	}
	var in agent.Input
	if err := dc.FromPayload(raw, &in); err != nil {
		t.Fatal(err)
	}
	if in.ReplyWindowID != w.ReplyWindowID || in.MessageKey != w.SourceMessageKey || in.SessionID == "" || in.Summary != "hello agent workflow" {
		t.Fatalf("agent input %+v", in)
	}

	// Once finished, the window refuses further replies and another verdict, with codes.
	if _, err := agent.Reply(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), "too late", "late-1"); agent.Code(err) != string(vocab.CodeInvalidAgentSession) {
		t.Fatalf("reply after the verdict: %v (code %q)", err, agent.Code(err))
	}
	if err := agent.Finish(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), false, "changed my mind"); agent.Code(err) != string(vocab.CodeAttemptConflict) {
		t.Fatalf("another verdict: %v (code %q)", err, agent.Code(err))
	}
	if err := agent.Finish(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), true, ""); err != nil {
		t.Fatalf("the same verdict again: %v", err)
	}
	if ws := s.windowState(w.ReplyWindowID); ws.Offers != 1 || ws.Verdict != vocab.MessageHandled {
		t.Fatalf("window state %+v", ws)
	}
	s.replayGateway()
}

func TestHandOffEchoRoundTrip(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	s := start(t, limits, configured(func(cfg *gateway.Config) { cfg.Handler = handoff.KindEcho }))
	const owner = "o9cq8e2eecho00000000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_echo", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "ping 🏓"); err != nil {
		t.Fatal(err)
	}
	if texts := s.sentTexts(bot.BotID, 1); len(texts) != 1 || texts[0] != "echo: ping 🏓" {
		t.Fatalf("simulator received %q, want the echo", texts)
	}
	w := s.storedWindow(accountKey)
	s.messageReaches(w.SourceMessageKey, vocab.MessageHandled, 30*time.Second)
	s.replayGateway()
}

// The echo of a text with U+0000 (stored as the user sent it) is still sendable: each NUL
// shows as '␀', and the message is answered and handled. A file's name is shown without
// its path parts.
func TestHandOffEchoAnswersATextWithNULAndShowsSafeFileNames(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	s := start(t, limits, configured(func(cfg *gateway.Config) { cfg.Handler = handoff.KindEcho }))
	const owner = "o9cq8e2eechonul00000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_echo_nul", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "before\x00after"); err != nil {
		t.Fatal(err)
	}
	if texts := s.sentTexts(bot.BotID, 1); texts[0] != "echo: before\u2400after" {
		t.Fatalf("simulator received %q, want the echo with the NUL shown as U+2400", texts)
	}
	first := s.storedWindow(accountKey)
	s.messageReaches(first.SourceMessageKey, vocab.MessageHandled, 30*time.Second)

	const name = "../../etc/<b>x</b>.pdf"
	if _, err := s.ctl.Inject(s.ctx, bot.BotID, ilinksim.InjectRequest{Kind: ilinksim.KindFile, FileName: name}); err != nil {
		t.Fatal(err)
	}
	if texts := s.sentTexts(bot.BotID, 2); texts[1] != "echo: [file "+vocab.SafeFileName(name)+"]" {
		t.Fatalf("simulator received %q, want the file's name without its path", texts)
	}
}

func TestHandOffFailingWebhookIsRetriedThenTheMessageFails(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	// Long enough for the three deliveries on a busy machine: a window that expired first
	// would settle the message with the expiry as its reason.
	limits.WindowLifetime = 45 * time.Second
	// 500, 503 (retried by the HandOff activity's retry policy, backing off 1s then 2s),
	// then a 400: a permanent failure.
	rcv, url := newReceiver(t, func(n int, d webhook.Delivery) (int, string) {
		switch n {
		case 1:
			return http.StatusInternalServerError, `{"error":"database down"}`
		case 2:
			return http.StatusServiceUnavailable, ""
		}
		// A careless receiver echoes the delivery's token in its refusal.
		return http.StatusBadRequest, `{"error":"unknown bot","token":"` + d.SessionToken + `"}`
	})
	logs := &logSink{}
	s := start(t, limits, webhookConfig(url, time.Second), logsTo(logs))
	const owner = "o9cq8e2efailing0000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_failing", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "will it fail"); err != nil {
		t.Fatal(err)
	}
	w := s.storedWindow(accountKey)
	m := s.messageReaches(w.SourceMessageKey, vocab.MessageFailed, time.Minute)
	if !strings.Contains(m.FailureReason, "webhook answered 400") || !strings.Contains(m.FailureReason, "unknown bot") ||
		!strings.Contains(m.FailureReason, sealing.Redacted) {
		t.Fatalf("failure reason %q: want the status and the answer, with the token redacted", m.FailureReason)
	}
	// The window lives on until it expires, without offering the failed message again
	// (re-offer interval 1s, window 45s).
	s.waitClosed(s.windowWF(w.ReplyWindowID), limits.WindowLifetime+time.Minute)
	if _, err := agent.Reply(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), "too late", ""); agent.Code(err) != agent.CodeWindowClosed {
		t.Fatalf("reply to a closed window: %v (code %q), want %s", err, agent.Code(err), agent.CodeWindowClosed)
	}
	ds := rcv.all()
	if len(ds) != 3 {
		t.Fatalf("%d deliveries, want 3 (two retried failures, then the permanent one)", len(ds))
	}
	tokens := map[string]bool{}
	for _, d := range ds {
		tokens[d.SessionToken] = true
		if d.Message.MessageKey != w.SourceMessageKey {
			t.Fatalf("delivery of %s, want %s", d.Message.MessageKey, w.SourceMessageKey)
		}
	}
	if len(tokens) != 3 {
		t.Fatalf("%d distinct session tokens over 3 attempts, want 3", len(tokens))
	}
	if sent, err := s.ctl.Sent(s.ctx, bot.BotID); err != nil || len(sent) != 0 {
		t.Fatalf("simulator received %d sends (%v), want none", len(sent), err)
	}
	var secrets []string
	for tok := range tokens {
		secrets = append(secrets, tok)
	}
	s.assertAbsentFromHistory(append(secrets, webhookSecret))
	logs.assertNotLogged(t, append(secrets, webhookSecret)...)
	for _, tok := range secrets {
		if strings.Contains(m.FailureReason, tok) {
			t.Fatal("the failure reason holds a session token")
		}
	}
	s.replayGateway()
}

func TestHandOffUnhandledMessageIsReofferedWhileItsWindowIsOpen(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	// Long enough that the first offer comes before the expiry on a busy machine (with 15 s
	// the window once expired before its workflow made the first hand-off).
	limits.WindowLifetime = 45 * time.Second
	release := make(chan struct{})
	var once sync.Once
	releaseReceiver := func() { once.Do(func() { close(release) }) }
	rcv, url := newReceiver(t, func(n int, _ webhook.Delivery) (int, string) {
		if n == 2 {
			<-release // the agent gives its verdict while the second offer is in flight
		}
		return http.StatusAccepted, "" // accepted, not handled
	})
	t.Cleanup(releaseReceiver) // runs before the receiver's server closes
	logs := &logSink{}
	s := start(t, limits, webhookConfig(url, time.Second), logsTo(logs))
	const owner = "o9cq8e2ereoffer0000000001@im.wechat"
	accountKey, bot := s.enrolledBot("qo_e2e_reoffer", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "anyone there?"); err != nil {
		t.Fatal(err)
	}
	w := s.storedWindow(accountKey)
	first := rcv.next(1, time.Minute)
	second := rcv.next(2, time.Minute)
	if first.Message.MessageKey != w.SourceMessageKey || second.Message.MessageKey != w.SourceMessageKey {
		t.Fatalf("deliveries of %s and %s, want %s", first.Message.MessageKey, second.Message.MessageKey, w.SourceMessageKey)
	}
	if first.SessionToken == second.SessionToken || first.SessionID == second.SessionID {
		t.Fatal("a re-offer must open a new session with a new token")
	}
	// The agent replies with the re-offer's session and marks the message handled: the
	// re-offers end.
	if res, err := agent.Reply(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), "sorry for the wait", "reoffer-reply-1"); err != nil || res.Status != vocab.AttemptSent {
		t.Fatalf("reply: %+v %v", res, err)
	}
	if err := agent.Finish(s.ctx, s.tc, s.windowWF(w.ReplyWindowID), true, ""); err != nil {
		t.Fatalf("finish: %v", err)
	}
	releaseReceiver()
	s.waitClosed(s.windowWF(w.ReplyWindowID), limits.WindowLifetime+time.Minute)
	if got := len(rcv.all()); got != 2 {
		t.Fatalf("%d deliveries, want 2: the agent's verdict ends the re-offers", got)
	}
	if m, err := s.store.GetMessage(s.ctx, w.SourceMessageKey); err != nil || m.Status != vocab.MessageHandled {
		t.Fatalf("message %+v %v, want handled", m, err)
	}
	if texts := s.sentTexts(bot.BotID, 1); len(texts) != 1 || texts[0] != "sorry for the wait" {
		t.Fatalf("simulator received %q", texts)
	}
	s.assertAbsentFromHistory([]string{first.SessionToken, second.SessionToken, webhookSecret})
	logs.assertNotLogged(t, first.SessionToken, second.SessionToken, webhookSecret)
	s.replayGateway()
}
