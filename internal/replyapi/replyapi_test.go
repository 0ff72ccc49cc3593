package replyapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// These tests pin the HTTP mapping with fakes; e2e/replyapi_test.go runs the API against
// the real dev server, PostgreSQL and the simulator.

var now = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const token = "tok-0123456789abcdef0123456789abcdef"

type fakeStore struct {
	mu         sync.Mutex
	validate   error
	window     store.Window
	tokens     []string
	replies    map[string]store.SendOutcome // by request id
	stageErr   error                        // from StageMedia
	staged     int                          // StageMedia calls
	stagedName string
}

func (f *fakeStore) FindReply(_ context.Context, _ store.SessionRef, requestID string) (store.SendOutcome, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, ok := f.replies[requestID]
	return out, ok, nil
}

func (f *fakeStore) ValidateSession(_ context.Context, _ time.Time, ref store.SessionRef) (store.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, ref.Token.Reveal())
	if f.validate != nil {
		return store.Session{}, f.validate
	}
	return store.Session{SessionID: "s-1", SourceMessageKey: "m-1", ReplyWindowID: 7}, nil
}

func (f *fakeStore) GetWindow(context.Context, int64) (store.Window, error) { return f.window, nil }

// GetAttachment is not reached by these tests (e2e/media_test.go covers the media
// endpoints against the real store).
func (f *fakeStore) GetAttachment(context.Context, time.Time, store.SessionRef, string, int) (store.AttachmentLocator, error) {
	return store.AttachmentLocator{}, &store.Error{Code: vocab.CodeAttachmentNotFound, Msg: "none"}
}

func (f *fakeStore) StageMedia(_ context.Context, _ time.Time, in store.StageMediaInput) (store.StagedMedia, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.staged++
	f.stagedName = in.FileName
	if f.stageErr != nil {
		return store.StagedMedia{}, f.stageErr
	}
	return store.StagedMedia{MediaID: "md-1", SessionID: "s-1", ReplyWindowID: 7, Kind: in.Kind, FileName: in.FileName,
		Size: int64(len(in.Data))}, nil
}

// testInstallation is the installation id of the fake store's windows.
const testInstallation = "0123456789ab"

// HoldReply of the fake holds nothing: the reply API's holding is tested against the
// real store (realstore_test.go and the e2e tests).
func (f *fakeStore) HoldReply(context.Context, time.Time, store.HoldInput) (store.HeldReply, error) {
	return store.HeldReply{}, &store.Error{Code: vocab.CodeReplyNotHoldable, Msg: "the fake store holds nothing"}
}

func (f *fakeStore) RequestReminder(context.Context, time.Time, store.SessionRef) (store.Window, time.Time, error) {
	return store.Window{}, time.Time{}, &store.Error{Code: vocab.CodeInvalidInput, Msg: "the fake store has no reminders"}
}

func (f *fakeStore) FindHeldReply(context.Context, store.SessionRef, string) (store.HeldReply, bool, error) {
	return store.HeldReply{}, false, nil
}

func (f *fakeStore) WindowWorkflowID(_ context.Context, windowID int64) (string, error) {
	return wfapi.ReplyWindowID(testInstallation, windowID), nil
}

type fakeUpdater struct {
	mu    sync.Mutex
	calls []client.UpdateWorkflowOptions
	res   wfapi.SendResult
	err   error // from UpdateWorkflow
	// errCalls, when > 0, returns err from the first errCalls calls only.
	errCalls int
	get      error // from the handle's Get
	health   error // from CheckHealth
}

func (f *fakeUpdater) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.health != nil {
		return nil, f.health
	}
	return &client.CheckHealthResponse{}, nil
}

func (f *fakeUpdater) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, o)
	if f.err != nil && (f.errCalls == 0 || len(f.calls) <= f.errCalls) {
		return nil, f.err
	}
	finished := vocab.MessageFailed
	if req, ok := o.Args[0].(wfapi.FinishRequest); ok && req.Handled {
		finished = vocab.MessageHandled
	}
	return handle{res: f.res, finished: finished, err: f.get}, nil
}

type handle struct {
	res      wfapi.SendResult
	finished string // the FinishResult's status
	err      error
}

func (h handle) WorkflowID() string { return "" }
func (h handle) RunID() string      { return "" }
func (h handle) UpdateID() string   { return "" }
func (h handle) Get(_ context.Context, v any) error {
	if h.err != nil {
		return h.err
	}
	switch v := v.(type) {
	case *wfapi.SendResult:
		*v = h.res
	case *wfapi.FinishResult:
		*v = wfapi.FinishResult{MessageKey: "m-1", Status: h.finished}
	}
	return nil
}

type rig struct {
	st  *fakeStore
	up  *fakeUpdater
	api *replyapi.API
	log *bytes.Buffer
}

func newRig() *rig {
	r := &rig{st: &fakeStore{}, up: &fakeUpdater{}, log: &bytes.Buffer{}}
	r.api = replyapi.New(replyapi.Config{Store: r.st, Temporal: r.up, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return r
}

func (r *rig) post(t *testing.T, path, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	r.api.ServeHTTP(w, req)
	if strings.Contains(w.Body.String(), token) || strings.Contains(r.log.String(), token) {
		t.Fatal("the session token was echoed or logged")
	}
	return w
}

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var b replyapi.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return b.Error.Code
}

func TestSentReplyExecutesTheWindowsUpdate(t *testing.T) {
	t.Parallel()
	r := newRig()
	r.up.res = wfapi.SendResult{AttemptID: "sa_1", ClientMessageID: "c-1", Status: vocab.AttemptSent, ProviderMessageID: "42", SendsLeft: 9}
	w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`, "Idempotency-Key", "k-1")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got replyapi.ReplyResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := replyapi.ReplyResponse{AttemptID: "sa_1", ClientMessageID: "c-1", Status: "sent", ProviderMessageID: "42", SendsLeft: 9, RequestID: "k-1"}
	if got != want {
		t.Fatalf("answer %+v, want %+v", got, want)
	}
	if len(r.up.calls) != 1 {
		t.Fatalf("%d updates", len(r.up.calls))
	}
	c := r.up.calls[0]
	req := c.Args[0].(wfapi.SendRequest)
	if c.WorkflowID != wfapi.ReplyWindowID(testInstallation, 7) || c.UpdateName != wfapi.UpdateSend || c.UpdateID != replyapi.UpdateID("k-1") ||
		c.WaitForStage != client.WorkflowUpdateStageCompleted || req.Type != "text" || req.Text != "hi" || req.RequestID != c.UpdateID {
		t.Fatalf("update %+v", c)
	}
	if len(r.st.tokens) != 1 || r.st.tokens[0] != token {
		t.Fatalf("validated tokens %d", len(r.st.tokens))
	}
}

func TestWithoutAKeyEachRequestGetsItsOwnUpdate(t *testing.T) {
	t.Parallel()
	r := newRig()
	r.up.res = wfapi.SendResult{AttemptID: "sa_1", Status: vocab.AttemptSent}
	for i := 0; i < 2; i++ {
		if w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	if len(r.up.calls) != 2 || r.up.calls[0].UpdateID == r.up.calls[1].UpdateID || r.up.calls[0].UpdateID == "" {
		t.Fatalf("update ids %q, %q", r.up.calls[0].UpdateID, r.up.calls[1].UpdateID)
	}
}

// Bad input is refused with its typed 400 once the session is known (the body is read
// after the token is checked) and never reaches Temporal; a body declared over the cap is
// refused before the store is asked anything.
func TestBadInputIsRefusedBeforeTemporalAndWritesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, path, body, code string }{
		{"bad json", "/v1/reply", `{`, replyapi.CodeInvalidJSON},
		{"unknown type", "/v1/reply", `{"type":"location"}`, replyapi.CodeUnsupportedType},
		{"text with media", "/v1/reply", `{"type":"text","text":"a","media":{}}`, replyapi.CodeInvalidJSON},
		{"too long", "/v1/reply", `{"type":"text","text":"` + strings.Repeat("é", 8*1024+1) + `"}`, replyapi.CodeTextTooLong},
		{"empty", "/v1/reply", `{"type":"text"}`, replyapi.CodeInvalidText},
		{"U+0000 escaped", "/v1/reply", `{"type":"text","text":"a\u0000b"}`, replyapi.CodeInvalidText},
		{"U+0000 alone", "/v1/reply", `{"type":"text","text":"\u0000"}`, replyapi.CodeInvalidText},
		{"duplicate text", "/v1/reply", `{"type":"text","text":"a","text":"b"}`, replyapi.CodeInvalidJSON},
		{"duplicate type in another case", "/v1/reply", `{"type":"text","text":"a","TYPE":"text"}`, replyapi.CodeInvalidJSON},
		{"duplicate in a nested object", "/v1/reply", `{"type":"text","text":"a","media":{"x":1,"x":2}}`, replyapi.CodeInvalidJSON},
		{"done status", "/v1/done", `{"status":"processing"}`, replyapi.CodeInvalidStatus},
		{"done json", "/v1/done", `{"status":"handled","extra":1}`, replyapi.CodeInvalidJSON},
		{"done duplicate status", "/v1/done", `{"status":"failed","status":"handled"}`, replyapi.CodeInvalidJSON},
		{"done reason with U+0000", "/v1/done", `{"status":"failed","reason":"a\u0000b"}`, replyapi.CodeInvalidReason},
		{"typing duplicate status", "/v1/typing", `{"status":"typing","status":"cancel"}`, replyapi.CodeInvalidJSON},
	} {
		r := newRig()
		w := r.post(t, c.path, c.body)
		if w.Code != http.StatusBadRequest || code(t, w) != c.code {
			t.Errorf("%s: %d %s, want 400 %s", c.name, w.Code, w.Body, c.code)
		}
		if len(r.up.calls) != 0 || r.st.staged != 0 {
			t.Errorf("%s: Temporal was called or media staged", c.name)
		}
		// The same request again gets the same answer.
		if again := r.post(t, c.path, c.body); again.Code != w.Code || code(t, again) != code(t, w) {
			t.Errorf("%s: repeated: %d %s", c.name, again.Code, again.Body)
		}
	}
	r := newRig()
	w := r.post(t, "/v1/reply", `{"type":"text","text":"`+strings.Repeat("a", 70<<10)+`"}`)
	if w.Code != http.StatusBadRequest || code(t, w) != replyapi.CodeBodyTooLarge || len(r.st.tokens) != 0 {
		t.Errorf("a body declared over the cap: %d %s after %d session checks", w.Code, w.Body, len(r.st.tokens))
	}
}

// An unauthenticated request is refused before its body is read, whatever the body.
func TestAnInvalidSessionIsRefusedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{`, `{"type":"text","text":"a","text":"b"}`, `{"type":"text","text":"\u0000"}`} {
		r := newRig()
		r.st.validate = store.ErrInvalidAgentSession
		req := httptest.NewRequest(http.MethodPost, "/v1/reply", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		counted := &countingReader{r: req.Body}
		req.Body = counted
		w := httptest.NewRecorder()
		r.api.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized || code(t, w) != replyapi.CodeInvalidSession || counted.n != 0 {
			t.Errorf("%s: %d %s after reading %d bytes, want 401 unread", body, w.Code, w.Body, counted.n)
		}
	}
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// Content the store refuses (invalid_input) is a 400 that names what was refused, never a
// session error; a store that did not answer is 503 store_unavailable.
func TestAStoreRefusalOfContentIsA400NotASessionError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"invalid input", &store.Error{Code: vocab.CodeInvalidInput, Msg: "stage media: invalid byte sequence"}, 400, replyapi.CodeInvalidInput},
		{"unavailable", store.ErrUnavailable, 503, replyapi.CodeStoreUnavailable},
		{"deadline", fmt.Errorf("stage media: %w", context.DeadlineExceeded), 503, replyapi.CodeStoreUnavailable},
		{"quota", store.ErrReplyQuotaExhausted, 409, replyapi.CodeQuotaExhausted},
		{"internal", errors.New("boom"), 500, replyapi.CodeInternal},
	} {
		r := newRig()
		r.st.stageErr = c.err
		ct, body := imageReply(t, "a.png")
		w := r.post(t, "/v1/reply", body, "Content-Type", ct)
		if w.Code != c.status || code(t, w) != c.code {
			t.Errorf("%s: staging: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
		if c.code == replyapi.CodeInvalidInput && !strings.Contains(w.Body.String(), "media reply") {
			t.Errorf("%s: the refusal does not name what was refused: %s", c.name, w.Body)
		}
		if len(r.up.calls) != 0 {
			t.Errorf("%s: Temporal was called", c.name)
		}
		r = newRig()
		r.st.validate = c.err
		if w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`); w.Code != c.status || code(t, w) != c.code {
			t.Errorf("%s: session: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
	}
}

// A NUL or another control character in a media reply's file name is a typed 400 that
// names the field, before anything is staged; a path in the name is dropped.
func TestAControlCharacterInAFileNameIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, field, fileName, partName, want string
	}{
		{"NUL in file_name", "file_name", "a\x00b.txt", "ok.txt", "file_name"},
		{"newline in file_name", "file_name", "a\nb.txt", "ok.txt", "file_name"},
		{"invalid UTF-8 in file_name", "file_name", "a\xffb.txt", "ok.txt", "file_name"},
		{"NUL in the part's filename", "", "", "a%00b.txt", "filename"},
	} {
		r := newRig()
		ct, body := fileReply(t, c.fileName, c.partName, []byte("some text"))
		if c.field == "" {
			ct, body = fileReply(t, "", c.partName, []byte("some text"))
		}
		w := r.post(t, "/v1/reply", body, "Content-Type", ct)
		if w.Code != http.StatusBadRequest || code(t, w) != replyapi.CodeInvalidFileName || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want 400 invalid_file_name naming %s", c.name, w.Code, w.Body, c.want)
		}
		if r.st.staged != 0 || len(r.up.calls) != 0 {
			t.Errorf("%s: staged or sent", c.name)
		}
	}
	r := newRig()
	r.up.res = wfapi.SendResult{AttemptID: "sa_1", Status: vocab.AttemptSent}
	ct, body := fileReply(t, "../../etc/passwd.txt", "x.txt", []byte("some text"))
	if w := r.post(t, "/v1/reply", body, "Content-Type", ct); w.Code != http.StatusOK {
		t.Fatalf("a file_name with a path: %d %s", w.Code, w.Body)
	}
	if r.st.stagedName != "passwd.txt" || r.up.calls[0].Args[0].(wfapi.SendRequest).Media.FileName != "passwd.txt" {
		t.Fatalf("staged as %q, sent as %+v: want the last element of the path", r.st.stagedName, r.up.calls[0].Args[0])
	}
}

// fileReply is a multipart file reply with a file_name field (when not empty) and a file
// part named partName (percent-encoded when it holds a %: a header cannot carry control
// bytes). Control bytes in fileName are written as given.
func fileReply(t *testing.T, fileName, partName string, data []byte) (string, string) {
	t.Helper()
	const boundary = "b0undary"
	var b strings.Builder
	b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"type\"\r\n\r\nfile\r\n")
	if fileName != "" {
		b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file_name\"\r\n\r\n" + fileName + "\r\n")
	}
	disposition := `filename="` + partName + `"`
	if strings.Contains(partName, "%") {
		disposition = `filename*=UTF-8''` + partName // RFC 2231: the name as percent-encoded UTF-8
	}
	b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; " + disposition + "\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n" + string(data) + "\r\n--" + boundary + "--\r\n")
	return "multipart/form-data; boundary=" + boundary, b.String()
}

// imageReply is a multipart image reply of a small PNG.
func imageReply(t *testing.T, name string) (string, string) {
	t.Helper()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("type", "image")
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write(img.Bytes())
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), b.String()
}

func TestSessionRefusals(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{"/v1/reply": `{"type":"text","text":"hi"}`, "/v1/done": `{"status":"handled"}`}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{store.ErrInvalidAgentSession, http.StatusUnauthorized, replyapi.CodeInvalidSession},
		{store.ErrReplyWindowExpired, http.StatusGone, replyapi.CodeWindowExpired},
		{store.ErrReplyWindowInactive, http.StatusConflict, replyapi.CodeWindowInactive},
		{store.ErrAccountNotActive, http.StatusConflict, replyapi.CodeAccountNotActive},
		{store.ErrGenerationConflict, http.StatusConflict, replyapi.CodeGenerationConflict},
		{store.ErrUnavailable, http.StatusServiceUnavailable, replyapi.CodeStoreUnavailable},
		{errors.New("boom"), http.StatusInternalServerError, replyapi.CodeInternal},
	} {
		for _, path := range []string{"/v1/reply", "/v1/done"} {
			r := newRig()
			r.st.validate = c.err
			body := bodies[path]
			if path == "/v1/reply" && c.code == replyapi.CodeWindowExpired {
				// An expired window's reply is held unless the agent asks for the refusal
				// (holding is tested against the real store).
				body = `{"type":"text","text":"hi","hold":false}`
			}
			w := r.post(t, path, body)
			if w.Code != c.status || code(t, w) != c.code {
				t.Errorf("%s %v: %d %s, want %d %s", path, c.err, w.Code, w.Body, c.status, c.code)
			}
			if len(r.up.calls) != 0 {
				t.Errorf("%s %v: acted after a refused session", path, c.err)
			}
			if c.status == http.StatusUnauthorized && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("no challenge")
			}
		}
	}
}

func TestUpdateOutcomes(t *testing.T) {
	t.Parallel()
	refusal := func(code string) error { return temporal.NewApplicationError("refused", code) }
	retry := now.Add(90 * time.Second)
	for _, c := range []struct {
		name       string
		res        wfapi.SendResult
		err, get   error
		errCalls   int
		window     store.Window
		status     int
		code       string
		retryAfter string
	}{
		{name: "quota", get: refusal(replyapi.CodeQuotaExhausted), status: 409, code: replyapi.CodeQuotaExhausted},
		{name: "expired (validator)", err: refusal(replyapi.CodeWindowExpired), status: 410, code: replyapi.CodeWindowExpired},
		{name: "inactive (validator)", get: refusal(replyapi.CodeWindowInactive), status: 409, code: replyapi.CodeWindowInactive},
		{name: "no session yet", get: refusal(replyapi.CodeInvalidSession), status: 401, code: replyapi.CodeInvalidSession},
		{name: "invalid input", get: refusal(replyapi.CodeInvalidInput), status: 400, code: replyapi.CodeInvalidInput},
		{name: "key reused", get: refusal(replyapi.CodeAttemptConflict), status: 409, code: replyapi.CodeAttemptConflict},
		{name: "unknown type", get: refusal("surprise"), status: 500, code: replyapi.CodeInternal},
		{name: "throttled", res: wfapi.SendResult{AttemptID: "sa_2", Status: "failed", ErrorCode: "throttled", RetryAfter: retry},
			status: 429, code: replyapi.CodeThrottled, retryAfter: "90"},
		{name: "throttled without a time", res: wfapi.SendResult{AttemptID: "sa_2", Status: "failed", ErrorCode: "throttled"},
			status: 429, code: replyapi.CodeThrottled, retryAfter: "60"},
		{name: "released: window retired", res: wfapi.SendResult{AttemptID: "sa_3", Status: "failed", ErrorCode: "reply_window_inactive"},
			status: 409, code: replyapi.CodeWindowInactive},
		{name: "rejected", res: wfapi.SendResult{AttemptID: "sa_4", Status: "failed", ErrorCode: "rejected"}, status: 502, code: replyapi.CodeRejected},
		{name: "not sent", res: wfapi.SendResult{AttemptID: "sa_5", Status: "failed", ErrorCode: "not_sent"}, status: 503, code: replyapi.CodeNotSent},
		{name: "unknown", res: wfapi.SendResult{AttemptID: "sa_6", Status: "unknown", ErrorCode: "outcome_unknown"}, status: 202},
		{name: "activity failed", get: fmt.Errorf("update: %w", &temporal.ActivityError{}), status: 202},
		{name: "deadline", err: serviceerror.NewDeadlineExceeded("slow"), status: 202},
		{name: "temporal down", err: serviceerror.NewUnavailable("down"), status: 503, code: replyapi.CodeTemporalUnavailable},
		{name: "workflow gone, window expired", err: serviceerror.NewNotFound("gone"), window: store.Window{State: vocab.WindowExpired},
			status: 410, code: replyapi.CodeWindowExpired},
		{name: "workflow gone, window superseded", err: serviceerror.NewNotFound("gone"), window: store.Window{State: vocab.WindowSuperseded},
			status: 409, code: replyapi.CodeWindowInactive},
		{name: "workflow not started", err: serviceerror.NewNotFound("gone"), window: store.Window{State: vocab.WindowOpen},
			status: 503, code: replyapi.CodeWindowUnavailable},
		{name: "workflow starting as the reply comes", err: serviceerror.NewNotFound("not yet"), errCalls: 2,
			window: store.Window{State: vocab.WindowOpen, ExpiresAt: time.Now().Add(time.Hour)},
			res:    wfapi.SendResult{AttemptID: "sa_7", Status: "sent"}, status: 200},
	} {
		r := newRig()
		r.up.res, r.up.err, r.up.errCalls, r.up.get, r.st.window = c.res, c.err, c.errCalls, c.get, c.window
		w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`)
		if w.Code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.status)
			continue
		}
		if c.code != "" && code(t, w) != c.code {
			t.Errorf("%s: code %s, want %s", c.name, w.Body, c.code)
		}
		if c.status == http.StatusAccepted {
			var got replyapi.ReplyResponse
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Status != vocab.AttemptUnknown || got.RequestID == "" {
				t.Errorf("%s: %s", c.name, w.Body)
			}
		}
		if got := w.Header().Get("Retry-After"); got != c.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", c.name, got, c.retryAfter)
		}
	}
}

func TestDoneGoesThroughTheWindowsFinishUpdate(t *testing.T) {
	t.Parallel()
	r := newRig()
	w := r.post(t, "/v1/done", `{"status":"failed","reason":"could not answer"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"status":"failed"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(r.up.calls) != 1 {
		t.Fatalf("%d updates, want the window's finish Update", len(r.up.calls))
	}
	c := r.up.calls[0]
	if c.UpdateName != wfapi.UpdateFinish || c.WorkflowID != wfapi.ReplyWindowID(testInstallation, 7) ||
		c.Args[0] != (wfapi.FinishRequest{Handled: false, Reason: "could not answer"}) {
		t.Fatalf("update %+v", c)
	}
	r.up.err = temporal.NewApplicationError("message is already failed", string(vocab.CodeAttemptConflict))
	if w := r.post(t, "/v1/done", `{"status":"handled"}`); w.Code != http.StatusConflict || code(t, w) != replyapi.CodeAttemptConflict {
		t.Fatalf("conflicting verdict: %d %s", w.Code, w.Body)
	}
	r.up.err, r.up.health = nil, serviceerror.NewUnavailable("down")
	if w := r.post(t, "/v1/done", `{"status":"handled"}`); w.Code != http.StatusServiceUnavailable || len(r.up.calls) != 2 {
		t.Fatalf("Temporal down: %d %s after %d updates", w.Code, w.Body, len(r.up.calls))
	}
}

func TestWhatTheSealingKeysCannotOpenIsATyped503NotAnInternalError(t *testing.T) {
	t.Parallel()
	r := newRig()
	r.st.validate = &store.Error{Code: vocab.CodeSealedUnreadable, Msg: "open: key generation 3 missing"}
	w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`)
	if w.Code != http.StatusServiceUnavailable || code(t, w) != replyapi.CodeSealedUnreadable || len(r.up.calls) != 0 {
		t.Fatalf("%d %s after %d updates", w.Code, w.Body, len(r.up.calls))
	}
}

func TestStatusOfEveryCode(t *testing.T) {
	t.Parallel()
	for c, want := range map[string]int{
		replyapi.CodeInvalidSession: 401, replyapi.CodeWindowExpired: 410, replyapi.CodeWindowInactive: 409,
		replyapi.CodeQuotaExhausted: 409, replyapi.CodeThrottled: 429, replyapi.CodeInvalidJSON: 400,
		replyapi.CodeBodyTooLarge: 400, replyapi.CodeUnsupportedType: 400, replyapi.CodeTextTooLong: 400,
		replyapi.CodeNotFound: 404, replyapi.CodeMethodNotAllowed: 405, replyapi.CodeSealedUnreadable: 503, "anything else": 500,
	} {
		if got := replyapi.StatusOf(c); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", c, got, want)
		}
	}
}

func TestTextThatIsNotUTF8IsRefusedNotReplaced(t *testing.T) {
	for name, body := range map[string]string{
		"invalid bytes":       "{\"type\":\"text\",\"text\":\"a\xff\xfeb\"}",
		"lone high surrogate": `{"type":"text","text":"a\ud800b"}`,
		"lone low surrogate":  `{"type":"text","text":"a\udc00"}`,
		"reversed pair":       `{"type":"text","text":"\udc00\ud800"}`,
	} {
		r := newRig()
		w := r.post(t, "/v1/reply", body)
		if w.Code != http.StatusBadRequest || code(t, w) != replyapi.CodeInvalidText || len(r.up.calls) != 0 {
			t.Errorf("%s: %d %s, %d updates", name, w.Code, w.Body.String(), len(r.up.calls))
		}
	}
	r := newRig()
	r.up.res = wfapi.SendResult{AttemptID: "sa_1", Status: vocab.AttemptSent}
	if w := r.post(t, "/v1/reply", `{"type":"text","text":"smile \ud83d\ude00 and \\ud800 as text"}`); w.Code != http.StatusOK {
		t.Fatalf("a surrogate pair and an escaped backslash: %d %s", w.Code, w.Body.String())
	}
	if got := r.up.calls[0].Args[0].(wfapi.SendRequest).Text; got != "smile \U0001F600 and \\ud800 as text" {
		t.Fatalf("text sent %q", got)
	}
}

func TestAnIdempotencyKeyReusedForOtherTextIsAConflict(t *testing.T) {
	r := newRig()
	r.up.res = wfapi.SendResult{AttemptID: "sa_1", Status: vocab.AttemptSent}
	r.st.replies = map[string]store.SendOutcome{replyapi.UpdateID("k1"): {
		Attempt: store.Attempt{AttemptID: "sa_1", Status: vocab.AttemptSent, Content: vocab.Content{Type: "text", Text: "first"}}}}
	if w := r.post(t, "/v1/reply", `{"type":"text","text":"first"}`, "Idempotency-Key", "k1"); w.Code != http.StatusOK {
		t.Fatalf("the same reply again: %d %s", w.Code, w.Body.String())
	}
	w := r.post(t, "/v1/reply", `{"type":"text","text":"second"}`, "Idempotency-Key", "k1")
	if w.Code != http.StatusConflict || code(t, w) != replyapi.CodeAttemptConflict {
		t.Fatalf("another reply under the same key: %d %s, want 409 attempt_conflict", w.Code, w.Body.String())
	}
}

func TestARepeatAfterTheWindowEndedAnswersTheFirstOutcome(t *testing.T) {
	for _, refusal := range []vocab.Code{vocab.CodeReplyWindowExpired, vocab.CodeReplyWindowInactive, vocab.CodeInvalidAgentSession} {
		r := newRig()
		r.st.validate = &store.Error{Code: refusal, Msg: "window ended"}
		r.st.replies = map[string]store.SendOutcome{replyapi.UpdateID("k1"): {
			Attempt: store.Attempt{AttemptID: "sa_1", ClientMessageID: "c1", Status: vocab.AttemptSent, ProviderMessageID: "p1",
				Content: vocab.Content{Type: "text", Text: "answer"}}}}
		w := r.post(t, "/v1/reply", `{"type":"text","text":"answer"}`, "Idempotency-Key", "k1")
		var out replyapi.ReplyResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &out) != nil || out.AttemptID != "sa_1" || out.Status != vocab.AttemptSent {
			t.Errorf("%s: %d %s, want the first outcome", refusal, w.Code, w.Body.String())
		}
		// Without a key (or with one that made nothing) the refusal stands.
		if w := r.post(t, "/v1/reply", `{"type":"text","text":"answer"}`, "Idempotency-Key", "k2"); w.Code == http.StatusOK {
			t.Errorf("%s: an unknown key answered %d", refusal, w.Code)
		}
		if len(r.up.calls) != 0 {
			t.Errorf("%s: %d updates sent", refusal, len(r.up.calls))
		}
	}
}

// A reply whose pending attempt was failed by its window's retirement (a newer
// message superseded it; the attempt's error code holds the window's retired reason) was
// answered 500 internal, which an agent retries forever; it is 409 reply_window_inactive,
// on the first request and on every repeat of its key.
func TestAReplyRetiredBeforeItsTransmissionIsReplyWindowInactive(t *testing.T) {
	retired := store.Attempt{AttemptID: "sa_1", ClientMessageID: "c1", Status: vocab.AttemptFailed, FailType: vocab.FailRetired,
		ErrorCode: "superseded_by_newer_message", Content: vocab.Content{Type: "text", Text: "answer"}}
	r := newRig()
	r.st.validate = &store.Error{Code: vocab.CodeReplyWindowInactive, Msg: "window superseded"}
	r.st.replies = map[string]store.SendOutcome{replyapi.UpdateID("k1"): {Attempt: retired}}
	w := r.post(t, "/v1/reply", `{"type":"text","text":"answer"}`, "Idempotency-Key", "k1")
	if w.Code != http.StatusConflict || code(t, w) != replyapi.CodeWindowInactive {
		t.Errorf("a repeat of a retired reply: %d %s, want 409 reply_window_inactive", w.Code, w.Body.String())
	}
	if got := retired.OutcomeCode(); got != string(vocab.CodeReplyWindowInactive) {
		t.Errorf("outcome code of a retired attempt: %q", got)
	}
	expired := retired
	expired.ErrorCode = string(vocab.CodeReplyWindowExpired)
	if got := expired.OutcomeCode(); got != string(vocab.CodeReplyWindowExpired) {
		t.Errorf("outcome code of an attempt retired by its window's expiry: %q", got)
	}
	cancelled := retired
	cancelled.ErrorCode = "account paused by the operator"
	if got := cancelled.OutcomeCode(); got != string(vocab.CodeReplyWindowInactive) {
		t.Errorf("outcome code of an attempt retired by a cancellation: %q", got)
	}
	sent := store.Attempt{Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: replyapi.CodeRejected}
	if got := sent.OutcomeCode(); got != replyapi.CodeRejected {
		t.Errorf("outcome code of a rejected attempt: %q", got)
	}
}

// A repeated media reply whose first request's send is still in progress (its
// worker was killed mid-send; the send waits for its retry) was answered 500 internal; it
// is 202 with the outcome unknown, to be asked again.
func TestARepeatedMediaReplyStillInProgressIsUnknownNotInternal(t *testing.T) {
	var png8 bytes.Buffer
	if err := png.Encode(&png8, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	img := png8.Bytes()
	sum := sha256.Sum256(img)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("type", "image")
	part, err := mw.CreateFormFile("file", "a.png")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write(img)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{vocab.AttemptPending, vocab.AttemptSending} {
		r := newRig()
		r.st.replies = map[string]store.SendOutcome{replyapi.UpdateID("k1"): {Attempt: store.Attempt{AttemptID: "sa_1", ClientMessageID: "c1",
			Status: status, Content: vocab.Content{Type: "image", Media: &vocab.MediaRef{MediaID: "m1", SHA256: hex.EncodeToString(sum[:])}}}}}
		w := r.post(t, "/v1/reply", b.String(), "Content-Type", mw.FormDataContentType(), "Idempotency-Key", "k1")
		var out replyapi.ReplyResponse
		if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &out) != nil || out.AttemptID != "sa_1" || out.Status != vocab.AttemptUnknown {
			t.Errorf("%s: %d %s, want 202 unknown of sa_1", status, w.Code, w.Body.String())
		}
	}
}

func TestAnUnreachableTemporalIsAPrompt503WithNothingSent(t *testing.T) {
	r := newRig()
	r.up.health = serviceerror.NewUnavailable("connection refused")
	w := r.post(t, "/v1/reply", `{"type":"text","text":"hi"}`)
	if w.Code != http.StatusServiceUnavailable || code(t, w) != replyapi.CodeTemporalUnavailable || len(r.up.calls) != 0 {
		t.Fatalf("%d %s with %d updates, want 503 temporal_unavailable and none", w.Code, w.Body.String(), len(r.up.calls))
	}
}
