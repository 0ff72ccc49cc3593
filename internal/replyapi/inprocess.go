package replyapi

import (
	"bytes"
	"context"
	"net/http"

	"github.com/ilinkflow/ilinkflow/sealing"
)

// Answer is what the reply API answered a request made in process.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// InProcess makes one request of the reply API h in process, under a session token (the
// MCP server and the iLink facade act through it so that they keep its rules): method and
// path as the API serves them, an idempotency key and a content type when not "".
func InProcess(ctx context.Context, h http.Handler, method, path string, token sealing.Secret, idempotencyKey, contentType string,
	body []byte) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://ilinkflow.invalid"+path, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.ContentLength = int64(len(body))
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return Answer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}, nil
}

// recorder is the http.ResponseWriter of an in-process call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
