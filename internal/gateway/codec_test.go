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

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
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
	body := sealedPayloads(t, "a user's private text")
	for _, token := range []string{codecToken, ""} {
		ns, _ := srv.NewNamespace(t)
		base := runHTTP(t, srv, ns, token)
		post := func(auth string) (int, string) {
			t.Helper()
			code, _, out := codecCall(t, http.MethodPost, base+"/codec/decode", "", auth, body)
			return code, out
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
		if code != http.StatusOK || !decodedHolds(out, "a user's private text") {
			t.Fatalf("with the token: %d %s", code, out)
		}
	}
}

// uiOrigin is the origin of the Temporal dev server's UI in these tests.
const uiOrigin = "http://127.0.0.1:8233"

// TestProductionCodecEndpointNeverAcceptsATokenlessRequest: the worker's own settings
// (the token and the UI's origin as CORS origin, from the environment, as a production
// worker reads them) and no Options.DevUICodecOrigin: a request without the token is
// refused whatever it claims, even one from the UI's own origin over loopback, which
// gets the CORS preflight but not the payloads.
func TestProductionCodecEndpointNeverAcceptsATokenlessRequest(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ns, _ := srv.NewNamespace(t)
	env, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{gateway.EnvCodecToken: codecToken,
		"ILINKFLOW_CODEC_CORS_ORIGIN": uiOrigin})), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := runHTTPWith(t, srv, ns, func(c *gateway.Config) { c.CodecToken, c.CodecCORSOrigin = env.CodecToken, env.CodecCORSOrigin })
	body := sealedPayloads(t, "a user's private text")
	if code, h, _ := codecCall(t, http.MethodOptions, base+"/codec/decode", uiOrigin, "", nil); code != http.StatusOK ||
		h.Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Fatalf("preflight from the UI's origin: %d %v", code, h)
	}
	for _, c := range []struct{ name, path, origin, auth string }{
		{"the UI's origin", "/codec/decode", uiOrigin, ""},
		{"the UI's origin, encode", "/codec/encode", uiOrigin, ""},
		{"the UI's origin, an empty bearer", "/codec/decode", uiOrigin, "Bearer "},
		{"no origin", "/codec/decode", "", ""},
	} {
		code, _, out := codecCall(t, http.MethodPost, base+c.path, c.origin, c.auth, body)
		if code != http.StatusUnauthorized || strings.Contains(out, "private") {
			t.Errorf("%s without the token: %d %s, want 401", c.name, code, out)
		}
	}
	if code, _, _ := codecCall(t, http.MethodPost, base+"/codec/decode", "http://127.0.0.1:9999", "", body); code != http.StatusForbidden {
		t.Errorf("another origin: %d, want 403", code)
	}
	if code, _, out := codecCall(t, http.MethodPost, base+"/codec/decode", uiOrigin, "Bearer "+codecToken, body); code != http.StatusOK ||
		!decodedHolds(out, "a user's private text") {
		t.Fatalf("the UI's origin with the token: %d %s", code, out)
	}
}

// TestDevUICodecOriginDecodesTheUIsRequestsAndRefusesOtherOrigins: with
// Options.DevUICodecOrigin (what `starter dev` wires) the Temporal UI's requests, as the
// browser sends them (preflight, then POST with Origin and X-Namespace and no
// Authorization), decode and encode; a request from another origin (even another
// loopback port) is refused (403, preflight too); a request with no Origin still needs
// the token (401), a wrong token is not replaced (401), and the token still works.
func TestDevUICodecOriginDecodesTheUIsRequestsAndRefusesOtherOrigins(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ns, _ := srv.NewNamespace(t)
	base := runHTTPOpts(t, srv, ns, func(c *gateway.Config, o *gateway.Options) {
		c.CodecToken = sealing.NewSecret(codecToken)
		o.DevUICodecOrigin = uiOrigin
	})
	body := sealedPayloads(t, "a user's private text")
	code, h, _ := codecCall(t, http.MethodOptions, base+"/codec/decode", uiOrigin, "", nil)
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != uiOrigin ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "X-Namespace") {
		t.Fatalf("the UI's preflight: %d %v", code, h)
	}
	code, h, out := codecCall(t, http.MethodPost, base+"/codec/decode", uiOrigin, "", body)
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != uiOrigin || !decodedHolds(out, "a user's private text") {
		t.Fatalf("the UI's decode without the token: %d %v %s", code, h, out)
	}
	// The UI encodes what it sends (a signal's input): the result decodes.
	plain, _ := converter.GetDefaultDataConverter().ToPayloads("typed in the UI")
	raw, _ := protojson.Marshal(&commonpb.Payloads{Payloads: plain.Payloads})
	code, _, out = codecCall(t, http.MethodPost, base+"/codec/encode", uiOrigin, "", raw)
	var enc commonpb.Payloads
	if code != http.StatusOK || protojson.Unmarshal([]byte(out), &enc) != nil || len(enc.Payloads) != 1 ||
		string(enc.Payloads[0].GetMetadata()[converter.MetadataEncoding]) != payloadcodec.Encoding {
		t.Fatalf("the UI's encode without the token: %d %s", code, out)
	}
	again, _ := protojson.Marshal(&enc)
	if code, _, out := codecCall(t, http.MethodPost, base+"/codec/decode", uiOrigin, "", again); code != http.StatusOK || !decodedHolds(out, "typed in the UI") {
		t.Fatalf("what the UI encoded does not decode: %d %s", code, out)
	}
	for _, other := range []string{"http://127.0.0.1:9999", "http://localhost:8233", "https://127.0.0.1:8233", "http://evil.example"} {
		if code, h, _ := codecCall(t, http.MethodOptions, base+"/codec/decode", other, "", nil); code != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v, want 403 without CORS headers", other, code, h)
		}
		if code, _, out := codecCall(t, http.MethodPost, base+"/codec/decode", other, "", body); code != http.StatusForbidden || strings.Contains(out, "private") {
			t.Errorf("decode from %s: %d %s, want 403", other, code, out)
		}
	}
	if code, _, _ := codecCall(t, http.MethodPost, base+"/codec/decode", "", "", body); code != http.StatusUnauthorized {
		t.Errorf("no origin, no token: %d, want 401", code)
	}
	if code, _, _ := codecCall(t, http.MethodPost, base+"/codec/decode", uiOrigin, "Bearer not-the-token", body); code != http.StatusUnauthorized {
		t.Errorf("the UI's origin with a wrong token: %d, want 401", code)
	}
	if code, _, out := codecCall(t, http.MethodPost, base+"/codec/decode", "", "Bearer "+codecToken, body); code != http.StatusOK || !decodedHolds(out, "a user's private text") {
		t.Errorf("the CLI's request with the token: %d %s", code, out)
	}
}

// TestDevUICodecOriginIsRefusedOffLoopbackOrWithoutAToken: Run does not start with
// Options.DevUICodecOrigin when /codec/ would be served on a listener that is not
// loopback, when the origin is not on a loopback host, when no codec token is set, or
// when another CORS origin is configured.
func TestDevUICodecOriginIsRefusedOffLoopbackOrWithoutAToken(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	for _, c := range []struct {
		name, want string
		tune       func(*gateway.Config, *gateway.Options)
	}{
		{"a listener on every interface", "not on a loopback address", func(c *gateway.Config, o *gateway.Options) {
			c.HTTPAddr = "0.0.0.0:0"
		}},
		{"an admin listener on every interface", "not on a loopback address", func(c *gateway.Config, o *gateway.Options) {
			c.AdminAddr = "0.0.0.0:0"
		}},
		{"an origin off loopback", "not a loopback host", func(c *gateway.Config, o *gateway.Options) {
			o.DevUICodecOrigin = "http://ui.example:8233"
		}},
		{"no codec token", "no codec token", func(c *gateway.Config, o *gateway.Options) {
			c.CodecToken = sealing.Secret{}
		}},
		{"another CORS origin", "the codec CORS origin is", func(c *gateway.Config, o *gateway.Options) {
			c.CodecCORSOrigin = "http://127.0.0.1:9999"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns, _ := srv.NewNamespace(t)
			_, err := startRun(t, srv, ns, func(cfg *gateway.Config, o *gateway.Options) {
				cfg.CodecToken = sealing.NewSecret(codecToken)
				o.DevUICodecOrigin = uiOrigin
				c.tune(cfg, o)
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want an error with %q", err, c.want)
			}
			if strings.Contains(err.Error(), codecToken) {
				t.Fatal("the error reveals the token")
			}
		})
	}
}

// sealedPayloads is the JSON Payloads body of text encrypted with the test keys.
func sealedPayloads(t *testing.T, text string) []byte {
	t.Helper()
	codec, err := payloadcodec.New(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := converter.GetDefaultDataConverter().ToPayloads(text)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := codec.Encode(plain.Payloads)
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// decodedHolds reports whether out is a JSON Payloads answer of one payload holding text.
func decodedHolds(out, text string) bool {
	var got commonpb.Payloads
	return protojson.Unmarshal([]byte(out), &got) == nil && len(got.Payloads) == 1 && strings.Contains(string(got.Payloads[0].Data), text)
}

// codecCall sends a request to the codec endpoint as a browser or the CLI does: body (a
// POST's, JSON) with X-Namespace, origin as Origin and auth as Authorization when set (a
// preflight when method is OPTIONS), and returns the status, the headers and the body.
func codecCall(t *testing.T, method, url, origin, auth string, body []byte) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodOptions {
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
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
	return runHTTPOpts(t, srv, ns, func(c *gateway.Config, _ *gateway.Options) { tune(c) })
}

// runHTTPOpts is runHTTPWith with the Options tune may set too.
func runHTTPOpts(t *testing.T, srv *devserver.Server, ns string, tune func(*gateway.Config, *gateway.Options)) string {
	t.Helper()
	base, err := startRun(t, srv, ns, tune)
	if err != nil {
		t.Fatalf("Run returned before it was ready: %v", err)
	}
	return base
}

// startRun runs a worker serving HTTP on a free port with the configuration and options
// tune made and returns its base URL once it is ready, or the error Run returned before.
// A running worker stops at t's cleanup.
func startRun(t *testing.T, srv *devserver.Server, ns string, tune func(*gateway.Config, *gateway.Options)) (string, error) {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = srv.HostPort, ns, devserver.TaskQueue(t)
	cfg.ShutdownGrace = time.Second
	cfg.HTTPAddr = "127.0.0.1:0"
	started := make(chan net.Addr, 2)
	ready, done := make(chan struct{}), make(chan error, 1)
	opts := gateway.Options{Logger: slog.New(slog.DiscardHandler), Pool: dbtest.NewPool(t), Keyring: testKeys,
		HTTPStarted: func(a net.Addr) { started <- a }, Ready: func(gateway.ReconcileReport) { close(ready) }}
	tune(&cfg, &opts)
	ctx, stop := context.WithCancel(context.Background())
	go func() { done <- gateway.Run(ctx, cfg, opts) }()
	select {
	case <-ready:
	case err := <-done:
		stop()
		return "", err
	}
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + (<-started).String(), nil
}
