package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Code is the stable identifier of a store failure (design.md §3). Callers branch on it;
// the message beside it is for people.
type Code string

// The codes a store operation can fail with.
const (
	CodeInvalidInput        Code = "invalid_input"
	CodeAccountExists       Code = "account_exists"
	CodeOwnerConflict       Code = "owner_conflict"
	CodeAccountNotFound     Code = "account_not_found"
	CodeAccountNotActive    Code = "account_not_active"
	CodeAccountLimitReached Code = "account_limit_reached"
	CodeGenerationConflict  Code = "generation_conflict"
	CodePairMismatch        Code = "pair_mismatch"
	CodeCursorConflict      Code = "cursor_conflict"
	CodeDedupeInvariant     Code = "dedupe_invariant"
	CodeReplyWindowNotFound Code = "reply_window_not_found"
	CodeReplyWindowInactive Code = "reply_window_inactive"
	CodeReplyWindowExpired  Code = "reply_window_expired"
	CodeReplyQuotaExhausted Code = "reply_quota_exhausted"
	CodeSendInProgress      Code = "send_in_progress"
	CodeAttemptConflict     Code = "attempt_conflict"
	CodeInvalidAgentSession Code = "invalid_agent_session"
	CodeUnavailable         Code = "store_unavailable"
	CodeInternal            Code = "internal"
)

// Error is the typed failure of a store operation. Its message never contains a secret.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("store: %s: %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("store: %s: %s", e.Code, e.Msg)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a store error with the same code, so that
// errors.Is(err, store.ErrCursorConflict) works for any message.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// Sentinels for errors.Is, one per code.
var (
	ErrInvalidInput        = &Error{Code: CodeInvalidInput}
	ErrAccountExists       = &Error{Code: CodeAccountExists}
	ErrOwnerConflict       = &Error{Code: CodeOwnerConflict}
	ErrAccountNotFound     = &Error{Code: CodeAccountNotFound}
	ErrAccountNotActive    = &Error{Code: CodeAccountNotActive}
	ErrAccountLimitReached = &Error{Code: CodeAccountLimitReached}
	ErrGenerationConflict  = &Error{Code: CodeGenerationConflict}
	ErrPairMismatch        = &Error{Code: CodePairMismatch}
	ErrCursorConflict      = &Error{Code: CodeCursorConflict}
	ErrDedupeInvariant     = &Error{Code: CodeDedupeInvariant}
	ErrReplyWindowNotFound = &Error{Code: CodeReplyWindowNotFound}
	ErrReplyWindowInactive = &Error{Code: CodeReplyWindowInactive}
	ErrReplyWindowExpired  = &Error{Code: CodeReplyWindowExpired}
	ErrReplyQuotaExhausted = &Error{Code: CodeReplyQuotaExhausted}
	ErrSendInProgress      = &Error{Code: CodeSendInProgress}
	ErrAttemptConflict     = &Error{Code: CodeAttemptConflict}
	ErrInvalidAgentSession = &Error{Code: CodeInvalidAgentSession}
	ErrUnavailable         = &Error{Code: CodeUnavailable}
)

// CodeOf returns the store code carried by err, or "" when err is not a store error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsRuleViolation reports whether err is a refusal by a store rule (as opposed to an
// infrastructure failure): retrying the same call cannot succeed.
func IsRuleViolation(err error) bool {
	switch CodeOf(err) {
	case "", CodeUnavailable, CodeInternal:
		return false
	}
	return true
}

func fail(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Constraint names of the schema that encode a rule; a violation of one of them is
// reported with the rule's code, never as a raw driver error.
var constraintCodes = map[string]Code{
	"accounts_one_live_per_owner":                          CodeOwnerConflict,
	"accounts_pkey":                                        CodeAccountExists,
	"accounts_provider_account_id_key":                     CodeAccountExists,
	"reply_windows_one_open":                               CodeReplyWindowInactive,
	"send_attempts_one_sending":                            CodeSendInProgress,
	"send_attempts_source_message_key_send_index_key":      CodeAttemptConflict,
	"send_attempts_pkey":                                   CodeAttemptConflict,
	"inbound_messages_account_key_provider_message_id_key": CodeDedupeInvariant,
	"enrollment_audit_offer_id_key":                        CodeAttemptConflict,
	"poll_leases_account_key_fkey":                         CodeAccountNotFound,
}

// wrapDB turns a database error into a store error. Rule constraints map to their code;
// anything else is reported as unavailable (retryable) with the driver error wrapped.
func wrapDB(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if code, ok := constraintCodes[pgErr.ConstraintName]; ok {
			return &Error{Code: code, Msg: op + ": " + pgErr.ConstraintName}
		}
		switch pgErr.Code {
		case "23514", "23502", "22001", "22003", "22P02", "22021":
			// check, not-null, too long, out of range, bad text representation, bad encoding
			return &Error{Code: CodeInvalidInput, Msg: op + ": " + pgErr.ConstraintName, Err: err}
		case "40001", "40P01":
			return &Error{Code: CodeUnavailable, Msg: op + ": serialization conflict", Err: err}
		}
		return &Error{Code: CodeInternal, Msg: op, Err: err}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &Error{Code: CodeInternal, Msg: op + ": unexpected missing row", Err: err}
	}
	return &Error{Code: CodeUnavailable, Msg: op, Err: err}
}
