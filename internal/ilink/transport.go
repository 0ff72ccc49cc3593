package ilink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ilinkflow/ilinkflow/internal/tracing"
)

// Header names, spelled exactly as the official plugin sends them. They are
// set verbatim (not canonicalised) so the wire carries this spelling.
const (
	hdrContentType       = "Content-Type"
	hdrAuthorizationType = "AuthorizationType"
	hdrAuthorization     = "Authorization"
	hdrUIN               = "X-WECHAT-UIN"
	hdrAppID             = "iLink-App-Id"
	hdrClientVersion     = "iLink-App-ClientVersion"
	hdrRouteTag          = "SKRouteTag"
	// authorizationType is the fixed value of the AuthorizationType header.
	authorizationType = "ilink_bot_token"
	// hdrEncryptedParam is the CDN upload response header with the download
	// reference.
	hdrEncryptedParam = "X-Encrypted-Param"
	// hdrErrorMessage is the CDN's error reason header.
	hdrErrorMessage = "X-Error-Message"
)

// clientTimeout marks a request cut off by the client's own deadline (not by
// the caller's context). It matches context.DeadlineExceeded in errors.Is.
type clientTimeout struct{}

func (clientTimeout) Error() string        { return "client timeout" }
func (clientTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// errClientTimeout is the cause of the client's own deadlines.
var errClientTimeout error = clientTimeout{}

// errTooLarge is the cause of a CodeBodyTooLarge error.
var errTooLarge = errors.New("response body exceeds the configured cap")

// request describes one HTTP exchange.
type request struct {
	op      string
	method  string
	url     string
	body    []byte
	ctype   string
	json    bool // JSON POST: AuthorizationType, X-WECHAT-UIN
	auth    bool // send Authorization when a token exists
	ilink   bool // iLink-App-Id, iLink-App-ClientVersion, SKRouteTag
	timeout time.Duration
	limit   int64
	// sendBy, when set, is the last instant the request may leave (sendByBody).
	sendBy time.Time
}

// response is a fully read HTTP answer with a 2xx status.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do performs r and classifies every failure into an *Error. Only 2xx
// responses are returned; the body is read in full up to r.limit bytes.
func (c *Client) do(ctx context.Context, r request) (resp *response, err error) {
	// A span per exchange when the caller's context records one (tracing on): named after
	// the endpoint, with the error's stable code; never the URL (a CDN URL authorises).
	ctx, span := tracing.Child(ctx, "ilink", r.op, trace.SpanKindClient)
	defer func() { tracing.End(span, string(CodeOf(err))) }()
	if err := ctx.Err(); err != nil {
		return nil, &Error{Code: CodeNotSent, Op: r.op, Err: err}
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if r.timeout > 0 {
		cctx, cancel = context.WithTimeoutCause(ctx, r.timeout, errClientTimeout)
	}
	defer cancel()

	// A request can only have been processed once it was completely written
	// on a connection; before that it surely never reached the server.
	var gotConn, wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(cctx, trace), r.method, r.url, body)
	if err != nil {
		return nil, &Error{Code: CodeInvalidInput, Op: r.op, Err: errors.New("cannot build request")}
	}
	if !r.sendBy.IsZero() && r.body != nil {
		req.Body = sendByBody{Reader: bytes.NewReader(r.body), by: r.sendBy}
		req.GetBody = func() (io.ReadCloser, error) {
			return sendByBody{Reader: bytes.NewReader(r.body), by: r.sendBy}, nil
		}
	}
	c.setHeaders(req.Header, r)

	hresp, err := c.http.Do(req)
	if err != nil {
		code, stage := CodeNotSent, "before connecting"
		switch {
		case wrote.Load():
			code, stage = CodeOutcomeUnknown, "after the request was written"
		case gotConn.Load():
			stage = "before the request was written"
		case !c.traced:
			// A transport that reports no trace events cannot prove the
			// request stayed local.
			code, stage = CodeOutcomeUnknown, "with an untraced transport"
		}
		return nil, &Error{Code: code, Op: r.op,
			Err: fmt.Errorf("%s: %w", stage, transportCause(ctx, cctx, err))}
	}
	defer hresp.Body.Close()

	limit := r.limit
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		limit = 64 << 10 // drain a little for connection reuse; the content is not used
	}
	data, rerr := readLimited(hresp.Body, hresp.ContentLength, limit)
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		return nil, &Error{Code: CodeHTTPStatus, Op: r.op, Status: hresp.StatusCode,
			Errmsg: hresp.Header.Get(hdrErrorMessage)}
	}
	if rerr != nil {
		if errors.Is(rerr, errTooLarge) {
			return nil, &Error{Code: CodeBodyTooLarge, Op: r.op, Status: hresp.StatusCode,
				Err: fmt.Errorf("%w (%d bytes)", errTooLarge, limit)}
		}
		return nil, &Error{Code: CodeOutcomeUnknown, Op: r.op, Status: hresp.StatusCode,
			Err: transportCause(ctx, cctx, rerr)}
	}
	return &response{status: hresp.StatusCode, header: hresp.Header, body: data}, nil
}

// errPastSendBy is why a request past its send-by instant was not sent.
var errPastSendBy = errors.New("the request's send-by instant passed before it was written")

// sendByBody is a request body that refuses to be read past its send-by instant. The
// transport reads the body after buffering the headers and writes the request out after
// the body's last read, so a request whose last read comes too late is never completely
// written: the server never processes it. The clock is the monotonic one, which runs on
// while the process is stopped (SIGSTOP), so a request built before a stop and written
// after it is refused. What is left is the instant between the last read and the write.
type sendByBody struct {
	*bytes.Reader
	by time.Time
}

// Read reads the body, or fails once the send-by instant has passed.
func (b sendByBody) Read(p []byte) (int, error) {
	if time.Now().After(b.by) {
		return 0, errPastSendBy
	}
	return b.Reader.Read(p)
}

// Close does nothing: the body is in memory.
func (sendByBody) Close() error { return nil }

// transportCause strips the URL from a *url.Error (CDN URLs carry
// authorisation) and marks the client's own deadline.
func transportCause(parent, cctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if parent.Err() == nil && context.Cause(cctx) == errClientTimeout && !errors.Is(err, errClientTimeout) {
		return fmt.Errorf("%w: %w", errClientTimeout, err)
	}
	return err
}

// isClientTimeout reports whether err came from the client's own deadline.
func isClientTimeout(err error) bool { return errors.Is(err, errClientTimeout) }

// readLimited reads r to the end, failing with errTooLarge beyond limit
// bytes. It never holds more than limit+1 bytes of input.
func readLimited(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	if contentLength > limit {
		return nil, errTooLarge
	}
	var buf bytes.Buffer
	if contentLength > 0 {
		buf.Grow(int(contentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if n > limit {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// setHeaders writes the headers of r exactly as the official plugin does.
func (c *Client) setHeaders(h http.Header, r request) {
	set := func(k, v string) { h[k] = []string{v} }
	if r.ctype != "" {
		set(hdrContentType, r.ctype)
	}
	if r.json {
		set(hdrAuthorizationType, authorizationType)
		set(hdrUIN, randomUIN())
	}
	if r.auth && c.token != "" {
		set(hdrAuthorization, "Bearer "+c.token.Reveal())
	}
	if r.ilink {
		set(hdrAppID, c.cfg.AppID)
		set(hdrClientVersion, c.versionHeader)
		if c.cfg.RouteTag != "" {
			set(hdrRouteTag, c.cfg.RouteTag)
		}
	}
}

// randomUIN returns X-WECHAT-UIN: base64 of the decimal text of a random
// uint32.
func randomUIN() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥1.24)
	n := binary.BigEndian.Uint32(b[:])
	return base64.StdEncoding.EncodeToString([]byte(strconv.FormatUint(uint64(n), 10)))
}
