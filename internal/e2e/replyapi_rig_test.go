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
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
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
func startAPI(t testing.TB, limits store.Limits, tune func(*ilinksim.Config, *gateway.Config)) *apiSystem {
	t.Helper()
	return startAPIWith(t, limits, tune, false)
}

// startAPIWith is startAPI whose gateway, with viaProxy, reaches PostgreSQL through a
// proxy the test can cut or blackhole (apiSystem.dbProxy).
func startAPIWith(t testing.TB, limits store.Limits, tune func(*ilinksim.Config, *gateway.Config), viaProxy bool) *apiSystem {
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
	cfg.Retention = store.RetentionPolicy{} // no retention schedule: its runs would join the namespace's workflows the tests count
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

func (a answer) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", a.status, err, a.body)
	}
}

// errorCode returns the code of an error body ("" for a non-error body).
func (a answer) errorCode(t testing.TB) string {
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
