package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
)

func TestHTTPSettings(t *testing.T) {
	t.Parallel()
	def := gateway.DefaultConfig()
	if def.HTTPAddr != "127.0.0.1:8090" || def.HealthWindow != 105*time.Second {
		t.Fatalf("documented HTTP defaults changed: %q %v", def.HTTPAddr, def.HealthWindow)
	}
	for _, c := range []struct {
		name   string
		env    map[string]string
		args   []string
		addr   string
		window time.Duration
	}{
		{"environment", map[string]string{"ILINKFLOW_HTTP_ADDR": "0.0.0.0:9100", "ILINKFLOW_HEALTH_WINDOW": "2m"}, nil, "0.0.0.0:9100", 2 * time.Minute},
		{"flags win", map[string]string{"ILINKFLOW_HTTP_ADDR": "0.0.0.0:9100"}, []string{"--http-addr", "127.0.0.1:0", "--health-window", "3s"}, "127.0.0.1:0", 3 * time.Second},
		{"off in the environment", map[string]string{"ILINKFLOW_HTTP_ADDR": "off"}, nil, "", def.HealthWindow},
		{"empty flag disables", nil, []string{"--http-addr="}, "", def.HealthWindow},
	} {
		cfg, err := gateway.ConfigFromEnv(envOf(withKeys(c.env)), c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.HTTPAddr != c.addr || cfg.HealthWindow != c.window {
			t.Errorf("%s: addr %q window %v, want %q %v", c.name, cfg.HTTPAddr, cfg.HealthWindow, c.addr, c.window)
		}
	}
	for _, c := range []struct{ args []string }{
		{[]string{"--http-addr", "8090"}},
		{[]string{"--http-addr", "127.0.0.1:http"}},
		{[]string{"--http-addr", "127.0.0.1:70000"}},
		{[]string{"--health-window", "0s"}},
		{[]string{"--health-window", "soon"}},
	} {
		if _, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), c.args); err == nil {
			t.Errorf("%v accepted", c.args)
		}
	}
	bad := gateway.DefaultConfig()
	bad.HTTPAddr, bad.HealthWindow = "nowhere", 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "HTTP address") || !strings.Contains(err.Error(), "health window") {
		t.Fatalf("hand-built config: %v", err)
	}
	var usage strings.Builder
	gateway.Usage(&usage)
	for _, want := range []string{"--http-addr", "ILINKFLOW_HTTP_ADDR", "--health-window", "ILINKFLOW_HEALTH_WINDOW"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %s", want)
		}
	}
}

// Run serves /metrics (with the Temporal SDK's metrics from the client it dials itself),
// /healthz and the reply API on an injected listener, and shuts the server down
// gracefully when its context ends.
func TestRunServesHTTPAndShutsItDown(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ns, _ := srv.NewNamespace(t)
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress = srv.HostPort
	cfg.TemporalNamespace = ns
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.ShutdownGrace = time.Second
	cfg.HTTPAddr = "" // the listener is injected
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	started := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(runCtx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Pool: pool, Keyring: testKeys,
			HTTPListener: ln, HTTPStarted: func(a net.Addr) { started <- a },
			Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("Run never became ready")
	}
	if a := <-started; a.String() != ln.Addr().String() {
		t.Fatalf("HTTPStarted reported %v, listening on %v", a, ln.Addr())
	}
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get("/v1/reply"); code != http.StatusMethodNotAllowed || !strings.Contains(body, "method_not_allowed") {
		t.Fatalf("GET /v1/reply: %d %s", code, body)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, "ilinkflow_sends_total") || !strings.Contains(body, "temporal_request_total") ||
		!strings.Contains(body, "ilinkflow_store_up 1") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancellation: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after cancellation")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the HTTP listener is still open after Run returned")
	}
}
