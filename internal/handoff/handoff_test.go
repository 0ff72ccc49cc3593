package handoff_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

const testSecret = "whsec-test-0123456789abcdef"

// token is a session token as the HandOff activity makes them (43 base64url characters).
const token = "tok_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xy"

func TestConfigErrors(t *testing.T) {
	secret := sealing.NewSecret(testSecret)
	cases := []struct {
		name string
		cfg  handoff.Config
		want string // "" for valid
	}{
		{"empty is none", handoff.Config{}, ""},
		{"none", handoff.Config{Kind: "none"}, ""},
		{"echo", handoff.Config{Kind: "echo"}, ""},
		{"unknown kind", handoff.Config{Kind: "carrier-pigeon"}, `kind "carrier-pigeon" is unknown`},
		{"webhook", handoff.Config{Kind: "webhook", WebhookURL: "https://agent.example/hook", WebhookSecret: secret}, ""},
		{"webhook without URL", handoff.Config{Kind: "webhook", WebhookSecret: secret}, "webhook URL is required"},
		{"webhook relative URL", handoff.Config{Kind: "webhook", WebhookURL: "/hook", WebhookSecret: secret}, "want an absolute http or https URL"},
		{"webhook ftp URL", handoff.Config{Kind: "webhook", WebhookURL: "ftp://agent.example/hook", WebhookSecret: secret}, "want an absolute http or https URL"},
		{"webhook URL with user info", handoff.Config{Kind: "webhook", WebhookURL: "https://u:p@agent.example/hook", WebhookSecret: secret}, "user info"},
		{"webhook without secret", handoff.Config{Kind: "webhook", WebhookURL: "https://agent.example/hook"}, "ILINKFLOW_WEBHOOK_SECRET"},
		{"webhook short secret", handoff.Config{Kind: "webhook", WebhookURL: "https://agent.example/hook", WebhookSecret: sealing.NewSecret("s3cr3t-short")}, "at least 16 bytes"},
		{"webhook negative timeout", handoff.Config{Kind: "webhook", WebhookURL: "https://agent.example/hook", WebhookSecret: secret, Timeout: -time.Second}, "timeout"},
		{"webhook long timeout", handoff.Config{Kind: "webhook", WebhookURL: "https://agent.example/hook", WebhookSecret: secret, Timeout: 5 * time.Minute}, "timeout"},
		{"workflow", handoff.Config{Kind: "workflow", WorkflowType: "Agent", TaskQueue: "agents"}, ""},
		{"workflow without type", handoff.Config{Kind: "workflow", TaskQueue: "agents"}, "agent workflow type is required"},
		{"workflow without queue", handoff.Config{Kind: "workflow", WorkflowType: "Agent"}, "agent task queue is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate = %v, want an error with %q", err, c.want)
			}
			if sec := c.cfg.WebhookSecret.Reveal(); err != nil && sec != "" && strings.Contains(err.Error(), sec) {
				t.Fatal("the error echoes the secret")
			}
			_, nerr := handoff.New(c.cfg, &fakeClient{}, nil)
			if (nerr == nil) != (err == nil) {
				t.Fatalf("New = %v but Validate = %v", nerr, err)
			}
		})
	}
}

func TestNewBuildsEachKind(t *testing.T) {
	h, err := handoff.New(handoff.Config{Kind: "none"}, nil, nil)
	if err != nil || h != nil {
		t.Fatalf("none: %v %v, want no handler", h, err)
	}
	if h, err := handoff.New(handoff.Config{Kind: "echo"}, nil, nil); err != nil || h == nil {
		t.Fatalf("echo: %v %v", h, err)
	}
	if h, err := handoff.New(handoff.Config{Kind: "webhook", WebhookURL: "http://127.0.0.1:1/", WebhookSecret: sealing.NewSecret(testSecret)}, nil, nil); err != nil || h == nil {
		t.Fatalf("webhook: %v %v", h, err)
	}
	if _, err := handoff.New(handoff.Config{Kind: "workflow", WorkflowType: "Agent", TaskQueue: "agents"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "Temporal client is required") {
		t.Fatalf("workflow without a client: %v", err)
	}
	if h, err := handoff.New(handoff.Config{Kind: "workflow", WorkflowType: "Agent", TaskQueue: "agents"}, &fakeClient{}, nil); err != nil || h == nil {
		t.Fatalf("workflow: %v %v", h, err)
	}
}

func delivery() handoff.Delivery {
	w := store.Window{ReplyWindowID: 42, AccountKey: "acct-1", PeerID: "peer@im.wechat", SourceMessageKey: "msg-1",
		ExpiresAt: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), MaxSends: 10, Reserved: 1, Transmitted: 2, State: vocab.WindowOpen}
	return handoff.Delivery{
		Message: store.Message{MessageKey: "msg-1", AccountKey: "acct-1", PeerID: "peer@im.wechat",
			SentAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), Status: vocab.MessageProcessing,
			Payload: &store.Payload{Summary: "hello agent", Attachments: []store.Attachment{{Kind: "voice", Text: "transcript"}}}},
		SessionID: "6f1c2e1a-0000-4000-8000-000000000001", SessionToken: sealing.NewSecret(token), Window: w,
		WindowWorkflowID: "ilink-window/0123456789ab/42", AgentWorkflowID: "ilink-agent/0123456789ab/msg-1",
	}
}

// receiver is a webhook endpoint that verifies every request and answers as told.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	bodies []webhook.Delivery
	errs   []error
	answer func(n int) (int, string)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	err := webhook.Verify([]byte(testSecret), req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, time.Now(), 0)
	var d webhook.Delivery
	if err == nil {
		err = json.Unmarshal(body, &d)
	}
	if err == nil && req.Header.Get("Content-Type") != "application/json" {
		err = errors.New("content type " + req.Header.Get("Content-Type"))
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, d)
	r.errs = append(r.errs, err)
	n := len(r.bodies)
	r.mu.Unlock()
	status, answer := r.answer(n)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func newWebhook(t *testing.T, answer func(n int) (int, string)) (*receiver, handoff.Handler) {
	t.Helper()
	r := &receiver{t: t, answer: answer}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	h, err := handoff.New(handoff.Config{Kind: "webhook", WebhookURL: srv.URL + "/hook?key=url-key-123",
		WebhookSecret: sealing.NewSecret(testSecret), Timeout: 2 * time.Second}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, h
}

func TestWebhookPostsASignedDeliveryAndReadsTheAnswer(t *testing.T) {
	r, h := newWebhook(t, func(int) (int, string) {
		return http.StatusOK, `{"replies": ["first", " ", "second"], "handled": true, "extra": 1}`
	})
	ans, err := h.Deliver(context.Background(), delivery())
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Replies) != 2 || ans.Replies[0] != "first" || ans.Replies[1] != "second" || !ans.Handled {
		t.Fatalf("answer %+v", ans)
	}
	if len(r.errs) != 1 || r.errs[0] != nil {
		t.Fatalf("receiver: %v", r.errs)
	}
	got := r.bodies[0]
	want := webhook.Delivery{
		Message: webhook.Message{MessageKey: "msg-1", AccountKey: "acct-1", PeerID: "peer@im.wechat",
			SentAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), Summary: "hello agent",
			Attachments: []webhook.Attachment{{Kind: "voice", Text: "transcript"}}},
		SessionToken: token, SessionID: "6f1c2e1a-0000-4000-8000-000000000001",
		Window: webhook.Window{ReplyWindowID: 42, ExpiresAt: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), SendsLeft: 7},
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("delivery\n got %s\nwant %s", gj, wj)
	}
}

func TestWebhookBodyShape(t *testing.T) {
	d := delivery()
	d.Message.Payload = &store.Payload{Summary: "no attachments"}
	raw, err := handoff.Body(d)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	_ = json.Unmarshal(raw, &m) // the string fields fail to decode into maps; the objects do
	for _, k := range []string{"message", "session_token", "session_id", "window"} {
		if _, ok := top[k]; !ok {
			t.Fatalf("body has no %q: %s", k, raw)
		}
	}
	for _, k := range []string{"message_key", "peer_id", "sent_at", "summary", "attachments"} {
		if _, ok := m["message"][k]; !ok {
			t.Fatalf("message has no %q: %s", k, raw)
		}
	}
	for _, k := range []string{"reply_window_id", "expires_at", "sends_left"} {
		if _, ok := m["window"][k]; !ok {
			t.Fatalf("window has no %q: %s", k, raw)
		}
	}
	if !strings.Contains(string(raw), `"attachments":[]`) {
		t.Fatalf("attachments must be an empty list, not null: %s", raw)
	}
}

func TestWebhookAnswers(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		permanent bool
		err       bool
		replies   int
		handled   bool
	}{
		{"204 without body", http.StatusNoContent, "", false, false, 0, false},
		{"200 empty body", http.StatusOK, "  \n", false, false, 0, false},
		{"202 handled without replies", http.StatusAccepted, `{"handled":true}`, false, false, 0, true},
		{"200 not the answer JSON", http.StatusOK, "<html>ok</html>", true, true, 0, false},
		{"500 is retried", http.StatusInternalServerError, "boom", false, true, 0, false},
		{"503 is retried", http.StatusServiceUnavailable, "", false, true, 0, false},
		{"408 is retried", http.StatusRequestTimeout, "", false, true, 0, false},
		{"429 is retried", http.StatusTooManyRequests, "", false, true, 0, false},
		{"400 is permanent", http.StatusBadRequest, "bad delivery", true, true, 0, false},
		{"404 is permanent", http.StatusNotFound, "", true, true, 0, false},
		{"410 is permanent", http.StatusGone, "", true, true, 0, false},
		{"302 is permanent", http.StatusFound, "", true, true, 0, false},
		// An answer is never judged by its first 256 KiB: padding does not make it empty.
		{"200 padded past the cap is refused", http.StatusOK, strings.Repeat(" ", 300<<10) + `{"handled":true}`, true, true, 0, false},
		{"200 padded within the cap is parsed", http.StatusOK, strings.Repeat(" \n", 1000) + `{"handled":true}`, false, false, 0, true},
		// Text the JSON decoder would turn into U+FFFD is refused, never sent altered.
		{"200 with invalid UTF-8 is refused", http.StatusOK, "{\"replies\":[\"ok \xff\xfe\"]}", true, true, 0, false},
		{"200 with a lone surrogate is refused", http.StatusOK, `{"replies":["ok \ud800"]}`, true, true, 0, false},
		{"200 with a surrogate pair is parsed", http.StatusOK, `{"replies":["ok \ud83d\ude00"]}`, false, false, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, h := newWebhook(t, func(int) (int, string) { return c.status, c.body })
			ans, err := h.Deliver(context.Background(), delivery())
			var perm *handoff.PermanentError
			switch {
			case c.err != (err != nil):
				t.Fatalf("err = %v, want error %v", err, c.err)
			case errors.As(err, &perm) != c.permanent:
				t.Fatalf("err = %v (%T), want permanent %v", err, err, c.permanent)
			case err == nil && (len(ans.Replies) != c.replies || ans.Handled != c.handled):
				t.Fatalf("answer %+v", ans)
			}
			if err != nil {
				if !strings.Contains(err.Error(), strconv.Itoa(c.status)) {
					t.Fatalf("error %q does not name the status", err)
				}
				if strings.Contains(err.Error(), "url-key-123") {
					t.Fatalf("error %q shows the URL's query", err)
				}
			}
		})
	}
}

func TestWebhookErrorsNeverShowTheWebhookSecret(t *testing.T) {
	// A receiver that echoes the secret it was configured with.
	for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		_, h := newWebhook(t, func(int) (int, string) { return status, "bad signature, expected secret " + testSecret })
		_, err := h.Deliver(context.Background(), delivery())
		if err == nil || strings.Contains(err.Error(), testSecret) || !strings.Contains(err.Error(), sealing.Redacted) {
			t.Fatalf("%d: %v", status, err)
		}
		var perm *handoff.PermanentError
		if errors.As(err, &perm) && strings.Contains(perm.Reason, testSecret) {
			t.Fatalf("%d: the stored reason shows the webhook secret: %q", status, perm.Reason)
		}
	}
}

func TestWebhookErrorsNeverShowTheSessionToken(t *testing.T) {
	// A receiver that echoes the request in its refusal.
	var last string
	_, h := newWebhook(t, func(int) (int, string) { return http.StatusUnprocessableEntity, "rejected: " + last })
	_, h2 := newWebhook(t, func(int) (int, string) { return http.StatusBadGateway, "upstream said " + token })
	d := delivery()
	raw, _ := handoff.Body(d)
	last = string(raw)
	_, err := h.Deliver(context.Background(), d)
	var perm *handoff.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("422: %v, want a permanent error", err)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(perm.Reason, token) {
		t.Fatalf("the permanent error shows the session token: %q", err)
	}
	if !strings.Contains(perm.Reason, "422") || !strings.Contains(perm.Reason, "rejected") || len(perm.Reason) > 300 {
		t.Fatalf("reason %q: want the status and the start of the answer", perm.Reason)
	}
	_, err = h2.Deliver(context.Background(), d)
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), sealing.Redacted) {
		t.Fatalf("502: %v", err)
	}
}

func TestWebhookTimeoutAndNetworkErrorsAreRetryable(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	h, err := handoff.NewWebhook(slow.URL, sealing.NewSecret(testSecret), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Deliver(context.Background(), delivery())
	var perm *handoff.PermanentError
	if err == nil || errors.As(err, &perm) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow receiver: %v, want a retryable timeout", err)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	addr := gone.URL
	gone.Close()
	h, err = handoff.NewWebhook(addr+"/hook?key=url-key-123", sealing.NewSecret(testSecret), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Deliver(context.Background(), delivery())
	if err == nil || errors.As(err, &perm) || strings.Contains(err.Error(), "url-key-123") {
		t.Fatalf("closed receiver: %v, want a retryable error without the URL's query", err)
	}
}

func TestEchoAnswersTheSummaryAndHandlesTheMessage(t *testing.T) {
	h, _ := handoff.New(handoff.Config{Kind: "echo"}, nil, nil)
	ans, err := h.Deliver(context.Background(), delivery())
	if err != nil || len(ans.Replies) != 1 || ans.Replies[0] != "echo: hello agent" || !ans.Handled {
		t.Fatalf("echo: %+v %v", ans, err)
	}
	d := delivery()
	d.Message.Payload.Summary = strings.Repeat("é", 10000) // 20000 bytes
	ans, _ = h.Deliver(context.Background(), d)
	if n := len(ans.Replies[0]); n > 16*1024 || !strings.HasPrefix(ans.Replies[0], "echo: é") || !utf8.ValidString(ans.Replies[0]) {
		t.Fatalf("long echo of %d bytes", n)
	}
	// The cut is never silent: the echo ends by saying so, with the message's size.
	if !strings.HasSuffix(ans.Replies[0], "[cut: your message is 20000 bytes; one iLink message carries at most 16384]") {
		t.Fatalf("long echo does not say it was cut: ...%q", ans.Replies[0][len(ans.Replies[0])-100:])
	}
}

// fakeClient records ExecuteWorkflow.
type fakeClient struct {
	client.Client
	opts     client.StartWorkflowOptions
	workflow any
	args     []any
	err      error
}

func (f *fakeClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.opts, f.workflow, f.args = o, wf, args
	return nil, f.err
}

func TestWorkflowHandlerStartsTheAgentWorkflowWithoutTheToken(t *testing.T) {
	fc := &fakeClient{}
	h, err := handoff.New(handoff.Config{Kind: "workflow", WorkflowType: "EchoAgent", TaskQueue: "agents"}, fc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := h.Deliver(context.Background(), delivery())
	if err != nil || len(ans.Replies) != 0 || ans.Handled {
		t.Fatalf("deliver: %+v %v", ans, err)
	}
	if fc.opts.ID != "ilink-agent/0123456789ab/msg-1" || fc.opts.TaskQueue != "agents" || fc.workflow != "EchoAgent" ||
		fc.opts.WorkflowIDReusePolicy.String() != "RejectDuplicate" || fc.opts.WorkflowIDConflictPolicy.String() != "UseExisting" {
		t.Fatalf("start options %+v %v", fc.opts, fc.workflow)
	}
	if len(fc.args) != 1 {
		t.Fatalf("args %v", fc.args)
	}
	in, ok := fc.args[0].(wfapi.AgentInput)
	if !ok || in.MessageKey != "msg-1" || in.ReplyWindowID != 42 || in.WindowWorkflowID != "ilink-window/0123456789ab/42" || in.SessionID != "6f1c2e1a-0000-4000-8000-000000000001" ||
		in.Summary != "hello agent" || in.SendsLeft != 7 || len(in.Attachments) != 1 || in.Attachments[0].Text != "transcript" {
		t.Fatalf("input %+v", fc.args[0])
	}
	raw, _ := json.Marshal(in)
	if strings.Contains(string(raw), token) {
		t.Fatal("the agent workflow's input holds the session token")
	}

	// A delivery that names no agent workflow or no window workflow (not made by the
	// HandOff activity) starts nothing.
	var perm *handoff.PermanentError
	for _, drop := range []func(*handoff.Delivery){
		func(d *handoff.Delivery) { d.AgentWorkflowID = "" },
		func(d *handoff.Delivery) { d.WindowWorkflowID = "" },
	} {
		fc.opts = client.StartWorkflowOptions{}
		d := delivery()
		drop(&d)
		if _, err := h.Deliver(context.Background(), d); !errors.As(err, &perm) || perm.Code != handoff.CodeDeliveryInvalid || fc.opts.ID != "" {
			t.Fatalf("delivery without a workflow id: %v, started %q", err, fc.opts.ID)
		}
	}

	fc.err = serviceerror.NewWorkflowExecutionAlreadyStarted("closed", "", "run-1")
	_, err = h.Deliver(context.Background(), delivery())
	if !errors.As(err, &perm) || !strings.Contains(perm.Reason, "already closed") {
		t.Fatalf("closed agent workflow: %v, want a permanent error", err)
	}
	fc.err = serviceerror.NewUnavailable("frontend down")
	_, err = h.Deliver(context.Background(), delivery())
	if err == nil || errors.As(err, &perm) {
		t.Fatalf("unavailable: %v, want a retryable error", err)
	}
}

// hostileName is a file name as a user's client may send it: path parts, markup, a bidi
// override and a control character.
const hostileName = "../../etc/<script>alert(1)</script>\u202egpj.\x07exe.pdf"

// withFile is delivery() with a file attachment named name, named in the summary too as
// the poll writes it.
func withFile(name string) handoff.Delivery {
	d := delivery()
	d.Message.Payload = &store.Payload{Summary: "see this\n[file " + name + "]",
		Attachments: []store.Attachment{{Kind: "file", Position: vocab.MediaPositionBase, Name: name, Size: 12}}}
	return d
}

// assertShownName checks a file name as a handler shows it: vocab.SafeFileName of the
// stored one, without path parts, markup or invisible characters.
func assertShownName(t *testing.T, where, got string) {
	t.Helper()
	if got != vocab.SafeFileName(hostileName) || strings.ContainsAny(got, "/\\<>\u202e\x07") || got == "" {
		t.Fatalf("%s shows the file name %q, want %q", where, got, vocab.SafeFileName(hostileName))
	}
}

func TestWebhookDeliveryShowsFileNamesWithoutPathParts(t *testing.T) {
	r, h := newWebhook(t, func(int) (int, string) { return http.StatusNoContent, "" })
	d := withFile(hostileName)
	if _, err := h.Deliver(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if len(r.errs) != 1 || r.errs[0] != nil {
		t.Fatalf("receiver: %v", r.errs)
	}
	got := r.bodies[0].Message
	if len(got.Attachments) != 1 || got.Attachments[0].FetchPath == "" {
		t.Fatalf("attachments %+v", got.Attachments)
	}
	assertShownName(t, "the delivery's attachment", got.Attachments[0].Name)
	if want := "see this\n[file " + vocab.SafeFileName(hostileName) + "]"; got.Summary != want {
		t.Fatalf("summary %q, want %q", got.Summary, want)
	}
	if d.Message.Payload.Attachments[0].Name != hostileName {
		t.Fatal("the stored name was changed: it stays as the user's client sent it")
	}
}

func TestWorkflowHandOffShowsFileNamesWithoutPathParts(t *testing.T) {
	in := handoff.AgentInput(withFile(hostileName))
	if len(in.Attachments) != 1 {
		t.Fatalf("attachments %+v", in.Attachments)
	}
	assertShownName(t, "the agent workflow's input", in.Attachments[0].Name)
	if strings.Contains(in.Summary, "../") || !strings.Contains(in.Summary, vocab.SafeFileName(hostileName)) {
		t.Fatalf("summary %q", in.Summary)
	}
}

func TestEchoShowsFileNamesWithoutPathParts(t *testing.T) {
	ans, err := handoff.Echo{}.Deliver(context.Background(), withFile(hostileName))
	if err != nil || len(ans.Replies) != 1 {
		t.Fatalf("echo: %+v %v", ans, err)
	}
	if want := "echo: see this\n[file " + vocab.SafeFileName(hostileName) + "]"; ans.Replies[0] != want {
		t.Fatalf("echo %q, want %q", ans.Replies[0], want)
	}
}

// Inbound text is stored as it came, U+0000 included; the echo of such a text must still
// be sendable: each NUL is shown as '␀' and the echo stays within the limit.
func TestEchoOfATextWithNULIsSendableWithAVisibleMarker(t *testing.T) {
	d := delivery()
	d.Message.Payload.Summary = "a\x00b\x00"
	ans, err := handoff.Echo{}.Deliver(context.Background(), d)
	if err != nil || len(ans.Replies) != 1 || ans.Replies[0] != "echo: a\u2400b\u2400" || !ans.Handled {
		t.Fatalf("echo: %+v %v", ans, err)
	}
	// A text of NULs only, longer than the limit once each is the 3-byte marker.
	d.Message.Payload.Summary = strings.Repeat("\x00", vocab.MaxTextBytes/2)
	ans, _ = handoff.Echo{}.Deliver(context.Background(), d)
	if fault := vocab.CheckText(ans.Replies[0], vocab.MaxTextBytes); fault != vocab.TextOK {
		t.Fatalf("echo of %d NULs is not sendable: %s", vocab.MaxTextBytes/2, fault)
	}
	if !strings.HasPrefix(ans.Replies[0], "echo: \u2400\u2400") || !strings.Contains(ans.Replies[0], "[cut: your message is 8192 bytes") {
		t.Fatalf("echo of NULs: %q…", ans.Replies[0][:40])
	}
}

// A webhook answer whose object holds one member twice is refused, as the reply API
// refuses such a body: the decoder would keep the last one without a word.
func TestWebhookAnswerWithADuplicateKeyIsRefused(t *testing.T) {
	for _, body := range []string{
		`{"replies":["a"],"replies":["b"]}`,
		`{"handled":false,"Handled":true}`,
		`{"replies":["a"],"handled":true,"extra":{"x":1,"x":2}}`,
		`{"repl\u0069es":["a"],"replies":["b"]}`,
	} {
		_, h := newWebhook(t, func(int) (int, string) { return http.StatusOK, body })
		ans, err := h.Deliver(context.Background(), delivery())
		var perm *handoff.PermanentError
		if !errors.As(err, &perm) || perm.Code != handoff.CodeAnswerInvalid || !strings.Contains(perm.Reason, "twice") {
			t.Fatalf("%s: %+v %v, want a permanent %s", body, ans, err, handoff.CodeAnswerInvalid)
		}
	}
}

// A reply of a webhook answer that breaks the rule for outbound text refuses the whole
// answer with a typed error (nothing is sent, the message fails with the reason), never
// accepted and then lost downstream. Blank replies are still skipped.
func TestWebhookAnswerWithAnUnsendableReplyIsRefusedWithItsFault(t *testing.T) {
	long := strings.Repeat("a", vocab.MaxTextBytes+1)
	for _, c := range []struct {
		body  string
		fault vocab.TextFault
	}{
		{`{"replies":["fine","bad \u0000 nul"],"handled":true}`, vocab.TextNUL},
		{`{"replies":["` + long + `"]}`, vocab.TextTooLong},
	} {
		_, h := newWebhook(t, func(int) (int, string) { return http.StatusOK, c.body })
		ans, err := h.Deliver(context.Background(), delivery())
		var perm *handoff.PermanentError
		if !errors.As(err, &perm) || perm.Code != handoff.CodeReplyRefused || perm.Fault != c.fault {
			t.Fatalf("%.40s: %+v %v, want a permanent %s (%s)", c.body, ans, err, handoff.CodeReplyRefused, c.fault)
		}
		if strings.Contains(perm.Reason, "nul") || strings.Contains(perm.Reason, "fine") || strings.Contains(perm.Reason, "aaaa") ||
			!strings.Contains(perm.Reason, "200") || !strings.Contains(perm.Reason, "none was sent") {
			t.Fatalf("reason %q: want the status and the fault, never the reply's text", perm.Reason)
		}
	}
	_, h := newWebhook(t, func(int) (int, string) { return http.StatusOK, `{"replies":["  ","\n","sent"],"handled":true}` })
	if ans, err := h.Deliver(context.Background(), delivery()); err != nil || len(ans.Replies) != 1 || ans.Replies[0] != "sent" {
		t.Fatalf("blank replies: %+v %v, want them skipped", ans, err)
	}
}
