// Package replyapi is the agents' HTTP reply endpoint (design.md §5): an agent that was
// handed a message replies with the session token it received, as
// `Authorization: Bearer <token>`, and the gateway executes the window's `send` Update
// (a reply) or its `finish` Update (a verdict: the one door agent.Finish uses too).
//
//	POST /v1/reply  {"type":"text","text":"..."}       → the attempt and its outcome
//	POST /v1/done   {"status":"handled"|"failed","reason":"..."} → the message's verdict
//
// Every refusal answers a stable JSON body {"error":{"code":...,"message":...}} whose
// code is one of the Code* constants, with the HTTP status of [StatusOf].
//
// A request is checked in this order, and nothing is read past a refusal: the form of
// the token, the headers (idempotency key, content type, a declared body size over the
// cap), then the session (store.ValidateSession, a read: an unauthenticated body is
// never read), then the body (a bad body is refused before anything is written or sent
// to Temporal: the outbound text rule is vocab.CheckText, file names vocab.CheckFileName,
// and JSON must be strict: valid UTF-8, no unpaired surrogate escape, no member named
// twice, no unknown member). A refusal by the window (expired, inactive, quota) writes
// nothing either: the window's Update validator refuses before anything is recorded.
//
// Every store call made for a request is bounded by Config.StoreTimeout and every check
// that Temporal answers by DefaultHealthTimeout, so that a database or a Temporal that
// hangs is a prompt 503 (store_unavailable, temporal_unavailable); only the wait for a
// send's outcome is longer (Config.ReplyTimeout, then 202 unknown).
//
// The session token is never logged, put in an error or sent to Temporal.
package replyapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Defaults of [Config].
const (
	DefaultMaxBodyBytes  = 64 << 10
	DefaultMaxTextBytes  = vocab.MaxTextBytes
	DefaultReplyTimeout  = time.Minute
	DefaultThrottleRetry = time.Minute
	// DefaultStoreTimeout bounds each store call made for a request.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultMaxUploads bounds the media replies whose bytes are read and staged at once.
	DefaultMaxUploads = 4
	// DefaultUploadWait bounds the wait of a media reply for an upload slot.
	DefaultUploadWait = 5 * time.Second
	// MaxIdempotencyKey bounds the Idempotency-Key header (visible ASCII).
	MaxIdempotencyKey = 200
)

// Error codes of the API (the "code" of an error body). The store's and the window's
// codes keep their names (invalid_agent_session, reply_window_expired, ...).
const (
	CodeInvalidJSON           = "invalid_json"
	CodeBodyTooLarge          = "body_too_large"
	CodeUnsupportedType       = "unsupported_type"
	CodeInvalidText           = "invalid_text"
	CodeTextTooLong           = "text_too_long"
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	CodeInvalidStatus         = "invalid_status"
	CodeInvalidReason         = "invalid_reason"
	CodeInvalidFileName       = "invalid_file_name"
	CodeUploadsBusy           = "uploads_busy"
	CodeInvalidInput          = string(vocab.CodeInvalidInput)
	CodeInvalidSession        = string(vocab.CodeInvalidAgentSession)
	CodeWindowExpired         = string(vocab.CodeReplyWindowExpired)
	CodeWindowInactive        = string(vocab.CodeReplyWindowInactive)
	CodeQuotaExhausted        = string(vocab.CodeReplyQuotaExhausted)
	CodeAccountNotActive      = string(vocab.CodeAccountNotActive)
	CodeGenerationConflict    = string(vocab.CodeGenerationConflict)
	CodeAttemptConflict       = string(vocab.CodeAttemptConflict)
	CodeSendInProgress        = string(vocab.CodeSendInProgress)
	CodeThrottled             = vocab.SendThrottled
	CodeRejected              = vocab.SendRejected
	CodeStaleToken            = vocab.SendStaleToken
	CodeNotSent               = vocab.SendNotSent
	CodeWindowUnavailable     = "window_unavailable"
	CodeTemporalUnavailable   = "temporal_unavailable"
	CodeStoreUnavailable      = string(vocab.CodeUnavailable)
	CodeSealedUnreadable      = string(vocab.CodeSealedUnreadable)
	CodeSlotsReserved         = string(vocab.CodeReplySlotsReserved)
	CodeHeldLimitReached      = string(vocab.CodeHeldLimitReached)
	CodeNotHoldable           = string(vocab.CodeReplyNotHoldable)
	CodeAccountNotFound       = string(vocab.CodeAccountNotFound)
	CodeInternal              = string(vocab.CodeInternal)
	CodeNotFound              = "not_found"
	CodeMethodNotAllowed      = "method_not_allowed"
)

// StatusOf is the HTTP status of an error code. A window retired by a newer message
// (reply_window_inactive: superseded or cancelled) is 409 Conflict — the conversation
// moved on and the agent should answer the newer message — while an expired window is
// 410 Gone, so an agent can tell the two apart by status alone.
func StatusOf(code string) int {
	switch code {
	case CodeInvalidJSON, CodeBodyTooLarge, CodeUnsupportedType, CodeInvalidText, CodeTextTooLong,
		CodeInvalidIdempotencyKey, CodeInvalidStatus, CodeInvalidReason, CodeInvalidInput, CodeInvalidFileName:
		return http.StatusBadRequest
	case CodeInvalidSession:
		return http.StatusUnauthorized
	case CodeWindowExpired:
		return http.StatusGone
	case CodeWindowInactive, CodeQuotaExhausted, CodeAccountNotActive, CodeGenerationConflict,
		CodeAttemptConflict, CodeSendInProgress, CodeSlotsReserved, CodeHeldLimitReached, CodeNotHoldable:
		return http.StatusConflict
	case CodeAccountNotFound:
		return http.StatusGone
	case CodeThrottled:
		return http.StatusTooManyRequests
	case CodeRejected, CodeStaleToken:
		return http.StatusBadGateway
	case CodeNotSent, CodeWindowUnavailable, CodeTemporalUnavailable, CodeStoreUnavailable, CodeUploadsBusy, CodeSealedUnreadable:
		return http.StatusServiceUnavailable
	case CodeNotFound:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	if status, ok := mediaStatus(code); ok {
		return status
	}
	return http.StatusInternalServerError
}

// Store is what the API reads (a *store.Store); every write goes through the window's
// Updates.
type Store interface {
	ValidateSession(ctx context.Context, now time.Time, ref store.SessionRef) (store.Session, error)
	GetWindow(ctx context.Context, windowID int64) (store.Window, error)
	FindReply(ctx context.Context, ref store.SessionRef, requestID string) (store.SendOutcome, bool, error)
	// WindowWorkflowID is the workflow id of a window's ReplyWindow workflow.
	WindowWorkflowID(ctx context.Context, windowID int64) (string, error)
	// GetAttachment resolves an attachment of a session's message (a read).
	GetAttachment(ctx context.Context, now time.Time, ref store.SessionRef, messageKey string, index int) (store.AttachmentLocator, error)
	// StageMedia stages a media reply's bytes (sealed) under a valid session.
	StageMedia(ctx context.Context, now time.Time, in store.StageMediaInput) (store.StagedMedia, error)
	// HoldReply holds a reply its expired window cannot carry; FindHeldReply finds the
	// reply a session's request held.
	HoldReply(ctx context.Context, now time.Time, in store.HoldInput) (store.HeldReply, error)
	FindHeldReply(ctx context.Context, ref store.SessionRef, requestID string) (store.HeldReply, bool, error)
	// RequestReminder records an agent's ask for its window's reminder.
	RequestReminder(ctx context.Context, now time.Time, ref store.SessionRef) (store.Window, time.Time, error)
}

// Updater executes Updates and answers health checks (a Temporal client.Client).
type Updater interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
	CheckHealth(ctx context.Context, request *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
}

// DefaultHealthTimeout bounds the check that Temporal answers before a reply's Update is
// sent: an unreachable Temporal is a prompt 503 temporal_unavailable, with nothing sent.
const DefaultHealthTimeout = 5 * time.Second

// Config configures the API.
type Config struct {
	Store    Store
	Temporal Updater
	// Metrics counts requests by route and answer code (nil: none).
	Metrics *metrics.Product
	Logger  *slog.Logger
	// MaxBodyBytes caps a request body (default 64 KiB); MaxTextBytes a text (16 KiB).
	MaxBodyBytes int64
	MaxTextBytes int
	// ReplyTimeout bounds waiting for a send's outcome (default 1m); past it the answer is
	// 202 with status unknown (repeat the request with the same Idempotency-Key).
	ReplyTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Media fetches inbound attachments (nil: GET .../attachments answers 503).
	Media Media
	// Typing shows and cancels "typing" (nil: POST /v1/typing answers 503).
	Typing Typing
	// MaxMediaBytes caps a media reply's file (default DefaultMaxMediaBytes); the store's
	// Limits.MaxMediaBytes must allow it.
	MaxMediaBytes int64
	// StoreTimeout bounds each store call made for a request (default
	// DefaultStoreTimeout): past it the answer is 503 store_unavailable, also when the
	// database accepts connections but never answers.
	StoreTimeout time.Duration
	// MaxUploads bounds the media replies whose bytes are read and staged at once
	// (default DefaultMaxUploads): each holds up to a few times MaxMediaBytes in memory
	// meanwhile. A media reply that finds no slot within UploadWait (default
	// DefaultUploadWait) is 503 uploads_busy.
	MaxUploads int
	UploadWait time.Duration
}

// ReplyRequest is the body of POST /v1/reply. Type is "text" today; media types will
// carry Media.
type ReplyRequest struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	Media json.RawMessage `json:"media,omitempty"`
	// Final marks the agent's final answer: it may use the sends the window keeps for
	// it (the last FinalSlots); any other reply stops short of them.
	Final bool `json:"final,omitempty"`
	// Hold false asks for the refusal (409 or 410) instead of holding a reply the window
	// cannot carry; absent or true, such a reply is held (202, status held).
	Hold *bool `json:"hold,omitempty"`
}

// holds reports whether a reply the window cannot carry is to be held.
func (r ReplyRequest) holds() bool { return r.Hold == nil || *r.Hold }

// ReplyResponse is the answer of POST /v1/reply (200 sent, 202 unknown), and the
// "attempt" of an error body when a send was attempted.
type ReplyResponse struct {
	AttemptID         string `json:"attempt_id"`
	ClientMessageID   string `json:"client_message_id"`
	Status            string `json:"status"`
	ProviderMessageID string `json:"provider_message_id"`
	SendsLeft         int32  `json:"sends_left"`
	// RequestID is the request's idempotency key: the Idempotency-Key header, or one the
	// gateway made up. Repeating the request with it as Idempotency-Key is safe.
	RequestID string `json:"request_id"`
	// HeldID, Position and Reason describe a held reply (status held): its id, its place
	// among the conversation's replies still to send (1: the next) and why the window
	// could not carry it (reply_quota_exhausted, reply_slots_reserved,
	// reply_window_expired).
	HeldID   string `json:"held_id,omitempty"`
	Position int32  `json:"position,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// DoneRequest is the body of POST /v1/done.
type DoneRequest struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// DoneResponse is the answer of POST /v1/done.
type DoneResponse struct {
	Status string `json:"status"`
}

// ErrorBody is the body of every refusal.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a refusal's code and message, with the attempt when one was made and
// the seconds to wait for a throttled one.
type ErrorDetail struct {
	Code              string         `json:"code"`
	Message           string         `json:"message"`
	RetryAfterSeconds int64          `json:"retry_after_seconds,omitempty"`
	Attempt           *ReplyResponse `json:"attempt,omitempty"`
}

// API serves the reply endpoints.
type API struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	// uploads holds one value per media reply reading or staging its bytes.
	uploads chan struct{}
}

// New returns the API's handler for /v1/reply and /v1/done.
func New(cfg Config) *API {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxTextBytes <= 0 {
		cfg.MaxTextBytes = DefaultMaxTextBytes
	}
	if cfg.ReplyTimeout <= 0 {
		cfg.ReplyTimeout = DefaultReplyTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.MaxUploads <= 0 {
		cfg.MaxUploads = DefaultMaxUploads
	}
	if cfg.UploadWait <= 0 {
		cfg.UploadWait = DefaultUploadWait
	}
	a := &API{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), uploads: make(chan struct{}, cfg.MaxUploads)}
	if a.log == nil {
		a.log = slog.Default()
	}
	replyJSON := a.post("reply", a.reply)
	replyMultipart := a.post("reply", a.replyMedia)
	a.mux.HandleFunc("/v1/reply", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && isMultipart(r) {
			replyMultipart(w, r)
			return
		}
		replyJSON(w, r)
	})
	a.mux.HandleFunc("/v1/messages/", a.attachment)
	a.mux.HandleFunc("/v1/typing", a.post("typing", a.typing))
	a.mux.HandleFunc("/v1/done", a.post("done", a.done))
	a.mux.HandleFunc("/v1/remind", a.post("remind", a.remind))
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.refuse(w, "unknown", &apiError{code: CodeNotFound, msg: "no such endpoint"})
	})
	return a
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// apiError is a refusal on its way to the client.
type apiError struct {
	code       string
	msg        string
	retryAfter time.Duration
	attempt    *ReplyResponse
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// handler serves one route once the request carries a bearer token (of any value: the
// handler checks it against the store before it reads the body).
type handler func(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError)

// post serves a POST route: a request without a bearer token is refused before anything
// else; the handler checks the token against the store before it reads the body.
func (a *API) post(route string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			a.refuse(w, route, &apiError{code: CodeMethodNotAllowed, msg: "use POST"})
			return
		}
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			a.refuse(w, route, &apiError{code: CodeInvalidSession, msg: "an agent session token is required as Authorization: Bearer <token>"})
			return
		}
		status, out, aerr := h(w, r, token)
		if aerr != nil {
			a.refuse(w, route, aerr)
			return
		}
		code := "ok"
		if rr, ok := out.(ReplyResponse); ok && rr.Status == vocab.AttemptUnknown {
			code = "unknown"
		}
		a.cfg.Metrics.ReplyRequest(route, code)
		writeJSON(w, status, out)
	}
}

// declaredSize refuses a request whose Content-Length is over limit before its body is
// read (a body without one is cut at the limit as it is read).
func declaredSize(r *http.Request, limit int64, code, what string) *apiError {
	if r.ContentLength > limit {
		return &apiError{code: code, msg: fmt.Sprintf("%s exceeds %d bytes", what, limit)}
	}
	return nil
}

// readBody reads a JSON request body of at most MaxBodyBytes.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{code: CodeBodyTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", a.cfg.MaxBodyBytes)}
		}
		return nil, &apiError{code: CodeInvalidJSON, msg: "request body could not be read"}
	}
	return body, nil
}

// refuse writes a refusal.
func (a *API) refuse(w http.ResponseWriter, route string, e *apiError) {
	status := StatusOf(e.code)
	body := ErrorBody{Error: ErrorDetail{Code: e.code, Message: e.msg, Attempt: e.attempt}}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	case http.StatusTooManyRequests:
		secs := int64(math.Ceil(e.retryAfter.Seconds()))
		if secs < 1 {
			secs = 1
		}
		body.Error.RetryAfterSeconds = secs
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	a.cfg.Metrics.ReplyRequest(route, e.code)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(h string) (sealing.Secret, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return sealing.Secret{}, false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > 512 {
		return sealing.Secret{}, false
	}
	return sealing.NewSecret(tok), true
}

// decode decodes exactly one JSON object with no unknown field and no member named twice
// (at any depth). The body must have passed jsontext.Valid.
func decode(body []byte, v any) *apiError {
	if name, dup := jsontext.DuplicateKey(body); dup {
		return &apiError{code: CodeInvalidJSON, msg: fmt.Sprintf("request body names the member %q twice", clip(name, 32))}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiError{code: CodeInvalidJSON, msg: "request body is not the expected JSON object: " + jsonProblem(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &apiError{code: CodeInvalidJSON, msg: "request body has data after the JSON object"}
	}
	return nil
}

// jsonProblem describes a decoding error without echoing the body.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type", typ.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "body is empty or truncated"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "malformed"
}

// idempotencyKey reads the Idempotency-Key header: 1..200 visible ASCII characters.
func idempotencyKey(r *http.Request) (string, *apiError) {
	vs := r.Header.Values("Idempotency-Key")
	if len(vs) == 0 {
		return "", nil
	}
	k := strings.TrimSpace(vs[0])
	if len(vs) > 1 || k == "" || len(k) > MaxIdempotencyKey {
		return "", &apiError{code: CodeInvalidIdempotencyKey, msg: fmt.Sprintf("Idempotency-Key must be one value of 1..%d visible ASCII characters", MaxIdempotencyKey)}
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", &apiError{code: CodeInvalidIdempotencyKey, msg: fmt.Sprintf("Idempotency-Key must be one value of 1..%d visible ASCII characters", MaxIdempotencyKey)}
		}
	}
	return k, nil
}

// UpdateID is the id of the send Update (and the store's request id) for an idempotency
// key: a repeated key finds the first request's Update and attempt.
func UpdateID(key string) string { return "reply-api/" + key }

// parseReply reads the JSON body of a text reply: strict JSON (jsontext.Valid, no member
// named twice, no unknown member), type "text", and a text that passes vocab.CheckText
// against maxText bytes. It reads nothing else.
func parseReply(body []byte, maxText int) (ReplyRequest, *apiError) {
	if !jsontext.Valid(body) {
		// encoding/json would turn invalid UTF-8 and lone surrogate escapes into U+FFFD.
		return ReplyRequest{}, &apiError{code: CodeInvalidText, msg: "request body is not valid UTF-8 (or has an unpaired surrogate escape)"}
	}
	var req ReplyRequest
	if err := decode(body, &req); err != nil {
		return ReplyRequest{}, err
	}
	switch {
	case req.Type == "image" || req.Type == "file" || req.Type == "video":
		return ReplyRequest{}, &apiError{code: CodeUnsupportedType, msg: fmt.Sprintf("a %s reply is sent as multipart/form-data (type=%s, file=@path), not JSON", req.Type, req.Type)}
	case req.Type != "text":
		return ReplyRequest{}, &apiError{code: CodeUnsupportedType, msg: fmt.Sprintf("unsupported message type %q: \"text\" (JSON) or \"image\", \"file\", \"video\" (multipart)", clip(req.Type, 32))}
	case len(req.Media) > 0:
		return ReplyRequest{}, &apiError{code: CodeInvalidJSON, msg: "a text message carries no media"}
	}
	if fault := vocab.CheckText(req.Text, maxText); fault != vocab.TextOK {
		code := CodeInvalidText
		if fault == vocab.TextTooLong {
			code = CodeTextTooLong
		}
		return ReplyRequest{}, &apiError{code: code, msg: fault.Describe(len(req.Text), maxText)}
	}
	return req, nil
}

// reply serves a JSON POST /v1/reply: headers, then the session, then the body, then the
// window's send Update.
func (a *API) reply(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	key, kerr := idempotencyKey(r)
	if kerr != nil {
		return 0, nil, kerr
	}
	if e := checkReplyContentType(r); e != nil {
		return 0, nil, e
	}
	if e := declaredSize(r, a.cfg.MaxBodyBytes, CodeBodyTooLarge, "request body"); e != nil {
		return 0, nil, e
	}
	log := a.log.With("route", "reply")
	sess, serr := a.session(r.Context(), token)
	var prior *store.SendOutcome
	expired := serr != nil && serr.code == CodeWindowExpired
	if serr != nil && !expired {
		// A repeated request learns the first one's outcome, even after its window ended;
		// without a first attempt (an unknown token never has one) the refusal stands and
		// the body is never read.
		if prior, serr = a.repeated(r.Context(), log, token, key, serr); serr != nil {
			if StatusOf(serr.code) >= http.StatusInternalServerError {
				return 0, nil, serr // the store did not answer: no second wait for it
			}
			if status, out, ok := a.heldAnswer(r.Context(), log, token, key); ok {
				return status, out, nil
			}
			return 0, nil, serr
		}
	}
	body, e := a.readBody(w, r)
	if e != nil {
		return 0, nil, e
	}
	req, e := parseReply(body, a.cfg.MaxTextBytes)
	if e != nil {
		return 0, nil, e
	}
	match := func(att store.Attempt) bool { return sameReply(att, req) }
	if prior != nil {
		status, out, e := a.priorAnswer(log.With("request_id", key), key, *prior, match)
		return status, out, e
	}
	if expired {
		// The window expired (its workflow may be gone): a repeated request learns its
		// first outcome; a new reply is held for the user's next message, or refused.
		if p, e := a.repeated(r.Context(), log, token, key, serr); e == nil {
			return a.priorAnswer(log.With("request_id", key), key, *p, match)
		}
		if !req.holds() {
			return 0, nil, serr
		}
		return a.holdExpired(r.Context(), log, token, key, req)
	}
	return a.sendUpdate(r, log, token, key, sess, req, nil, match)
}

// heldAnswer answers a repeated request whose first one was held with the held reply
// (ok false: the key held nothing, or the store could not tell).
func (a *API) heldAnswer(ctx context.Context, log *slog.Logger, token sealing.Secret, key string) (int, any, bool) {
	if key == "" {
		return 0, nil, false
	}
	sctx, cancel := a.storeContext(ctx)
	h, ok, err := a.cfg.Store.FindHeldReply(sctx, store.ByToken(token), UpdateID(key))
	cancel()
	if err != nil || !ok {
		return 0, nil, false
	}
	status, out, _ := a.answer(log.With("request_id", key), key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID,
		HeldPosition: h.Position, ErrorCode: h.Reason})
	return status, out, true
}

// holdExpired holds a text reply whose window expired (store.HoldReply, under the
// token's session, with the request id the send Update would have used).
func (a *API) holdExpired(ctx context.Context, log *slog.Logger, token sealing.Secret, key string, req ReplyRequest) (int, any, *apiError) {
	if key == "" {
		key = uuid.NewString()
	}
	log = log.With("request_id", key)
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	h, err := a.cfg.Store.HoldReply(sctx, a.cfg.Now(), store.HoldInput{Session: store.ByToken(token), RequestID: UpdateID(key),
		Content: vocab.Content{Type: req.Type, Text: req.Text}, Final: req.Final})
	if err != nil {
		return 0, nil, a.storeFailure(sctx, log, "the held reply", err)
	}
	return a.answer(log, key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID, HeldPosition: h.Position, ErrorCode: h.Reason})
}

// repeated is what a request whose session was refused (serr) does next: with an
// idempotency key whose first request made an attempt, it answers that attempt's outcome
// (prior, once the body shows the same reply); otherwise the refusal stands.
func (a *API) repeated(ctx context.Context, log *slog.Logger, token sealing.Secret, key string, serr *apiError) (*store.SendOutcome, *apiError) {
	if key == "" || StatusOf(serr.code) >= http.StatusInternalServerError {
		return nil, serr
	}
	prior, ok, e := a.findReply(ctx, log, token, key)
	switch {
	case e != nil:
		return nil, e
	case !ok:
		return nil, serr
	}
	return &prior, nil
}

// sendUpdate runs a reply's send Update under a validated session (media: staged media)
// and answers its outcome; match tells whether a stored attempt carries this reply.
func (a *API) sendUpdate(r *http.Request, log *slog.Logger, token sealing.Secret, key string, sess store.Session, req ReplyRequest,
	media *wfapi.MediaRef, match func(store.Attempt) bool) (int, any, *apiError) {
	explicit := key != ""
	if key == "" {
		key = uuid.NewString()
	}
	id := UpdateID(key)
	log = log.With("session", sess.SessionID, "reply_window_id", sess.ReplyWindowID, "request_id", key)
	workflowID, aerr := a.reachableWindow(r.Context(), log, sess)
	if aerr != nil {
		return 0, nil, aerr
	}

	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReplyTimeout)
	defer cancel()
	var res wfapi.SendResult
	h, err := a.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:   id,
		WorkflowID: workflowID,
		UpdateName: wfapi.UpdateSend,
		Args: []any{wfapi.SendRequest{Type: req.Type, Text: req.Text, RequestID: id, SessionID: sess.SessionID, Media: media,
			Final: req.Final, NoHold: !req.holds()}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if explicit && errors.As(err, &nf) {
			// The window's workflow ended: a repeated request answers its first outcome.
			if prior, ok, e := a.findReply(ctx, log, token, key); e == nil && ok {
				return a.priorAnswer(log, key, prior, match)
			}
			sctx, cancel := a.storeContext(ctx)
			h, ok, herr := a.cfg.Store.FindHeldReply(sctx, store.ByToken(token), id)
			cancel()
			if herr == nil && ok {
				return a.answer(log, key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID, HeldPosition: h.Position, ErrorCode: h.Reason})
			}
		}
		return a.updateFailure(ctx, log, sess, key, err)
	}
	if explicit && res.AttemptID != "" {
		// Temporal answers a repeated Update id with the first Update's outcome, whatever
		// this request carries: a key reused for another reply is a conflict.
		if prior, ok, e := a.findReply(ctx, log, token, key); e == nil && ok && !match(prior.Attempt) {
			return 0, nil, reusedKey()
		}
	}
	return a.answer(log, key, res)
}

// storeContext bounds one store call made for a request by StoreTimeout. It outlives
// the request's own end (a client gone, or the reply's wait over): what the store says
// still decides the answer.
func (a *API) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), a.cfg.StoreTimeout)
}

// findReply finds the attempt a request's idempotency key made through the token's
// session (whatever became of the session since); ok is false when there is none.
func (a *API) findReply(ctx context.Context, log *slog.Logger, token sealing.Secret, key string) (store.SendOutcome, bool, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	prior, ok, err := a.cfg.Store.FindReply(sctx, store.ByToken(token), UpdateID(key))
	if err != nil {
		return store.SendOutcome{}, false, a.storeFailure(sctx, log, "the idempotency key", err)
	}
	return prior, ok, nil
}

// priorAnswer answers a repeated request with the outcome of the attempt its first
// request made, or attempt_conflict when the attempt carries another reply.
func (a *API) priorAnswer(log *slog.Logger, key string, prior store.SendOutcome, match func(store.Attempt) bool) (int, any, *apiError) {
	if !match(prior.Attempt) {
		return 0, nil, reusedKey()
	}
	att := prior.Attempt
	return a.answer(log, key, wfapi.SendResult{AttemptID: att.AttemptID, ClientMessageID: att.ClientMessageID,
		Status: att.Status, ProviderMessageID: att.ProviderMessageID, ErrorCode: att.OutcomeCode(), SendsLeft: prior.Window.SendsLeft()})
}

// storeFailure maps the failure of a store call made for a request (sctx: its context)
// to a refusal. The store's rules keep their codes (an unknown rule code means the
// session cannot be used: invalid_agent_session); content the store refused
// (invalid_input) is 400 naming what (never a session error); a database that failed or
// did not answer within StoreTimeout is 503 store_unavailable; anything else is internal.
func (a *API) storeFailure(sctx context.Context, log *slog.Logger, what string, err error) *apiError {
	code := string(store.CodeOf(err))
	switch {
	case code == CodeInvalidInput:
		msg := what + " was refused by the store"
		var se *store.Error
		if errors.As(err, &se) && se.Msg != "" {
			msg += ": " + clip(se.Msg, 200)
		}
		log.Warn("the store refused the request's content", "what", what, "error", err)
		return &apiError{code: CodeInvalidInput, msg: msg}
	case code == CodeAttachmentNotFound || code == CodeWrongMessage || code == CodeMediaNotFound:
		return &apiError{code: code, msg: mediaMessage(code)}
	case store.IsRuleViolation(err):
		if StatusOf(code) == http.StatusInternalServerError {
			code = CodeInvalidSession
		}
		return &apiError{code: code, msg: failureMessage(code)}
	case code == CodeSealedUnreadable:
		// An operator's fault (a key generation missing from the sealing keys), not the
		// agent's: retry after the operator added the key.
		log.Error("the sealing keys cannot open what the request needs", "what", what, "error", err)
		return &apiError{code: CodeSealedUnreadable, msg: failureMessage(CodeSealedUnreadable)}
	case code == CodeStoreUnavailable, errors.Is(sctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		log.Warn("store unavailable", "what", what, "timeout", a.cfg.StoreTimeout, "error", err)
		return &apiError{code: CodeStoreUnavailable, msg: failureMessage(CodeStoreUnavailable)}
	}
	log.Error("store call failed", "what", what, "error", err)
	return &apiError{code: CodeInternal, msg: failureMessage(CodeInternal)}
}

// temporalAnswers checks, within DefaultHealthTimeout, that Temporal answers before an
// Update is sent: an unreachable Temporal is a prompt 503 with nothing sent.
func (a *API) temporalAnswers(ctx context.Context, log *slog.Logger) *apiError {
	hctx, cancel := context.WithTimeout(ctx, DefaultHealthTimeout)
	defer cancel()
	if _, err := a.cfg.Temporal.CheckHealth(hctx, &client.CheckHealthRequest{}); err != nil {
		log.Warn("Temporal unavailable; nothing sent", "error", err)
		return &apiError{code: CodeTemporalUnavailable, msg: failureMessage(CodeTemporalUnavailable)}
	}
	return nil
}

// sameReply reports whether an attempt carries the reply a request asks for.
func sameReply(a store.Attempt, req ReplyRequest) bool {
	return a.Content.Type == req.Type && a.Content.Text == req.Text
}

func reusedKey() *apiError {
	return &apiError{code: CodeAttemptConflict, msg: "the Idempotency-Key was used for another reply"}
}

// answer maps a send's outcome to the reply's answer.
func (a *API) answer(log *slog.Logger, key string, res wfapi.SendResult) (int, any, *apiError) {
	out := ReplyResponse{AttemptID: res.AttemptID, ClientMessageID: res.ClientMessageID, Status: res.Status,
		ProviderMessageID: res.ProviderMessageID, SendsLeft: res.SendsLeft, RequestID: key}
	switch res.Status {
	case vocab.AttemptSent:
		log.Info("reply sent", "attempt", res.AttemptID)
		return http.StatusOK, out, nil
	case vocab.AttemptUnknown:
		log.Warn("reply outcome unknown", "attempt", res.AttemptID)
		return http.StatusAccepted, out, nil
	case wfapi.SendHeld:
		out.HeldID, out.Position, out.Reason = res.HeldID, res.HeldPosition, res.ErrorCode
		log.Info("reply held for the user's next message", "held_reply", res.HeldID, "reason", res.ErrorCode, "position", res.HeldPosition)
		return http.StatusAccepted, out, nil
	case vocab.AttemptPending, vocab.AttemptSending:
		// A repeated request whose first one's send is still in progress (its worker died
		// mid-send and the send waits for its retry): no outcome yet, as when the wait
		// times out; a later repeat learns it.
		log.Info("reply still in progress; outcome not known yet", "attempt", res.AttemptID, "status", res.Status)
		out.Status = vocab.AttemptUnknown
		return http.StatusAccepted, out, nil
	}
	code := res.ErrorCode
	if StatusOf(code) == http.StatusInternalServerError {
		log.Error("send failed with an unexpected code", "attempt", res.AttemptID, "status", res.Status, "code", code)
		code = CodeInternal
	}
	e := &apiError{code: code, msg: failureMessage(code), attempt: &out}
	if code == CodeThrottled {
		e.retryAfter = a.retryAfter(res.RetryAfter)
	}
	log.Info("reply not sent", "attempt", res.AttemptID, "code", code)
	return 0, nil, e
}

// updateFailure maps a failed Update: the window's typed refusals keep their code; a
// window whose workflow is gone answers with the window's stored state; a timeout is an
// unknown outcome (202); Temporal being unreachable is 503.
func (a *API) updateFailure(ctx context.Context, log *slog.Logger, sess store.Session, key string, err error) (int, any, *apiError) {
	unknown := ReplyResponse{Status: vocab.AttemptUnknown, RequestID: key}
	var act *temporal.ActivityError
	var app *temporal.ApplicationError
	var nf *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	switch {
	case errors.As(err, &act):
		// The send activity itself failed (retries exhausted): it may have transmitted.
		log.Error("send activity failed; outcome unknown", "error", err)
		return http.StatusAccepted, unknown, nil
	case errors.As(err, &app):
		code := app.Type()
		if StatusOf(code) == http.StatusInternalServerError {
			log.Error("send update failed", "type", code, "error", err)
			code = CodeInternal
		}
		e := &apiError{code: code, msg: failureMessage(code)}
		var res wfapi.SendResult
		if app.HasDetails() && app.Details(&res) == nil && res.AttemptID != "" {
			e.attempt = &ReplyResponse{AttemptID: res.AttemptID, ClientMessageID: res.ClientMessageID, Status: res.Status,
				ProviderMessageID: res.ProviderMessageID, SendsLeft: res.SendsLeft, RequestID: key}
		}
		if code == CodeThrottled {
			e.retryAfter = a.retryAfter(res.RetryAfter)
		}
		log.Info("reply refused", "code", code)
		return 0, nil, e
	case errors.As(err, &nf):
		// The window's workflow completed (expired, retired) or is not started yet.
		sctx, cancel := a.storeContext(ctx)
		w, werr := a.cfg.Store.GetWindow(sctx, sess.ReplyWindowID)
		cancel()
		switch {
		case werr == nil && w.State == vocab.WindowExpired:
			return 0, nil, &apiError{code: CodeWindowExpired, msg: failureMessage(CodeWindowExpired)}
		case werr == nil && w.State != vocab.WindowOpen:
			return 0, nil, &apiError{code: CodeWindowInactive, msg: failureMessage(CodeWindowInactive)}
		case werr != nil && (store.CodeOf(werr) == vocab.CodeUnavailable || errors.Is(sctx.Err(), context.DeadlineExceeded)):
			log.Warn("window workflow not found and the store unavailable", "error", err, "store_error", werr)
			return 0, nil, &apiError{code: CodeStoreUnavailable, msg: failureMessage(CodeStoreUnavailable)}
		}
		log.Warn("window workflow not found", "error", err)
		return 0, nil, &apiError{code: CodeWindowUnavailable, msg: failureMessage(CodeWindowUnavailable)}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isDeadline(err):
		// No answer in time (or the client went away): the Update may still run.
		log.Warn("reply outcome unknown: no answer in time", "timeout", a.cfg.ReplyTimeout, "error", err)
		return http.StatusAccepted, unknown, nil
	case errors.As(err, &unavailable):
		log.Warn("Temporal unavailable", "error", err)
		return 0, nil, &apiError{code: CodeTemporalUnavailable, msg: failureMessage(CodeTemporalUnavailable)}
	}
	log.Error("send update failed", "error", err)
	return 0, nil, &apiError{code: CodeInternal, msg: failureMessage(CodeInternal)}
}

// retryAfter is how long a throttled agent waits: until the bot's breaker closes.
func (a *API) retryAfter(until time.Time) time.Duration {
	if until.IsZero() {
		return DefaultThrottleRetry
	}
	return until.Sub(a.cfg.Now())
}

func isDeadline(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &de)
}

// session validates a bearer token (a read: it writes nothing), within StoreTimeout.
func (a *API) session(ctx context.Context, token sealing.Secret) (store.Session, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	sess, err := a.cfg.Store.ValidateSession(sctx, a.cfg.Now(), store.ByToken(token))
	if err != nil {
		return store.Session{}, a.storeFailure(sctx, a.log, "the session token", err)
	}
	return sess, nil
}

// reachableWindow is the workflow id of the session's window, once Temporal answers: an
// Update is only sent when it can be (a prompt refusal otherwise, nothing written).
func (a *API) reachableWindow(ctx context.Context, log *slog.Logger, sess store.Session) (string, *apiError) {
	id, aerr := a.windowWorkflow(ctx, log, sess)
	if aerr != nil {
		return "", aerr
	}
	if aerr := a.temporalAnswers(ctx, log); aerr != nil {
		return "", aerr
	}
	return id, nil
}

// windowWorkflow is the workflow id of the session's window (store.Store.WindowWorkflowID:
// it reads the installation once and caches it).
func (a *API) windowWorkflow(ctx context.Context, log *slog.Logger, sess store.Session) (string, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	id, err := a.cfg.Store.WindowWorkflowID(sctx, sess.ReplyWindowID)
	if err == nil {
		return id, nil
	}
	code := CodeInternal
	if store.CodeOf(err) == vocab.CodeUnavailable || errors.Is(sctx.Err(), context.DeadlineExceeded) {
		code = CodeStoreUnavailable
		log.Warn("reading the window's workflow id: store unavailable", "error", err)
	} else {
		log.Error("reading the window's workflow id failed", "error", err)
	}
	return "", &apiError{code: code, msg: failureMessage(code)}
}

// parseDone reads the JSON body of a verdict: strict JSON, a status of handled or
// failed, and a reason of at most MaxReasonBytes of UTF-8 without U+0000 (blank is none).
func parseDone(body []byte) (DoneRequest, *apiError) {
	if !jsontext.Valid(body) {
		return DoneRequest{}, &apiError{code: CodeInvalidReason, msg: "request body is not valid UTF-8 (or has an unpaired surrogate escape)"}
	}
	var req DoneRequest
	if err := decode(body, &req); err != nil {
		return DoneRequest{}, err
	}
	if req.Status != vocab.MessageHandled && req.Status != vocab.MessageFailed {
		return DoneRequest{}, &apiError{code: CodeInvalidStatus, msg: `status must be "handled" or "failed"`}
	}
	if fault := vocab.CheckText(req.Reason, vocab.MaxReasonBytes); fault != vocab.TextOK && fault != vocab.TextEmpty {
		return DoneRequest{}, &apiError{code: CodeInvalidReason, msg: fmt.Sprintf("reason must be at most %d bytes of UTF-8 without U+0000", vocab.MaxReasonBytes)}
	}
	return req, nil
}

// done serves POST /v1/done: headers, the session, the body, then the window's finish
// Update.
func (a *API) done(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	if e := declaredSize(r, a.cfg.MaxBodyBytes, CodeBodyTooLarge, "request body"); e != nil {
		return 0, nil, e
	}
	sess, aerr := a.session(r.Context(), token)
	if aerr != nil {
		return 0, nil, aerr
	}
	body, aerr := a.readBody(w, r)
	if aerr != nil {
		return 0, nil, aerr
	}
	req, aerr := parseDone(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	log := a.log.With("route", "done", "session", sess.SessionID, "reply_window_id", sess.ReplyWindowID)
	workflowID, aerr := a.reachableWindow(r.Context(), log, sess)
	if aerr != nil {
		return 0, nil, aerr
	}
	// One door for verdicts: the window's finish Update, as agent.Finish uses, so the
	// verdict waits for the window's sends in progress and ends its re-offers.
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReplyTimeout)
	defer cancel()
	var m wfapi.FinishResult
	h, err := a.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     "done-api/" + uuid.NewString(),
		WorkflowID:   workflowID,
		UpdateName:   wfapi.UpdateFinish,
		Args:         []any{wfapi.FinishRequest{Handled: req.Status == vocab.MessageHandled, Reason: req.Reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &m)
	}
	if err != nil {
		status, out, e := a.updateFailure(ctx, log, sess, "", err)
		if status == http.StatusAccepted {
			out = DoneResponse{Status: vocab.AttemptUnknown} // the verdict may still be recorded
		}
		return status, out, e
	}
	log.Info("message finished", "status", m.Status)
	return http.StatusOK, DoneResponse{Status: m.Status}, nil
}

// failureMessage is the human text of a code (never built from the request).
func failureMessage(code string) string {
	switch code {
	case CodeSealedUnreadable:
		return "the gateway's sealing keys cannot open what this request needs (a key generation is missing); the operator must add it, then retry"
	case CodeInvalidSession:
		return "the agent session is not valid (unknown, closed or expired token)"
	case CodeWindowExpired:
		return "the reply window has expired"
	case CodeWindowInactive:
		return "the reply window was retired (a newer message superseded it, or it was cancelled)"
	case CodeQuotaExhausted:
		return "the reply quota of the window is exhausted"
	case CodeSlotsReserved:
		return "the window's sends left are kept for the final answer (mark the reply final, or let it be held)"
	case CodeHeldLimitReached:
		return "the conversation holds as many replies as its limits allow; nothing was held"
	case CodeNotHoldable:
		return "the reply cannot be held (the window can carry it now, or it is not text)"
	case CodeAccountNotFound:
		return "the bot was removed"
	case CodeAccountNotActive:
		return "the bot account is not active"
	case CodeGenerationConflict:
		return "the bot account was re-enrolled since this message arrived"
	case CodeAttemptConflict:
		return "the request conflicts with an earlier one (idempotency key reused for other content, or the message is already finished)"
	case CodeSendInProgress:
		return "another send of this conversation is in progress"
	case CodeInvalidInput:
		return "the window refused the message content"
	case CodeThrottled:
		return "iLink is throttling this bot; retry after the given delay"
	case CodeRejected:
		return "iLink rejected the message"
	case CodeStaleToken:
		return "the bot's iLink session is dead and needs a new login"
	case CodeNotSent:
		return "the message could not be transmitted and was not sent; the quota was given back, retry"
	case CodeWindowUnavailable:
		return "the reply window is not ready yet; retry"
	case CodeTemporalUnavailable:
		return "Temporal is unavailable; retry"
	case CodeStoreUnavailable:
		return "the store is unavailable or did not answer in time; retry"
	case CodeUploadsBusy:
		return "too many media replies are being uploaded; retry"
	}
	return "internal error"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
