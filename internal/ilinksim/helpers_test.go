package ilinksim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// env is one simulator on a loopback httptest server plus a tiny iLink
// caller that sends what the official plugin sends.
type env struct {
	t   *testing.T
	ctx context.Context
	sim *Server
	srv *httptest.Server
	ctl *Control
}

func newEnv(t *testing.T, mut func(*Config)) *env {
	t.Helper()
	cfg := DefaultConfig()
	cfg.LongPollHold = 50 * time.Millisecond
	if mut != nil {
		mut(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sim := New(cfg)
	srv := httptest.NewUnstartedServer(sim.Handler())
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, ctx: t.Context(), sim: sim, srv: srv, ctl: NewControl(srv.URL, srv.Client())}
}

func pluginHeaders(h http.Header, token string) {
	h.Set("Content-Type", "application/json")
	h.Set("AuthorizationType", "ilink_bot_token")
	h.Set("X-WECHAT-UIN", base64.StdEncoding.EncodeToString([]byte("305419896")))
	h.Set("iLink-App-Id", "bot")
	h.Set("iLink-App-ClientVersion", "132105")
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
}

// raw sends one request and returns status, headers and body.
func (e *env) raw(ctx context.Context, method, path, token string, body []byte) (int, http.Header, []byte, error) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if method == http.MethodPost {
		pluginHeaders(req.Header, token)
	} else {
		req.Header.Set("iLink-App-Id", "bot")
		req.Header.Set("iLink-App-ClientVersion", "132105")
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// api POSTs an authenticated iLink call with base_info and decodes the JSON answer.
func (e *env) api(token, endpoint string, fields map[string]any) map[string]any {
	e.t.Helper()
	m, err := e.apiErr(token, endpoint, fields)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// apiErr is api for goroutines: it reports failures instead of failing the test.
func (e *env) apiErr(token, endpoint string, fields map[string]any) (map[string]any, error) {
	body := map[string]any{"base_info": map[string]any{"channel_version": "2.4.9", "bot_agent": "OpenClaw"}}
	for k, v := range fields {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.srv.URL+"/ilink/bot/"+endpoint, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	pluginHeaders(req.Header, token)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", endpoint, resp.StatusCode, out)
	}
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: decode %s: %w", endpoint, out, err)
	}
	return m, nil
}

// pollAsync runs one getupdates in a goroutine.
func (e *env) pollAsync(token, cursor string) <-chan map[string]any {
	done := make(chan map[string]any, 1)
	go func() {
		m, err := e.apiErr(token, "getupdates", map[string]any{"get_updates_buf": cursor})
		if err != nil {
			m = map[string]any{"error": err.Error()}
		}
		done <- m
	}()
	return done
}

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// num reads an integer field of a decoded answer (0 when missing).
func num(m map[string]any, k string) int64 {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0
	}
	v, _ := n.Int64()
	return v
}

func (e *env) bot() BotInfo {
	e.t.Helper()
	b, err := e.ctl.CreateBot(e.ctx, CreateBotRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) inject(botID string, req InjectRequest) Injected {
	e.t.Helper()
	in, err := e.ctl.Inject(e.ctx, botID, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

func (e *env) advance(d time.Duration) {
	e.t.Helper()
	if _, err := e.ctl.Advance(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
}

func textMsg(to, ctxToken, text string) map[string]any {
	return map[string]any{"msg": map[string]any{
		"from_user_id": "", "to_user_id": to, "client_id": "openclaw-weixin:" + strconv.FormatInt(time.Now().UnixNano(), 10),
		"message_type": 2, "message_state": 2, "context_token": ctxToken,
		"item_list": []any{map[string]any{"type": 1, "text_item": map[string]any{"text": text}}},
	}}
}

// send sends a text reply and returns the answer.
func (e *env) send(b BotInfo, to, ctxToken, text string) map[string]any {
	e.t.Helper()
	return e.api(b.Token, "sendmessage", textMsg(to, ctxToken, text))
}

// poll is one getupdates call.
func (e *env) poll(token, cursor string) map[string]any {
	e.t.Helper()
	return e.api(token, "getupdates", map[string]any{"get_updates_buf": cursor})
}

// msgs returns the msgs of a getupdates answer.
func msgs(m map[string]any) []map[string]any {
	list, _ := m["msgs"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, v := range list {
		if mm, ok := v.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

func isStale(m map[string]any) bool {
	return num(m, "errcode") == -14 || num(m, "ret") == -14
}
