// Package replyapi is the agents' HTTP reply endpoint (docs/agents.md#reply-api): an
// agent that was handed a message replies with the session token it received, as
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
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
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
