package replyapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

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
			code = vocab.AttemptUnknown
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
