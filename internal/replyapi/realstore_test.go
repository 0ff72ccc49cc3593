package replyapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// These tests run the API on the real store over PostgreSQL and real HTTP over loopback.
// None of them reaches Temporal (the store refuses or fails first): the API is built
// without one, and would fail the test by a nil dereference if it got that far.

// realAPI serves the API on a real store (through pool) on a loopback server whose
// handler counts the request body bytes the API reads.
type realAPI struct {
	srv  *httptest.Server
	read atomic.Int64
}

func serveRealAPI(t *testing.T, pool *pgxpool.Pool, cfg replyapi.Config) *realAPI {
	t.Helper()
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	cfg.Media = &activity.MediaFetcher{} // never reached: the store answers first
	api := replyapi.New(cfg)
	ra := &realAPI{}
	ra.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &countedBody{ReadCloser: r.Body, n: &ra.read}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(ra.srv.Close)
	return ra
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// filler is an endless source of 'x' bytes that allocates nothing per read.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// upload is a request sent on a raw connection: its headers at once, then size bytes of
// body written while its answer is read (an answer before the body is the point), so that
// a server that stops reading never fails the client.
type upload struct {
	method, path, contentType, token string
	head, tail                       string // written around the filler
	size                             int64
}

// multipartUpload is a multipart media reply of size bytes whose file part never ends
// before the body does.
func multipartUpload(path, token string, size int64) upload {
	const b = "b0undary"
	head := "--" + b + "\r\nContent-Disposition: form-data; name=\"type\"\r\n\r\nfile\r\n" +
		"--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n"
	tail := "\r\n--" + b + "--\r\n"
	return upload{method: http.MethodPost, path: path, contentType: "multipart/form-data; boundary=" + b, token: token,
		head: head, tail: tail, size: size}
}

// send makes the request and returns its answer's status and error code.
func (u upload) send(t *testing.T, addr string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fillerSize := u.size - int64(len(u.head)+len(u.tail))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		u.method, u.path, addr, u.token, u.contentType, u.size)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		// Write errors are expected: the server may answer and close without reading.
		_, _ = io.Copy(c, io.MultiReader(strings.NewReader(u.head), io.LimitReader(filler{}, fillerSize), strings.NewReader(u.tail)))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", u.method, u.path, err)
	}
	defer resp.Body.Close()
	var body replyapi.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	_ = c.Close()
	<-wrote
	return resp.StatusCode, body.Error.Code
}

const bogusToken = "bogus-token-that-no-session-has-0123456789"

// A media reply, a text reply and a verdict with a token no session has are refused 401
// before their bodies are read: the API reads none of a 20 MiB upload.
func TestAnUnauthenticatedBodyIsRefusedBeforeItIsRead(t *testing.T) {
	t.Parallel()
	api := serveRealAPI(t, dbtest.NewPool(t), replyapi.Config{})
	addr := api.srv.Listener.Addr().String()
	for _, u := range []upload{
		multipartUpload("/v1/reply", bogusToken, replyapi.DefaultMaxMediaBytes),
		{method: http.MethodPost, path: "/v1/reply", contentType: "application/json", token: bogusToken,
			head: `{"type":"text","text":"`, tail: `"}`, size: replyapi.DefaultMaxBodyBytes},
		{method: http.MethodPost, path: "/v1/done", contentType: "application/json", token: bogusToken,
			head: `{"status":"failed","reason":"`, tail: `"}`, size: 2048},
		{method: http.MethodPost, path: "/v1/typing", contentType: "application/json", token: bogusToken,
			head: `{"status":"typing`, tail: `"}`, size: 64},
	} {
		before := api.read.Load()
		status, code := u.send(t, addr)
		if status != http.StatusUnauthorized || code != replyapi.CodeInvalidSession {
			t.Errorf("%s %s: %d %s, want 401 %s", u.contentType, u.path, status, code, replyapi.CodeInvalidSession)
		}
		if n := api.read.Load() - before; n > 4<<10 {
			t.Errorf("%s %s: the API read %d bytes of an unauthenticated body", u.contentType, u.path, n)
		}
	}
}

// Forty unauthenticated 20 MiB media replies at once leave the process's memory much as
// it was: the bodies are never buffered (less than 100 MiB allocated in all, and less
// than 100 MiB more memory taken from the system, which only grows with the peak).
func TestFortyUnauthenticatedUploadsAtOnceGrowMemoryByLessThan100MiB(t *testing.T) {
	// Not parallel: the memory of the process is measured.
	api := serveRealAPI(t, dbtest.NewPool(t), replyapi.Config{})
	addr := api.srv.Listener.Addr().String()
	u := multipartUpload("/v1/reply", bogusToken, replyapi.DefaultMaxMediaBytes)
	u.send(t, addr) // warm up the pool and the server
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = u.send(t, addr)
		}()
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, s := range statuses {
		if s != http.StatusUnauthorized {
			t.Fatalf("upload %d answered %d, want 401", i, s)
		}
	}
	const bound = 100 << 20
	allocated, taken := after.TotalAlloc-before.TotalAlloc, int64(after.Sys)-int64(before.Sys)
	t.Logf("40 unauthenticated uploads of %d MiB: %.1f MiB allocated, %.1f MiB more taken from the system, %d body bytes read",
		replyapi.DefaultMaxMediaBytes>>20, float64(allocated)/(1<<20), float64(taken)/(1<<20), api.read.Load())
	if allocated > bound || taken > bound {
		t.Fatalf("memory grew by %d bytes allocated, %d taken from the system: want less than %d", allocated, taken, bound)
	}
}

// With PostgreSQL accepting connections but never answering (a blackholed proxy between
// the store and the database, open connections included), every agent-facing route
// answers 503 store_unavailable within its store timeout, and the same routes work again
// once the database answers.
func TestEveryRouteAnswersStoreUnavailableInTimeWhenPostgreSQLHangs(t *testing.T) {
	t.Parallel()
	direct := dbtest.URL()
	cc, err := pgxpool.ParseConfig(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.New(net.JoinHostPort(cc.ConnConfig.Host, strconv.Itoa(int(cc.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	})
	t.Cleanup(func() { _ = proxy.Close() }) // before the pool closes (cleanups run last first)
	const timeout = time.Second
	api := serveRealAPI(t, pool, replyapi.Config{StoreTimeout: timeout})
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := api.srv.Listener.Addr().String()
	key := "im_" + strings.Repeat("0", 32)
	routes := []upload{
		{method: http.MethodPost, path: "/v1/reply", contentType: "application/json", token: bogusToken, head: `{"type":"text","text":"hi"}`},
		multipartUpload("/v1/reply", bogusToken, 1<<10),
		{method: http.MethodPost, path: "/v1/done", contentType: "application/json", token: bogusToken, head: `{"status":"handled"}`},
		{method: http.MethodPost, path: "/v1/typing", contentType: "application/json", token: bogusToken, head: `{"status":"typing"}`},
		{method: http.MethodGet, path: "/v1/messages/" + key + "/attachments/0", contentType: "application/json", token: bogusToken},
	}
	for i := range routes {
		if routes[i].size == 0 {
			routes[i].size = int64(len(routes[i].head))
		}
	}
	proxy.Blackhole()
	for _, u := range routes {
		began := time.Now()
		status, code := u.send(t, addr)
		took := time.Since(began)
		if status != http.StatusServiceUnavailable || code != replyapi.CodeStoreUnavailable {
			t.Errorf("%s %s (%s) with PostgreSQL hanging: %d %s after %v, want 503 %s", u.method, u.path, u.contentType, status, code, took,
				replyapi.CodeStoreUnavailable)
		}
		if took > timeout+5*time.Second {
			t.Errorf("%s %s (%s): answered after %v, past its store timeout of %v", u.method, u.path, u.contentType, took, timeout)
		}
	}
	proxy.Restore()
	for _, u := range routes {
		// The database answers again: the token is looked up and found unknown.
		if status, code := u.send(t, addr); status != http.StatusUnauthorized || code != replyapi.CodeInvalidSession {
			t.Errorf("%s %s (%s) after PostgreSQL came back: %d %s, want 401", u.method, u.path, u.contentType, status, code)
		}
	}
}
