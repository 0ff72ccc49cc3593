package db

import (
	"errors"
	"fmt"
	"strings"
)

// Stable codes of an *Error: callers and operators branch on them.
const (
	// CodeLockTimeout: a migration waited longer than its lock_timeout for a lock; it was
	// rolled back (a migration without a transaction: that statement was cancelled, and
	// the statements before it stay applied).
	CodeLockTimeout = "migration_lock_timeout"
	// CodeStatementTimeout: a migration statement ran longer than its statement_timeout;
	// the migration was rolled back (without a transaction: that statement was cancelled,
	// and the statements before it stay applied).
	CodeStatementTimeout = "migration_statement_timeout"
	// CodeLockBusy: another run held the migration lock for longer than the wait.
	CodeLockBusy = "migration_lock_busy"
	// CodeSchemaBehind: the schema lacks migrations this release needs, and the process
	// was told not to apply them (run "starter migrate"). Its message is the one line of
	// [NotMigratedHint], without the prefix and the code of the other errors.
	CodeSchemaBehind = "schema_not_migrated"
	// CodeFailed: any other failure to read or migrate the schema.
	CodeFailed = "migration_failed"
)

// Error is a failure to migrate or check the schema. Its message is one line: the
// migration version (when one failed), what happened and what to do, the stable Code, and
// the underlying error.
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Version is the migration that failed (0: none in particular).
	Version int64
	// Msg says what happened and what to do.
	Msg string
	// Err is the underlying error, when there is one.
	Err error
}

// Error is "schema migration <version>: <msg> [<code>]: <cause>", on one line; a schema
// that is behind ([CodeSchemaBehind]) is its message alone, the hint an operator acts on.
func (e *Error) Error() string {
	if e.Code == CodeSchemaBehind && e.Err == nil {
		return strings.Join(strings.Fields(e.Msg), " ")
	}
	var b strings.Builder
	b.WriteString("schema")
	if e.Version > 0 {
		fmt.Fprintf(&b, " migration %05d", e.Version)
	}
	b.WriteString(": " + e.Msg + " [" + e.Code + "]")
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches an *Error with the same Code, so errors.Is(err, &Error{Code: c}) tests the
// cause.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the Code of the *Error in err's chain ("" when there is none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
