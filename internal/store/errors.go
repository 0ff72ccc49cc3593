package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Error is the typed failure of a store operation. Its message never contains a secret.
type Error struct {
	Code vocab.Code
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
	ErrInvalidInput        = &Error{Code: vocab.CodeInvalidInput}
	ErrAccountExists       = &Error{Code: vocab.CodeAccountExists}
	ErrOwnerConflict       = &Error{Code: vocab.CodeOwnerConflict}
	ErrAccountNotFound     = &Error{Code: vocab.CodeAccountNotFound}
	ErrAccountNotActive    = &Error{Code: vocab.CodeAccountNotActive}
	ErrAccountLimitReached = &Error{Code: vocab.CodeAccountLimitReached}
	ErrGenerationConflict  = &Error{Code: vocab.CodeGenerationConflict}
	ErrPairMismatch        = &Error{Code: vocab.CodePairMismatch}
	ErrCursorConflict      = &Error{Code: vocab.CodeCursorConflict}
	ErrDedupeInvariant     = &Error{Code: vocab.CodeDedupeInvariant}
	ErrReplyWindowNotFound = &Error{Code: vocab.CodeReplyWindowNotFound}
	ErrReplyWindowInactive = &Error{Code: vocab.CodeReplyWindowInactive}
	ErrReplyWindowExpired  = &Error{Code: vocab.CodeReplyWindowExpired}
	ErrReplyQuotaExhausted = &Error{Code: vocab.CodeReplyQuotaExhausted}
	ErrSendInProgress      = &Error{Code: vocab.CodeSendInProgress}
	ErrAttemptConflict     = &Error{Code: vocab.CodeAttemptConflict}
	ErrInvalidAgentSession = &Error{Code: vocab.CodeInvalidAgentSession}
	ErrUnavailable         = &Error{Code: vocab.CodeUnavailable}
	ErrSealedUnreadable    = &Error{Code: vocab.CodeSealedUnreadable}
	ErrPeerNotFound        = &Error{Code: vocab.CodePeerNotFound}
)

// CodeOf returns the store code carried by err, or "" when err is not a store error.
func CodeOf(err error) vocab.Code {
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
	case "", vocab.CodeUnavailable, vocab.CodeInternal:
		return false
	}
	return true
}

func fail(code vocab.Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Constraint names of the schema that encode a rule; a violation of one of them is
// reported with the rule's code, never as a raw driver error.
var constraintCodes = map[string]vocab.Code{
	"accounts_one_live_per_owner":                     vocab.CodeOwnerConflict,
	"accounts_pkey":                                   vocab.CodeAccountExists,
	"accounts_provider_account_id_key":                vocab.CodeAccountExists,
	"reply_windows_one_open":                          vocab.CodeReplyWindowInactive,
	"send_attempts_one_sending":                       vocab.CodeSendInProgress,
	"send_attempts_source_message_key_send_index_key": vocab.CodeAttemptConflict,
	"send_attempts_pkey":                              vocab.CodeAttemptConflict,
	"inbound_messages_key_derived":                    vocab.CodeDedupeInvariant,
	"send_attempts_client_id_derived":                 vocab.CodeAttemptConflict,
	"enrollment_audit_offer_id_key":                   vocab.CodeAttemptConflict,
	"poll_leases_account_key_fkey":                    vocab.CodeAccountNotFound,
	"mcp_agents_pkey":                                 vocab.CodeMCPAgentExists,
	"account_routes_mcp_agent_fkey":                   vocab.CodeMCPAgentNotFound,
	"mcp_offers_agent_name_fkey":                      vocab.CodeMCPAgentNotFound,
	"ilink_clients_pkey":                              vocab.CodeILinkClientExists,
	"account_routes_ilink_client_fkey":                vocab.CodeILinkClientNotFound,
}

// msgStalePlan is PostgreSQL's message (SQLSTATE 0A000) for a prepared statement whose
// result columns changed type since it was prepared.
const msgStalePlan = "cached plan must not change result type"

// isConflict reports whether err is a deadlock or serialization failure: PostgreSQL
// rolled the whole transaction back, and running it again may succeed.
func isConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
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
		if strings.HasPrefix(pgErr.Code, "22") {
			// A data exception (too long, out of range, bad text representation, bad
			// encoding, U+0000 in text or jsonb: 22P05, ...): the input, not the database,
			// is at fault, and the same call fails again.
			return &Error{Code: vocab.CodeInvalidInput, Msg: op + ": data exception (SQLSTATE " + pgErr.Code + ")", Err: err}
		}
		switch pgErr.Code {
		case "23514", "23502":
			// check, not-null
			return &Error{Code: vocab.CodeInvalidInput, Msg: op + ": " + pgErr.ConstraintName, Err: err}
		case "40001", "40P01":
			return &Error{Code: vocab.CodeUnavailable, Msg: op + ": serialization conflict", Err: err}
		case "0A000":
			if pgErr.Message == msgStalePlan {
				// A migration changed what a statement this connection prepared returns;
				// pgx dropped the statement, and a retry prepares it again.
				return &Error{Code: vocab.CodeUnavailable, Msg: op + ": statement prepared before a schema change", Err: err}
			}
		}
		return &Error{Code: vocab.CodeInternal, Msg: op, Err: err}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &Error{Code: vocab.CodeInternal, Msg: op + ": unexpected missing row", Err: err}
	}
	return &Error{Code: vocab.CodeUnavailable, Msg: op, Err: err}
}
