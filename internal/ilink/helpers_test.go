package ilink

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// captured is one request seen by captureTransport.
type captured struct {
	method string
	url    string
	header map[string][]string // exactly as set by the client (not canonicalised)
	body   []byte
}

// captureTransport records requests and answers each with respond (or
// {"ret":0}).
type captureTransport struct {
	mu      sync.Mutex
	reqs    []captured
	respond func(*http.Request) *http.Response
}

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{method: r.Method, url: r.URL.String(), header: maps.Clone(map[string][]string(r.Header)), body: body})
	c.mu.Unlock()
	if c.respond != nil {
		return c.respond(r), nil
	}
	return jsonResponse(r, 200, `{"ret":0}`), nil
}

func (c *captureTransport) last(t *testing.T) captured {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		t.Fatal("no request captured")
	}
	return c.reqs[len(c.reqs)-1]
}

func (c *captureTransport) all() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

func jsonResponse(r *http.Request, status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

// newCaptureClient returns a client whose requests go to a captureTransport.
func newCaptureClient(t *testing.T, cfg Config, token Secret) (*Client, *captureTransport) {
	t.Helper()
	ct := &captureTransport{}
	cfg.HTTPClient = &http.Client{Transport: ct}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.test"
	}
	if cfg.CDNBaseURL == "" {
		cfg.CDNBaseURL = "https://cdn.test/c2c"
	}
	c, err := New(cfg, token)
	if err != nil {
		t.Fatal(err)
	}
	return c, ct
}

// newServerClient returns a client for a real test server URL.
func newServerClient(t *testing.T, url string, cfg Config, token Secret) *Client {
	t.Helper()
	cfg.BaseURL = url
	if cfg.CDNBaseURL == "" {
		cfg.CDNBaseURL = url + "/c2c"
	}
	c, err := New(cfg, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
