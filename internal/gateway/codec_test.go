package gateway_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

const codecToken = "gateway-codec-token-0123456789"

func TestCodecSettingsComeFromTheEnvironmentAndTheTokenIsNeverEchoed(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{gateway.EnvCodecToken: codecToken,
		"ILINKFLOW_CODEC_CORS_ORIGIN": "http://127.0.0.1:8233/"})), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CodecToken.Reveal() != codecToken || cfg.CodecCORSOrigin != "http://127.0.0.1:8233" {
		t.Fatalf("codec settings %q", cfg.CodecCORSOrigin)
	}
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("config", "config", cfg)
	if strings.Contains(log.String(), codecToken) || !strings.Contains(log.String(), "codec_endpoint=true") {
		t.Fatalf("logged config: %s", log.String())
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withKeys(nil)), []string{"--codec-cors-origin", "https://ui.example:8443"})
	if err != nil || cfg.CodecCORSOrigin != "https://ui.example:8443" || !cfg.CodecToken.IsZero() {
		t.Fatalf("flag: %q %v", cfg.CodecCORSOrigin, err)
	}
	for _, origin := range []string{"ui.example", "http://ui.example/path", "ftp://ui.example", "http://user@ui.example"} {
		if _, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), []string{"--codec-cors-origin", origin}); err == nil {
			t.Errorf("origin %q accepted", origin)
		}
	}
	_, err = gateway.ConfigFromEnv(envOf(withKeys(map[string]string{gateway.EnvCodecToken: "short-secret"})), nil)
	if err == nil || strings.Contains(err.Error(), "short-secret") {
		t.Fatalf("a short token: %v", err)
	}
	var usage strings.Builder
	gateway.Usage(&usage)
	for _, want := range []string{"--codec-cors-origin", "ILINKFLOW_CODEC_CORS_ORIGIN", gateway.EnvCodecToken} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %s", want)
		}
	}
}

// Run mounts the codec endpoint at /codec/ on its HTTP server: 401 without the token,
// the decoded payloads with it; 404 when no token is configured.
func TestRunServesTheCodecEndpointBehindItsToken(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	codec, err := payloadcodec.New(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := converter.GetDefaultDataConverter().ToPayloads("a user's private text")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.Encode(plain.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	for _, token := range []string{codecToken, ""} {
		ns, _ := srv.NewNamespace(t)
		base := runHTTP(t, srv, ns, token)
		post := func(auth string) (int, string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, base+"/codec/decode", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if token == "" {
			if code, _ := post("Bearer "); code != http.StatusNotFound {
				t.Fatalf("no token configured: %d, want 404", code)
			}
			continue
		}
		if code, _ := post(""); code != http.StatusUnauthorized {
			t.Fatalf("without the token: %d, want 401", code)
		}
		if code, _ := post("Bearer not-the-token"); code != http.StatusUnauthorized {
			t.Fatalf("with a wrong token: %d, want 401", code)
		}
		code, out := post("Bearer " + token)
		var got commonpb.Payloads
		if code != http.StatusOK || protojson.Unmarshal([]byte(out), &got) != nil || len(got.Payloads) != 1 ||
			!strings.Contains(string(got.Payloads[0].Data), "a user's private text") {
			t.Fatalf("with the token: %d %s", code, out)
		}
	}
}

// runHTTP runs the gateway (dialing Temporal itself) with HTTP on a free port and the
// codec token, and returns the server's base URL; the gateway stops at t's cleanup.
func runHTTP(t *testing.T, srv *devserver.Server, ns, token string) string {
	t.Helper()
	return runHTTPWith(t, srv, ns, func(cfg *gateway.Config) {
		if token != "" {
			cfg.CodecToken = sealing.NewSecret(token)
		}
	})
}

// runHTTPWith runs a worker serving HTTP on a free port with the configuration tune
// made, and returns its base URL.
func runHTTPWith(t *testing.T, srv *devserver.Server, ns string, tune func(*gateway.Config)) string {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = srv.HostPort, ns, devserver.TaskQueue(t)
	cfg.ShutdownGrace = time.Second
	cfg.HTTPAddr = "127.0.0.1:0"
	tune(&cfg)
	ctx, stop := context.WithCancel(context.Background())
	started := make(chan net.Addr, 1)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Pool: dbtest.NewPool(t), Keyring: testKeys,
			HTTPStarted: func(a net.Addr) { started <- a }, Ready: func(gateway.ReconcileReport) { close(ready) }})
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
	return "http://" + (<-started).String()
}
