package ilink

import (
	"errors"
	"strconv"
	"strings"
)

// Code is the stable, machine-readable kind of an [*Error].
type Code string

// Error codes. They are stable: callers may store and compare them.
const (
	// CodeStaleToken: errcode or ret -14 ("session timeout") on any endpoint.
	// The bot token is no longer valid; a new QR login is needed.
	CodeStaleToken Code = "stale_token"
	// CodeRejected: ret -2. The server refused the request (reply quota,
	// 24 h window, burst throttle or validation; its errmsg does not tell
	// them apart).
	CodeRejected Code = "rejected"
	// CodeAPI: any other non-zero ret or errcode.
	CodeAPI Code = "api_error"
	// CodeHTTPStatus: a non-2xx HTTP status.
	CodeHTTPStatus Code = "http_status"
	// CodeMalformedBody: a response body that is not the expected JSON, or a
	// response missing a required field or header.
	CodeMalformedBody Code = "malformed_body"
	// CodeBodyTooLarge: a response body longer than the configured cap.
	CodeBodyTooLarge Code = "body_too_large"
	// CodeNotSent: the request surely never reached the server (dial, DNS,
	// connection refused, cancelled before the request was written). Safe to
	// retry.
	CodeNotSent Code = "not_sent"
	// CodeOutcomeUnknown: the request was written and may have been processed,
	// but no complete answer came back (reset, EOF, timeout awaiting the
	// response). A send with this outcome must never be retried automatically.
	CodeOutcomeUnknown Code = "outcome_unknown"
	// CodeInvalidInput: the caller passed an invalid argument or configuration;
	// nothing was sent.
	CodeInvalidInput Code = "invalid_input"
	// CodeMedia: media could not be decrypted or its key could not be decoded.
	CodeMedia Code = "media_error"
)

// Error is the error type returned by every operation of this package.
// Its text never contains a token, a key or a CDN locator.
type Error struct {
	// Code is the kind of failure.
	Code Code
	// Op names the operation, e.g. "sendmessage" or "cdn upload".
	Op string
	// Ret and Errcode are the envelope fields of an API error (0 when absent).
	Ret, Errcode int
	// Errmsg is the server's errmsg, or the CDN's x-error-message header.
	Errmsg string
	// Status is the HTTP status when one was received (0 otherwise).
	Status int
	// Err is the underlying cause, if any.
	Err error
}

// Sentinel errors for errors.Is: an [*Error] matches the sentinel with the
// same Code.
var (
	ErrStaleToken     = &Error{Code: CodeStaleToken}
	ErrRejected       = &Error{Code: CodeRejected}
	ErrAPI            = &Error{Code: CodeAPI}
	ErrHTTPStatus     = &Error{Code: CodeHTTPStatus}
	ErrMalformedBody  = &Error{Code: CodeMalformedBody}
	ErrBodyTooLarge   = &Error{Code: CodeBodyTooLarge}
	ErrNotSent        = &Error{Code: CodeNotSent}
	ErrOutcomeUnknown = &Error{Code: CodeOutcomeUnknown}
	ErrInvalidInput   = &Error{Code: CodeInvalidInput}
	ErrMedia          = &Error{Code: CodeMedia}
)

// Error returns "ilink: <op>: <code>[ details][: cause]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ilink: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(string(e.Code))
	if e.Status != 0 && e.Code != CodeStaleToken && e.Code != CodeRejected && e.Code != CodeAPI {
		b.WriteString(" status=")
		b.WriteString(strconv.Itoa(e.Status))
	}
	if e.Ret != 0 {
		b.WriteString(" ret=")
		b.WriteString(strconv.Itoa(e.Ret))
	}
	if e.Errcode != 0 {
		b.WriteString(" errcode=")
		b.WriteString(strconv.Itoa(e.Errcode))
	}
	if e.Errmsg != "" {
		b.WriteString(" errmsg=")
		b.WriteString(strconv.Quote(e.Errmsg))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error sentinel with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Op == "" && t.Err == nil
}

// CodeOf returns the Code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsStaleToken reports whether err is a stale-token (-14) error.
func IsStaleToken(err error) bool { return CodeOf(err) == CodeStaleToken }

// IsRejected reports whether err is a ret -2 rejection.
func IsRejected(err error) bool { return CodeOf(err) == CodeRejected }

// IsOutcomeUnknown reports whether the request may have reached the server
// without a complete answer. Such a send must not be retried automatically.
func IsOutcomeUnknown(err error) bool { return CodeOf(err) == CodeOutcomeUnknown }

// IsRetryable reports whether repeating the same request is both safe (the
// first one certainly had no effect) and may succeed: the request was never
// sent, or the server answered with HTTP 5xx, 408 or 429. It is false for
// outcome-unknown transport failures, for business errors (-14, -2, other
// ret/errcode), for 4xx, for malformed or oversized bodies and for invalid
// input.
func IsRetryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeNotSent:
		return true
	case CodeHTTPStatus:
		return e.Status >= 500 || e.Status == 408 || e.Status == 429
	}
	return false
}

// IsTransient reports whether err is a temporary transport failure worth
// retrying for an idempotent request (getupdates, getconfig, downloads):
// everything IsRetryable accepts plus outcome-unknown failures.
func IsTransient(err error) bool {
	return IsRetryable(err) || IsOutcomeUnknown(err)
}

// MayHaveTakenEffect reports whether a failed request may nevertheless have
// been processed by the server: an outcome-unknown transport failure, or an
// HTTP 2xx answer whose body was malformed or too large. For sendmessage such
// an error means "uncertain", never "failed".
func MayHaveTakenEffect(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeOutcomeUnknown:
		return true
	case CodeMalformedBody, CodeBodyTooLarge:
		return e.Status >= 200 && e.Status < 300
	}
	return false
}

// envelopeError maps a response envelope to an error; nil means success.
// A missing ret or errcode counts as zero.
func envelopeError(op string, status int, ret, errcode *int, errmsg string) error {
	r, c := 0, 0
	if ret != nil {
		r = *ret
	}
	if errcode != nil {
		c = *errcode
	}
	e := &Error{Op: op, Status: status, Ret: r, Errcode: c, Errmsg: errmsg}
	switch {
	case r == -14 || c == -14:
		e.Code = CodeStaleToken
	case r == -2:
		e.Code = CodeRejected
	case r != 0 || c != 0:
		e.Code = CodeAPI
	default:
		return nil
	}
	return e
}
