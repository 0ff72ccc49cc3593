package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// probe is one HTTP answer.
type probe struct {
	code int
	body string
}

func getURL(t *testing.T, url string) probe {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return probe{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return probe{code: resp.StatusCode, body: string(b)}
}

// readyReason is the reason of a /readyz answer ("" when ready).
func readyReason(p probe) string {
	var body struct{ Status, Reason string }
	_ = json.Unmarshal([]byte(p.body), &body)
	return body.Reason
}

// proxied is the PostgreSQL URL of schema through a new proxy to the server, which the
// test's cleanup closes.
func proxied(t *testing.T, schema string) (string, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dbtest.SchemaURL(schema))
	if err != nil || u.Host == "" {
		t.Skipf("DATABASE_URL is not a URL with a host (%v); the test needs one to put a proxy in front", err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	proxy, err := tcpproxy.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	u.Host = proxy.Addr()
	return u.String(), proxy
}

// /livez answers 200 as long as the process serves; /readyz answers 503 while PostgreSQL
// or Temporal is cut off and during the shutdown drain, and 200 again once the cut ends;
// /healthz keeps reporting each bot's iLink polls (a bot whose iLink is unreachable makes
// it 503 while the worker stays ready).
func TestReadyzFollowsPostgreSQLTemporalAndTheDrainWhileLivezStays200(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	dbURL, pgProxy := proxied(t, schema)
	tProxy, err := tcpproxy.New(dev.HostPort)
	if err != nil {
		t.Fatal(err)
	}
	defer tProxy.Close()
	// A bot whose iLink never answers: /healthz reports it stale after the health window.
	st, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	register(ctx, t, st, time.Now())

	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = tProxy.Addr(), ns, devserver.TaskQueue(t)
	cfg.DatabaseURL = dbURL
	cfg.ShutdownGrace = 5 * time.Second
	cfg.HealthWindow = 2 * time.Second
	cfg.HTTPAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	apiAddr, adminAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	ready, done := make(chan struct{}), make(chan error, 1)
	var admin string
	var duringDrain struct{ livez, readyz, reply probe }
	var api string
	go func() {
		done <- gateway.Run(runCtx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Keyring: testKeys,
			HTTPStarted: func(a net.Addr) { apiAddr <- a }, AdminStarted: func(a net.Addr) { adminAddr <- a },
			Ready: func(gateway.ReconcileReport) { close(ready) },
			Draining: func() {
				duringDrain.livez = getURL(t, admin+gateway.LivezPath)
				duringDrain.readyz = getURL(t, admin+gateway.ReadyzPath)
				duringDrain.reply = getURL(t, api+"/v1/reply")
			}})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("Run never became ready")
	}
	admin, api = "http://"+(<-adminAddr).String(), "http://"+(<-apiAddr).String()

	livez := func() {
		t.Helper()
		if p := getURL(t, admin+gateway.LivezPath); p.code != http.StatusOK {
			t.Fatalf("/livez: %d %s, want 200", p.code, p.body)
		}
	}
	readyzBecomes := func(what string, code int, reason string) {
		t.Helper()
		testkit.Eventually(t, "/readyz "+what, 2*time.Minute, func() (bool, error) {
			livez()
			p := getURL(t, admin+gateway.ReadyzPath)
			if p.code != code || readyReason(p) != reason {
				return false, errors.New(p.body)
			}
			return true, nil
		})
	}
	readyzBecomes("ready after the start", http.StatusOK, "")
	testkit.Eventually(t, "/healthz reports the bot whose iLink is unreachable", time.Minute, func() (bool, error) {
		p := getURL(t, admin+gateway.HealthzPath)
		return p.code == http.StatusServiceUnavailable && strings.Contains(p.body, `"stale"`), errors.New(p.body)
	})
	readyzBecomes("stays ready while iLink fails", http.StatusOK, "")

	pgProxy.Cut()
	readyzBecomes("not ready while PostgreSQL is cut", http.StatusServiceUnavailable, gateway.NotReadyPostgreSQL)
	pgProxy.Restore()
	readyzBecomes("ready once PostgreSQL is back", http.StatusOK, "")

	tProxy.Cut()
	readyzBecomes("not ready while Temporal is cut", http.StatusServiceUnavailable, gateway.NotReadyTemporal)
	tProxy.Restore()
	readyzBecomes("ready once Temporal is back", http.StatusOK, "")

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after the drain: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after cancellation")
	}
	if p := duringDrain.livez; p.code != http.StatusOK {
		t.Fatalf("/livez during the drain: %d %s, want 200", p.code, p.body)
	}
	if p := duringDrain.readyz; p.code != http.StatusServiceUnavailable || readyReason(p) != gateway.NotReadyDraining {
		t.Fatalf("/readyz during the drain: %d %s, want 503 draining", p.code, p.body)
	}
	if p := duringDrain.reply; p.code != http.StatusServiceUnavailable || !strings.Contains(p.body, gateway.CodeDraining) {
		t.Fatalf("a reply API request during the drain: %d %s, want 503 draining", p.code, p.body)
	}
}

// With --admin-addr, the agent-facing port serves only the reply API (404 for /metrics,
// /codec/, /ui/ and the probes) and the admin port serves those (and not the reply API).
func TestWithAnAdminAddressTheReplyAPIPortServesNoAdminEndpoint(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ns, _ := srv.NewNamespace(t)
	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = srv.HostPort, ns, devserver.TaskQueue(t)
	cfg.ShutdownGrace = time.Second
	cfg.HTTPAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.CodecToken = sealing.NewSecret("gateway-codec-token-0123456789")
	cfg.UIToken = sealing.NewSecret("gateway-ui-token-0123456789")
	ctx, stop := context.WithCancel(context.Background())
	apiAddr, adminAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Pool: dbtest.NewPool(t), Keyring: testKeys,
			HTTPStarted: func(a net.Addr) { apiAddr <- a }, AdminStarted: func(a net.Addr) { adminAddr <- a },
			Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	}
	api, admin := "http://"+(<-apiAddr).String(), "http://"+(<-adminAddr).String()
	noRedirect := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(url string) int {
		t.Helper()
		resp, err := noRedirect.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", gateway.CodecPath, gateway.UIPath + "/", gateway.LivezPath, gateway.ReadyzPath, gateway.HealthzPath} {
		if code := status(api + path); code != http.StatusNotFound {
			t.Errorf("reply API port %s: %d, want 404", path, code)
		}
	}
	if code := status(api + "/v1/reply"); code != http.StatusMethodNotAllowed {
		t.Errorf("reply API port GET /v1/reply: %d, want 405 (the route exists)", code)
	}
	for path, want := range map[string]int{
		"/metrics":           http.StatusOK,
		gateway.LivezPath:    http.StatusOK,
		gateway.HealthzPath:  http.StatusOK,
		gateway.CodecPath:    http.StatusUnauthorized, // served, behind its token
		gateway.UIPath + "/": http.StatusSeeOther,     // served, to the login form
		"/v1/reply":          http.StatusNotFound,
	} {
		if code := status(admin + path); code != want {
			t.Errorf("admin port %s: %d, want %d", path, code, want)
		}
	}
	testkit.Eventually(t, "/readyz 200 on the admin port", time.Minute, func() (bool, error) {
		return status(admin+gateway.ReadyzPath) == http.StatusOK, nil
	})
}

// A worker told not to migrate refuses a database that lacks migrations, with one line
// that names "starter migrate" and the stable code; it never reaches Temporal.
func TestAWorkerWithMigrateOffRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	schema := dbtest.NewSchema(t)
	cfg := gateway.DefaultConfig()
	cfg.DatabaseURL = dbtest.SchemaURL(schema)
	cfg.Migrate = false
	cfg.TemporalAddress = "127.0.0.1:9" // never dialed
	cfg.HTTPAddr = ""
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := gateway.Run(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Keyring: testKeys})
	if db.CodeOf(err) != db.CodeSchemaBehind {
		t.Fatalf("Run on an unmigrated database with migrate off: %v, want code %s", err, db.CodeSchemaBehind)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, `"starter migrate"`) {
		t.Fatalf("error is not one line naming starter migrate: %q", msg)
	}
	var tables int
	if err := dbtest.NewPool(t).QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the worker wrote to the unmigrated schema: %d tables, %v", tables, err)
	}
}
