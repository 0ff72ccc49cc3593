package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// apiSystem is a running gateway that serves its HTTP endpoints (reply API, /metrics,
// /healthz) on a loopback port, with the Temporal client dialled with the metrics
// registry's SDK handler.
type apiSystem struct {
	*system
	pool *pgxpool.Pool
	base string
	reg  *metrics.Registry
	http *http.Client
	// logs keeps the gateway's log, to look for secrets in it.
	logs *logSink
	// dbProxy, with startAPIWith(..., viaProxy true), is the proxy the gateway reaches
	// PostgreSQL through (pool, the test's own, connects directly).
	dbProxy *tcpproxy.Proxy
}

// startAPI starts a gateway like start does, with HTTP served on 127.0.0.1:0; tune
// adjusts the simulator's and the gateway's configuration.
func startAPI(t *testing.T, limits store.Limits, tune func(*ilinksim.Config, *gateway.Config)) *apiSystem {
	t.Helper()
	return startAPIWith(t, limits, tune, false)
}

// startAPIWith is startAPI whose gateway, with viaProxy, reaches PostgreSQL through a
// proxy the test can cut or blackhole (apiSystem.dbProxy).
func startAPIWith(t *testing.T, limits store.Limits, tune func(*ilinksim.Config, *gateway.Config), viaProxy bool) *apiSystem {
	t.Helper()
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	reg, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := payloadcodec.DataConverter(keyring)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := dev.Dial(context.Background(), client.Options{Namespace: ns, MetricsHandler: reg.TemporalHandler(), DataConverter: dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	pool := dbtest.NewPool(t)
	gatewayPool := pool
	var proxy *tcpproxy.Proxy
	if viaProxy {
		cc := pool.Config()
		if proxy, err = tcpproxy.New(net.JoinHostPort(cc.ConnConfig.Host, strconv.Itoa(int(cc.ConnConfig.Port)))); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		cc.ConnConfig.Host, cc.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
		if gatewayPool, err = pgxpool.NewWithConfig(context.Background(), cc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gatewayPool.Close)
	}
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = time.Second
	simCfg.ThrottleBurst = 0

	cfg := gateway.DefaultConfig()
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.Limits = limits
	cfg.SendGap = 5 * time.Millisecond
	cfg.PollSession = 3 * time.Second
	cfg.Heartbeat = time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.HTTPAddr = "127.0.0.1:0"
	if tune != nil {
		tune(&simCfg, &cfg)
	}
	sim := ilinksim.New(simCfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	cfg.ILinkBaseURL = srv.URL
	cfg.ILinkCDNBaseURL = srv.URL + "/c2c"
	st, err := store.New(pool, keyring, cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: context.Background(), tc: tc, ns: ns, tq: cfg.TaskQueue, store: st, sim: sim, srv: srv,
		ctl: ilinksim.NewControl(srv.URL, srv.Client()), handler: &recorder{}, limits: cfg.Limits}

	logs := &logSink{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, os.Stderr), nil))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	bound := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		var handler handoff.Handler = s.handler
		if cfg.Handler == handoff.KindWebhook {
			handler = nil // the configured webhook hands off
		}
		done <- gateway.Run(ctx, cfg, gateway.Options{Pool: gatewayPool, Keyring: keyring, Temporal: tc, Handler: handler,
			Metrics: reg, Logger: logger, HTTPStarted: func(a net.Addr) { bound <- a },
			Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	var addr net.Addr
	select {
	case <-ready:
		addr = <-bound // served before the reconcile
	case err := <-done:
		t.Fatalf("gateway did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("gateway did not become ready")
	}
	return &apiSystem{system: s, pool: pool, base: "http://" + addr.String(), reg: reg, http: &http.Client{Timeout: 2 * time.Minute}, logs: logs,
		dbProxy: proxy}
}

// answer is one HTTP answer of the gateway.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", a.status, err, a.body)
	}
}

// errorCode returns the code of an error body ("" for a non-error body).
func (a answer) errorCode(t *testing.T) string {
	t.Helper()
	var b replyapi.ErrorBody
	a.json(t, &b)
	if b.Error.Code != "" && b.Error.Message == "" {
		t.Fatalf("error %q without a message", b.Error.Code)
	}
	return b.Error.Code
}

// do sends a request; headers are name/value pairs.
func (a *apiSystem) do(method, path string, body []byte, headers ...string) answer {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// reply posts a text reply with a session token (and an idempotency key when given).
func (a *apiSystem) reply(token, text, key string) answer {
	a.t.Helper()
	body, _ := json.Marshal(replyapi.ReplyRequest{Type: "text", Text: text})
	h := []string{"Authorization", "Bearer " + token}
	if key != "" {
		h = append(h, "Idempotency-Key", key)
	}
	return a.do(http.MethodPost, "/v1/reply", body, h...)
}

// tokenOf returns the session token handed to the agent for a window.
func (a *apiSystem) tokenOf(windowID int64) string {
	a.t.Helper()
	a.handler.mu.Lock()
	defer a.handler.mu.Unlock()
	for i := len(a.handler.deliveries) - 1; i >= 0; i-- {
		if d := a.handler.deliveries[i]; d.Window.ReplyWindowID == windowID {
			return d.SessionToken.Reveal()
		}
	}
	a.t.Fatalf("no delivery for window %d", windowID)
	return ""
}

// replyTables are every table of the schema; accounts leaves out the poll-health columns
// the running poller writes on every round trip (last_poll_at, and the cursor with its
// time on a page), which no reply touches.
var replyTables = map[string]string{
	"accounts":             "to_jsonb(t) - 'last_poll_at' - 'cursor' - 'cursor_updated_at'",
	"account_secrets":      "to_jsonb(t)",
	"login_offers":         "to_jsonb(t)",
	"enrollment_audit":     "to_jsonb(t)",
	"inbound_messages":     "to_jsonb(t)",
	"inbound_images":       "to_jsonb(t)",
	"reply_windows":        "to_jsonb(t)",
	"reply_window_secrets": "to_jsonb(t)",
	"send_attempts":        "to_jsonb(t)",
	"agent_sessions":       "to_jsonb(t)",
	"outbound_media":       "to_jsonb(t)",
	"held_replies":         "to_jsonb(t)",
}

// digest fingerprints every row of every table (as store/harness_test.go does), so a
// test can assert that a refused request wrote nothing.
func (a *apiSystem) digest() string {
	a.t.Helper()
	var out strings.Builder
	for _, table := range []string{"accounts", "account_secrets", "login_offers", "enrollment_audit", "inbound_messages",
		"inbound_images", "reply_windows", "reply_window_secrets", "send_attempts", "agent_sessions", "outbound_media", "held_replies"} {
		var d *string
		q := "SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM (SELECT " + replyTables[table] + " AS r FROM " + table + " t) x"
		if err := a.pool.QueryRow(a.ctx, q).Scan(&d); err != nil {
			a.t.Fatalf("digest %s: %v", table, err)
		}
		if d != nil {
			fmt.Fprintf(&out, "%s:%s;", table, *d)
		}
	}
	return out.String()
}

// sentTexts is what the simulator accepted from a bot, in order.
func (a *apiSystem) sentTexts(botID string) []string {
	a.t.Helper()
	out, err := acceptedTexts(a.ctx, a.ctl, botID)
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

// refused asserts that a request is refused with status and code, writes nothing and
// sends nothing.
func (a *apiSystem) refused(name string, status int, code, botID string, call func() answer) answer {
	a.t.Helper()
	before, sentBefore := a.digest(), len(a.sentTexts(botID))
	got := call()
	if got.status != status || got.errorCode(a.t) != code {
		a.t.Fatalf("%s: answered %d %s, want %d %s", name, got.status, got.body, status, code)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		a.t.Fatalf("%s: content type %q", name, ct)
	}
	if after := a.digest(); after != before {
		a.t.Fatalf("%s: a refused request wrote to the store", name)
	}
	if n := len(a.sentTexts(botID)); n != sentBefore {
		a.t.Fatalf("%s: a refused request reached the simulator (%d sends, was %d)", name, n, sentBefore)
	}
	return got
}

func TestReplyAPIRepliesAndRefusesWritingNothing(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxSends = 3
	limits.FinalSlots = 0 // the quota itself; holding has its own tests (held_test.go)
	a := startAPI(t, limits, nil)
	const owner = "o9cq8replyapiowner0000001@im.wechat"
	acct := a.enroll("qo_replyapi", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "hello reply api"); err != nil {
		t.Fatal(err)
	}
	w1, _ := a.openWindow(acct.AccountKey, 0)
	tok1 := a.tokenOf(w1.ReplyWindowID)
	auth := []string{"Authorization", "Bearer " + tok1}

	// Bad input: 400, nothing read from the window, nothing written, nothing sent.
	post := func(body string, h ...string) func() answer {
		return func() answer {
			return a.do(http.MethodPost, "/v1/reply", []byte(body), append(append([]string{}, auth...), h...)...)
		}
	}
	big := `{"type":"text","text":"` + strings.Repeat("x", replyapi.DefaultMaxBodyBytes) + `"}`
	for _, c := range []struct {
		name, body, code string
		headers          []string
	}{
		{"body over 64 KiB", big, replyapi.CodeBodyTooLarge, nil},
		{"bad JSON", `{"type":"text","text":`, replyapi.CodeInvalidJSON, nil},
		{"not an object", `["text"]`, replyapi.CodeInvalidJSON, nil},
		{"data after the object", `{"type":"text","text":"a"} {}`, replyapi.CodeInvalidJSON, nil},
		{"unknown field", `{"type":"text","txt":"a"}`, replyapi.CodeInvalidJSON, nil},
		{"empty body", ``, replyapi.CodeInvalidJSON, nil},
		{"unknown type", `{"type":"sticker","text":"a"}`, replyapi.CodeUnsupportedType, nil},
		{"media type as JSON (media is multipart)", `{"type":"image","media":{"encrypt_query_param":"x"}}`, replyapi.CodeUnsupportedType, nil},
		{"missing type", `{"text":"a"}`, replyapi.CodeUnsupportedType, nil},
		{"text over 16 KiB", `{"type":"text","text":"` + strings.Repeat("y", 16*1024+1) + `"}`, replyapi.CodeTextTooLong, nil},
		{"empty text", `{"type":"text","text":""}`, replyapi.CodeInvalidText, nil},
		{"blank text", `{"type":"text","text":"  \n "}`, replyapi.CodeInvalidText, nil},
		{"idempotency key with a space", `{"type":"text","text":"a"}`, replyapi.CodeInvalidIdempotencyKey, []string{"Idempotency-Key", "a b"}},
		{"idempotency key too long", `{"type":"text","text":"a"}`, replyapi.CodeInvalidIdempotencyKey, []string{"Idempotency-Key", strings.Repeat("k", replyapi.MaxIdempotencyKey+1)}},
	} {
		a.refused(c.name, http.StatusBadRequest, c.code, bot.BotID, post(c.body, c.headers...))
	}
	a.refused("done: bad status", http.StatusBadRequest, replyapi.CodeInvalidStatus, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"ignored"}`), auth...)
	})
	a.refused("done: reason over 2 KiB", http.StatusBadRequest, replyapi.CodeInvalidReason, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"failed","reason":"`+strings.Repeat("r", 2049)+`"}`), auth...)
	})

	// Invalid sessions: 401 with a Bearer challenge.
	for _, c := range []struct{ name, header string }{
		{"no Authorization", ""},
		{"not a bearer", "Basic " + tok1},
		{"empty bearer", "Bearer "},
		{"unknown token", "Bearer " + strings.Repeat("z", 43)},
		{"token over 512 bytes", "Bearer " + strings.Repeat("z", 513)},
	} {
		got := a.refused(c.name, http.StatusUnauthorized, replyapi.CodeInvalidSession, bot.BotID, func() answer {
			var h []string
			if c.header != "" {
				h = []string{"Authorization", c.header}
			}
			return a.do(http.MethodPost, "/v1/reply", []byte(`{"type":"text","text":"hi"}`), h...)
		})
		if !strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: no Bearer challenge: %v", c.name, got.header)
		}
	}
	a.refused("wrong method", http.StatusMethodNotAllowed, replyapi.CodeMethodNotAllowed, bot.BotID, func() answer {
		return a.do(http.MethodGet, "/v1/reply", nil, auth...)
	})
	a.refused("unknown route", http.StatusNotFound, replyapi.CodeNotFound, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/nope", nil, auth...)
	})

	// A reply reaches the simulator; repeating it with the same Idempotency-Key finds the
	// same attempt and sends nothing more.
	var r1 replyapi.ReplyResponse
	got := a.reply(tok1, "first answer", "key-1")
	if got.status != http.StatusOK {
		t.Fatalf("reply: %d %s", got.status, got.body)
	}
	got.json(t, &r1)
	if r1.Status != vocab.AttemptSent || r1.AttemptID == "" || r1.ClientMessageID == "" || r1.ProviderMessageID == "" ||
		r1.SendsLeft != 2 || r1.RequestID != "key-1" {
		t.Fatalf("reply answer %+v", r1)
	}
	if texts := a.sentTexts(bot.BotID); len(texts) != 1 || texts[0] != "first answer" {
		t.Fatalf("simulator received %q", texts)
	}
	before := a.digest()
	var again replyapi.ReplyResponse
	if got := a.reply(tok1, "first answer", "key-1"); got.status != http.StatusOK {
		t.Fatalf("repeated reply: %d %s", got.status, got.body)
	} else {
		got.json(t, &again)
	}
	if again.AttemptID != r1.AttemptID || again.Status != vocab.AttemptSent || len(a.sentTexts(bot.BotID)) != 1 || a.digest() != before {
		t.Fatalf("a repeated Idempotency-Key sent again: %+v", again)
	}
	// The same key with another text is a conflict, and nothing is sent.
	if got := a.reply(tok1, "another answer", "key-1"); got.status != http.StatusConflict ||
		!strings.Contains(string(got.body), replyapi.CodeAttemptConflict) || len(a.sentTexts(bot.BotID)) != 1 || a.digest() != before {
		t.Fatalf("a reused Idempotency-Key with other text: %d %s", got.status, got.body)
	}

	// A transmission whose outcome is unknown (the connection drops after iLink read the
	// request) answers 202 with status unknown; it is never re-sent.
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	var unknown replyapi.ReplyResponse
	got = a.reply(tok1, "lost in transit", "")
	if got.status != http.StatusAccepted {
		t.Fatalf("dropped send: %d %s", got.status, got.body)
	}
	got.json(t, &unknown)
	if unknown.Status != vocab.AttemptUnknown || unknown.AttemptID == "" || unknown.SendsLeft != 1 || unknown.RequestID == "" {
		t.Fatalf("dropped send answer %+v", unknown)
	}
	if att, err := a.store.GetAttempt(a.ctx, unknown.AttemptID); err != nil || att.Status != vocab.AttemptUnknown {
		t.Fatalf("attempt of the dropped send: %+v %v", att, err)
	}

	// The last of the quota, then the quota is exhausted: 409, nothing written.
	if got := a.reply(tok1, "last answer", ""); got.status != http.StatusOK {
		t.Fatalf("last reply: %d %s", got.status, got.body)
	}
	noHold := false
	a.refused("quota exhausted", http.StatusConflict, replyapi.CodeQuotaExhausted, bot.BotID, func() answer {
		return a.replyAs(tok1, "one too many", "one-too-many", false, &noHold)
	})

	// The agent marks the message handled: its sessions close, and the token is refused.
	var done replyapi.DoneResponse
	if got := a.do(http.MethodPost, "/v1/done", []byte(`{"status":"handled"}`), auth...); got.status != http.StatusOK {
		t.Fatalf("done: %d %s", got.status, got.body)
	} else {
		got.json(t, &done)
	}
	if m, err := a.store.GetMessage(a.ctx, w1.SourceMessageKey); err != nil || m.Status != vocab.MessageHandled || done.Status != vocab.MessageHandled {
		t.Fatalf("message after done: %+v %v (answer %+v)", m, err, done)
	}

	// A newer message supersedes the window: the old token is refused with 409.
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "a newer message"); err != nil {
		t.Fatal(err)
	}
	w2, _ := a.openWindow(acct.AccountKey, w1.ReplyWindowID)
	a.eventually("first window superseded", 30*time.Second, func() (bool, error) {
		w, err := a.store.GetWindow(a.ctx, w1.ReplyWindowID)
		return w.State == vocab.WindowSuperseded, err
	})
	a.refused("superseded window", http.StatusConflict, replyapi.CodeWindowInactive, bot.BotID, func() answer {
		return a.reply(tok1, "too late", "")
	})
	a.refused("done on a superseded window", http.StatusConflict, replyapi.CodeWindowInactive, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"handled"}`), auth...)
	})

	// iLink throttles the bot (ret -2 that our counters do not explain): 429 with
	// Retry-After, and the bot's breaker opens. A throttled send records its failed
	// attempt by design; the quota it reserved is given back and nothing was delivered.
	tok2 := a.tokenOf(w2.ReplyWindowID)
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultBody,
		Body: `{"ret":-2,"errmsg":"prepare failed"}`}); err != nil {
		t.Fatal(err)
	}
	sentBefore := len(a.sentTexts(bot.BotID))
	got = a.reply(tok2, "throttled answer", "")
	first := assertThrottled(t, got)
	// With the breaker open, the next reply is refused before anything leaves, and its
	// reservation is given back.
	got = a.reply(tok2, "still throttled", "")
	second := assertThrottled(t, got)
	if second.SendsLeft != first.SendsLeft || second.AttemptID == first.AttemptID {
		t.Fatalf("breaker refusal %+v after the throttled send %+v: the quota must be given back", second, first)
	}
	if n := len(a.sentTexts(bot.BotID)); n != sentBefore {
		t.Fatalf("throttled replies reached the user: %d sends, was %d", n, sentBefore)
	}

	// The session token never appears in the gateway's answers.
	for _, tok := range []string{tok1, tok2} {
		if bytes.Contains(got.body, []byte(tok)) {
			t.Fatal("an answer carries a session token")
		}
	}
}

// assertThrottled checks a 429 with Retry-After (the throttle penalty, 1h by default) and
// returns the attempt it reports.
func assertThrottled(t *testing.T, got answer) replyapi.ReplyResponse {
	t.Helper()
	if got.status != http.StatusTooManyRequests || got.errorCode(t) != replyapi.CodeThrottled {
		t.Fatalf("throttled reply: %d %s", got.status, got.body)
	}
	var secs int
	if _, err := fmt.Sscan(got.header.Get("Retry-After"), &secs); err != nil || secs < 1 || secs > int(time.Hour/time.Second) {
		t.Fatalf("Retry-After %q", got.header.Get("Retry-After"))
	}
	var body replyapi.ErrorBody
	got.json(t, &body)
	if body.Error.Attempt == nil || body.Error.Attempt.AttemptID == "" || body.Error.Attempt.Status != vocab.AttemptFailed ||
		body.Error.RetryAfterSeconds != int64(secs) {
		t.Fatalf("throttled answer without its attempt: %s", got.body)
	}
	return *body.Error.Attempt
}

func TestReplyAPIExpiredWindowIsGone(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	// Long enough that the message reaches the agent in time on a loaded machine (CI runs
	// every package at once): with 6 s the hand-off itself once found the window expired.
	limits.WindowLifetime = 15 * time.Second
	a := startAPI(t, limits, nil)
	const owner = "o9cq8replyapiexpire000001@im.wechat"
	acct := a.enroll("qo_replyapi_expire", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "reply soon"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	var first replyapi.ReplyResponse
	if got := a.reply(tok, "in time", "early-key"); got.status != http.StatusOK {
		t.Fatalf("reply in time: %d %s", got.status, got.body)
	} else {
		got.json(t, &first)
	}
	a.eventually("window expired", time.Minute, func() (bool, error) {
		got, err := a.store.GetWindow(a.ctx, w.ReplyWindowID)
		return got.State == vocab.WindowExpired, err
	})
	noHold := false
	a.refused("expired window", http.StatusGone, replyapi.CodeWindowExpired, bot.BotID, func() answer {
		return a.replyAs(tok, "too late", "late-key", false, &noHold)
	})
	// A request repeated after the window expired learns its first outcome, sending nothing.
	var again replyapi.ReplyResponse
	if got := a.reply(tok, "in time", "early-key"); got.status != http.StatusOK {
		t.Fatalf("repeat after expiry: %d %s, want the first outcome", got.status, got.body)
	} else {
		got.json(t, &again)
	}
	if again.AttemptID != first.AttemptID || again.Status != vocab.AttemptSent || len(a.sentTexts(bot.BotID)) != 1 {
		t.Fatalf("repeat after expiry answered %+v (first %+v)", again, first)
	}
	a.refused("done on an expired window", http.StatusGone, replyapi.CodeWindowExpired, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"failed","reason":"no answer"}`), "Authorization", "Bearer "+tok)
	})
}

// scrape reads /metrics over HTTP.
func (a *apiSystem) scrape() map[string]*dto.MetricFamily {
	a.t.Helper()
	got := a.do(http.MethodGet, "/metrics", nil)
	if got.status != http.StatusOK {
		a.t.Fatalf("/metrics: %d %s", got.status, got.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(got.body))
	if err != nil {
		a.t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value returns the value of the series of family name with the given labels (-1 when
// absent).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return -1
}

func TestMetricsAfterARunAndHealthWhenILinkStopsAnswering(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	a := startAPI(t, store.DefaultLimits(), func(_ *ilinksim.Config, cfg *gateway.Config) {
		cfg.HealthWindow = window
	})
	const owner = "o9cq8metricsowner00000001@im.wechat"
	acct := a.enroll("qo_metrics", owner)
	bot := a.botOf(owner)

	// The seconds since the last good poll are never negative (one clock: the database's),
	// and are within the health window while the bot is polled; a busy machine may be
	// between two poll sessions of the bot at a given instant, so freshness is waited for.
	sinceLastPoll := func(fams map[string]*dto.MetricFamily) float64 {
		t.Helper()
		since := value(fams, "ilinkflow_seconds_since_last_good_poll", "account", acct.AccountKey)
		if since < 0 {
			t.Fatalf("seconds since the last good poll = %v, want a figure of at least 0 (-1: not reported)", since)
		}
		return since
	}

	// The first round trip of a new account moves its cursor: a page without messages.
	// Waiting for it keeps the page count exact.
	a.eventually("first round trip", 30*time.Second, func() (bool, error) {
		got, err := a.store.GetAccount(a.ctx, acct.AccountKey)
		return got.Cursor != "" && got.LastPollAt != nil, err
	})
	var healthz answer
	a.eventually("/healthz answers 200 while the bot is polled", 30*time.Second, func() (bool, error) {
		healthz = a.do(http.MethodGet, "/healthz", nil)
		return healthz.status == http.StatusOK, nil
	})
	var rep metrics.HealthReport
	healthz.json(t, &rep)
	if rep.Status != "ok" || rep.Accounts != 1 {
		t.Fatalf("/healthz after a round trip: %s", healthz.body)
	}

	// An end-to-end run: two user messages (each its own page), a duplicate delivery of
	// the first, two replies sent and one whose outcome is unknown.
	in1, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "first")
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := a.openWindow(acct.AccountKey, 0)
	tok1 := a.tokenOf(w1.ReplyWindowID)
	for i := 1; i <= 2; i++ {
		if got := a.reply(tok1, fmt.Sprintf("answer %d", i), ""); got.status != http.StatusOK {
			t.Fatalf("reply %d: %d %s", i, got.status, got.body)
		}
	}
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	if got := a.reply(tok1, "lost", ""); got.status != http.StatusAccepted {
		t.Fatalf("dropped reply: %d %s", got.status, got.body)
	}
	if _, err := a.ctl.Duplicate(a.ctx, bot.BotID, ilinksim.DuplicateRequest{MessageID: in1.MessageID,
		DuplicateSpec: ilinksim.DuplicateSpec{Mode: ilinksim.DupSame}}); err != nil {
		t.Fatal(err)
	}
	a.eventually("duplicate counted", 30*time.Second, func() (bool, error) {
		return value(a.scrape(), "ilinkflow_messages_total", "outcome", "duplicate") == 1, nil
	})
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "second"); err != nil {
		t.Fatal(err)
	}
	a.openWindow(acct.AccountKey, w1.ReplyWindowID)
	a.eventually("first window superseded", 30*time.Second, func() (bool, error) {
		w, err := a.store.GetWindow(a.ctx, w1.ReplyWindowID)
		return w.State == vocab.WindowSuperseded, err
	})

	fams := a.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ilinkflow_messages_total", []string{"outcome", "inserted"}, 2},
		{"ilinkflow_messages_total", []string{"outcome", "deliverable"}, 2},
		{"ilinkflow_messages_total", []string{"outcome", "duplicate"}, 1},
		{"ilinkflow_messages_total", []string{"outcome", "absorbed"}, 0},
		{"ilinkflow_messages_total", []string{"outcome", "deferred"}, 0},
		{"ilinkflow_messages_total", []string{"outcome", "quarantined"}, 0},
		// The first round trip's page, then one page per delivery.
		{"ilinkflow_pages_total", nil, 4},
		{"ilinkflow_sends_total", []string{"outcome", "sent"}, 2},
		{"ilinkflow_sends_total", []string{"outcome", "unknown"}, 1},
		{"ilinkflow_sends_total", []string{"outcome", "failed"}, 0},
		{"ilinkflow_sends_total", []string{"outcome", "refused"}, 0},
		{"ilinkflow_sends_total", []string{"outcome", "throttled"}, 0},
		{"ilinkflow_reply_api_requests_total", []string{"route", "reply", "code", "ok"}, 2},
		{"ilinkflow_reply_api_requests_total", []string{"route", "reply", "code", "unknown"}, 1},
		{"ilinkflow_windows", []string{"state", "open"}, 1},
		{"ilinkflow_throttle_breakers_open", nil, 0},
		{"ilinkflow_accounts", []string{"status", "active"}, 1},
		{"ilinkflow_store_up", nil, 1},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if polls := value(fams, "ilinkflow_polls_total", "outcome", "ok"); polls < 4 {
		t.Errorf("ilinkflow_polls_total{outcome=ok} = %v, want at least one per page", polls)
	}
	sinceLastPoll(fams)
	a.eventually("a fresh last good poll after the run", 30*time.Second, func() (bool, error) {
		return sinceLastPoll(a.scrape()) <= window.Seconds(), nil
	})
	// The Temporal SDK's own metrics are served beside the product's.
	var sdk []string
	for name := range fams {
		if strings.HasPrefix(name, "temporal_") {
			sdk = append(sdk, name)
		}
	}
	if value(fams, "temporal_request_total") <= 0 || len(sdk) < 5 {
		t.Errorf("Temporal SDK metrics missing: %v", sdk)
	}

	// iLink stops answering (every getupdates gets a 500): once no round trip succeeded
	// for the health window, /healthz is 503 and names the account.
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: 500, Count: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	a.eventually("unhealthy", time.Minute, func() (bool, error) {
		got := a.do(http.MethodGet, "/healthz", nil)
		if got.status != http.StatusServiceUnavailable {
			return false, nil
		}
		got.json(t, &rep)
		return true, nil
	})
	if rep.Status != "unhealthy" || len(rep.Stale) != 1 || rep.Stale[0].Account != acct.AccountKey || rep.Stale[0].SecondsSince <= window.Seconds() {
		t.Fatalf("health report %+v", rep)
	}
	fams = a.scrape()
	if polls := value(fams, "ilinkflow_polls_total", "outcome", "http_status"); polls < 1 {
		t.Errorf("failed polls not counted: %v", polls)
	}
	if since := sinceLastPoll(fams); since <= window.Seconds() {
		t.Errorf("seconds since the last good poll = %v after the outage", since)
	}
}

// The quota holds under a burst: 200 concurrent replies with distinct keys on one window
// get exactly the window's 10 sends accepted, and every request gets a definite answer
// (no 5xx, no request left hanging on a stalled workflow; one answered 202, outcome not
// known in time, learns it when repeated with its key).
//
// It runs alone in this binary (not in parallel): on a loaded CI machine, its burst of
// Updates beside the other tests' workflows made the 1.29 dev server fail the window's
// workflow tasks for over a minute ("premature end of stream": a speculative workflow
// task lost by the server, temporalio/temporal#7741, fixed in later servers whose CLI
// cannot be installed here), so that every reply timed out (202) and the tests beside it
// found their windows expired. It takes about 6 s.
func TestTwoHundredConcurrentRepliesOnOneWindowSendExactlyTheQuota(t *testing.T) {
	limits := store.DefaultLimits()
	limits.FinalSlots = 0 // the quota itself; the replies past it ask for the refusal
	a := startAPI(t, limits, func(_ *ilinksim.Config, cfg *gateway.Config) {
		// 200 requests queue for the gateway's PostgreSQL connections: on a busy machine the
		// last wait longer than the default 5 s store deadline (a 503, tested on its own
		// with PostgreSQL hanging), which is not what this test is about.
		cfg.APIStoreTimeout = time.Minute
	})
	const owner = "o9cq8replyburst00000000001@im.wechat"
	acct := a.enroll("qo_replyapi_burst", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "burst me"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	const n = 200
	codes := make([]int, n)
	reply := func(i int) int {
		noHold := false
		body, _ := json.Marshal(replyapi.ReplyRequest{Type: "text", Text: fmt.Sprintf("burst reply %d", i), Hold: &noHold})
		return a.do(http.MethodPost, "/v1/reply", body, "Authorization", "Bearer "+tok,
			"Idempotency-Key", fmt.Sprintf("burst-%d", i)).status
	}
	began := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = reply(i)
		}()
	}
	wg.Wait()
	took := time.Since(began)
	// A request answered 202 got no outcome within the reply timeout (a minute): on a
	// loaded machine the dev server can stall the window's workflow tasks longer (above).
	// As an agent does, it is repeated with its key until its outcome is known.
	unknown := 0
	for i := range codes {
		if codes[i] != http.StatusAccepted {
			continue
		}
		unknown++
		a.eventually(fmt.Sprintf("the outcome of reply %d", i), 5*time.Minute, func() (bool, error) {
			codes[i] = reply(i)
			return codes[i] != http.StatusAccepted, nil
		})
	}
	byCode := map[int]int{}
	for _, c := range codes {
		byCode[c]++
	}
	t.Logf("%d concurrent replies answered in %v (%d unknown at first, repeated): %v", n, took.Round(time.Millisecond), unknown, byCode)
	if byCode[http.StatusOK] != int(limits.MaxSends) {
		t.Fatalf("answers %v: want exactly %d sent", byCode, limits.MaxSends)
	}
	for c, k := range byCode {
		if c >= 500 {
			t.Fatalf("%d requests answered %d: every request must get a definite answer", k, c)
		}
	}
	if got := len(a.sentTexts(bot.BotID)); got != int(limits.MaxSends) {
		t.Fatalf("%d messages reached iLink, want %d", got, limits.MaxSends)
	}
}
