package ilink

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestConnectionRefusedIsNotSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := newServerClient(t, "http://"+addr, Config{}, "tok")
	_, err = c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeNotSent || !IsRetryable(err) || MayHaveTakenEffect(err) {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ErrNotSent) {
		t.Fatal("errors.Is(ErrNotSent) failed")
	}
}

func TestDNSFailureIsNotSent(t *testing.T) {
	c := newServerClient(t, "http://no-such-host.invalid", Config{}, "tok")
	_, err := c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeNotSent {
		t.Fatalf("got %v", err)
	}
}

func TestContextCancelledBeforeSendingIsNotSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("request reached the server")
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.SendText(ctx, SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeNotSent || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// dropAfterRead reads the whole request, then closes the connection without
// answering.
func dropAfterRead(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func TestConnectionDroppedAfterRequestIsOutcomeUnknown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(dropAfterRead))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	_, err := c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeOutcomeUnknown || IsRetryable(err) || !MayHaveTakenEffect(err) || !IsTransient(err) {
		t.Fatalf("got %v", err)
	}
}

// blockingServer reads each request and then never answers until the
// client goes away or the test ends. arrived receives one value per request.
func blockingServer(t *testing.T) (srv *httptest.Server, arrived chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	arrived = make(chan struct{}, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	return srv, arrived
}

func TestTimeoutAwaitingResponseIsOutcomeUnknown(t *testing.T) {
	srv, _ := blockingServer(t)
	c := newServerClient(t, srv.URL, Config{SendTimeout: 50 * time.Millisecond}, "tok")
	_, err := c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeOutcomeUnknown || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestLongPollClientTimeoutIsEmptyPageWithCursorUnchanged(t *testing.T) {
	srv, _ := blockingServer(t)
	c := newServerClient(t, srv.URL, Config{PollTimeout: 30 * time.Millisecond, PollMargin: 20 * time.Millisecond}, "tok")
	page, err := c.GetUpdates(context.Background(), GetUpdatesRequest{Cursor: "Ckcursor"})
	if err != nil {
		t.Fatal(err)
	}
	if !page.TimedOut || page.Cursor != "Ckcursor" || len(page.Messages) != 0 {
		t.Fatalf("%+v", page)
	}
}

func TestLongPollCancelledByCallerIsAnError(t *testing.T) {
	srv, arrived := blockingServer(t)
	c := newServerClient(t, srv.URL, Config{}, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	page, err := c.GetUpdates(ctx, GetUpdatesRequest{Cursor: "c"})
	if err == nil || !errors.Is(err, context.Canceled) || page != nil {
		t.Fatalf("got %+v, %v", page, err)
	}
}

func TestGetUpdatesFollowsTheServerPollHint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ret":0,"msgs":[],"get_updates_buf":"next","longpolling_timeout_ms":1234}`)
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	if got := c.pollDuration(0); got != DefaultPollTimeout {
		t.Fatalf("initial poll %v", got)
	}
	page, err := c.GetUpdates(context.Background(), GetUpdatesRequest{Cursor: "old"})
	if err != nil || page.Cursor != "next" || page.PollTimeout != 1234*time.Millisecond {
		t.Fatalf("%+v %v", page, err)
	}
	if got := c.pollDuration(0); got != 1234*time.Millisecond {
		t.Fatalf("next poll %v", got)
	}
	if got := c.pollDuration(time.Hour); got != DefaultMaxPollTimeout {
		t.Fatalf("cap %v", got)
	}
}

func TestHTTP5xxIsARetryableStatusError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	err := c.NotifyStart(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeHTTPStatus || e.Status != 502 || !IsRetryable(err) {
		t.Fatalf("got %v", err)
	}
}

func TestHTTP4xxIsNotRetryable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	err := c.NotifyStart(context.Background())
	if CodeOf(err) != CodeHTTPStatus || IsRetryable(err) || IsTransient(err) {
		t.Fatalf("got %v", err)
	}
}

func TestOversizedBodyIsBodyTooLarge(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := `{"ret":0,"pad":"` + strings.Repeat("x", 500) + `"}`
			if chunked {
				w.(http.Flusher).Flush()
			}
			_, _ = io.WriteString(w, body)
		}))
		c := newServerClient(t, srv.URL, Config{MaxBodyBytes: 100}, "tok")
		_, err := c.GetUpdates(context.Background(), GetUpdatesRequest{})
		srv.Close()
		if CodeOf(err) != CodeBodyTooLarge || !MayHaveTakenEffect(err) || !strings.Contains(err.Error(), "100 bytes") {
			t.Fatalf("chunked=%v: got %v", chunked, err)
		}
	}
}

func TestInvalidBodyIsMalformed(t *testing.T) {
	for _, body := range []string{``, `not json`, `[]`, `null`, `{"ret":"zero"}`, `{"msgs":[{"message_id":-1}]}`, `{"ret":0`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, body)
		}))
		c := newServerClient(t, srv.URL, Config{}, "tok")
		_, err := c.GetUpdates(context.Background(), GetUpdatesRequest{})
		srv.Close()
		if CodeOf(err) != CodeMalformedBody || !errors.Is(err, ErrMalformedBody) {
			t.Errorf("%q: got %v", body, err)
		}
	}
}

func TestErrorTextNeverContainsSecrets(t *testing.T) {
	const token = "bot:supersecret-token"
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	c := newServerClient(t, "http://"+addr, Config{}, token)
	key := make([]byte, 16)
	media := &CDNMedia{FullURL: "http://" + addr + "/download?encrypted_query_param=SECRETPARAM", AESKey: OutboundAESKey(key)}
	_, err1 := c.DownloadMedia(context.Background(), media, key)
	_, err2 := c.SendText(context.Background(), SendOptions{ToUserID: "u", ContextToken: "CKsecretctx"}, "x")
	_, err3 := c.GetConfig(context.Background(), "u", "CKsecretctx")
	for _, err := range []error{err1, err2, err3} {
		if err == nil {
			t.Fatal("expected an error")
		}
		s := err.Error()
		for _, secret := range []string{"supersecret", "SECRETPARAM", "CKsecretctx"} {
			if strings.Contains(s, secret) {
				t.Errorf("error text leaks %s: %s", secret, s)
			}
		}
	}
}

func TestPostIsNeverRedirectedByTheDefaultClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("request turned into %s %s", r.Method, r.URL)
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	_, err := c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeHTTPStatus || e.Status != http.StatusFound {
		t.Fatalf("got %v", err)
	}
}

func TestUntracedTransportFailuresAreOutcomeUnknown(t *testing.T) {
	c, err := New(Config{HTTPClient: &http.Client{Transport: failingTransport{}}}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x")
	if CodeOf(err) != CodeOutcomeUnknown {
		t.Fatalf("got %v", err)
	}
}

// failingTransport fails every request without reporting trace events.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection reset by peer")
}

// A getupdates past its send-by instant is never written whole: the server gets at most
// its headers (which no server can serve without the body and its cursor), never its body,
// and the error says it was not sent.
func TestGetUpdatesPastItsSendByNeverReachesTheServerWhole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer conn.Close()
		data, _ := io.ReadAll(conn) // until the client closes the connection
		received <- data
	}()
	c := newServerClient(t, "http://"+ln.Addr().String(), Config{}, "tok")
	page, err := c.GetUpdates(context.Background(), GetUpdatesRequest{Cursor: "c", SendBy: time.Now().Add(-time.Millisecond)})
	if CodeOf(err) != CodeNotSent || MayHaveTakenEffect(err) || page != nil {
		t.Fatalf("got %+v, %v; want not sent", page, err)
	}
	if !errors.Is(err, errPastSendBy) {
		t.Fatalf("error %v does not say the send-by instant passed", err)
	}
	c.http.CloseIdleConnections()
	data := <-received
	if strings.Contains(string(data), "get_updates_buf") {
		t.Fatalf("the server received the body of a request past its send-by instant: %q", data)
	}
	if len(data) > 0 {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		if err == nil {
			_, err = io.ReadAll(req.Body)
		}
		if err == nil {
			t.Fatalf("the server received a whole request past its send-by instant: %q", data)
		}
	}
}

// A getupdates written before its send-by instant is an ordinary long poll.
func TestGetUpdatesBeforeItsSendByIsSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"get_updates_buf":"c"`) {
			t.Errorf("body %s", body)
		}
		_, _ = io.WriteString(w, `{"ret":0,"get_updates_buf":"d","msgs":[]}`)
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "tok")
	page, err := c.GetUpdates(context.Background(), GetUpdatesRequest{Cursor: "c", SendBy: time.Now().Add(time.Minute)})
	if err != nil || page.Cursor != "d" {
		t.Fatalf("got %+v, %v", page, err)
	}
}
