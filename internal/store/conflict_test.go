package store

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// A change that PostgreSQL ended as a deadlock or a serialization failure is run again
// (setStatus): the store error keeps the cause that tells it; other failures are not.
func TestADeadlockOrSerializationFailureIsAConflictToRunAgain(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"40P01", "40001"} {
		err := fmt.Errorf("remove: %w", wrapDB("set account status", &pgconn.PgError{Code: code}))
		if !isConflict(err) || CodeOf(err) != vocab.CodeUnavailable {
			t.Errorf("SQLSTATE %s: conflict %v, code %s", code, isConflict(err), CodeOf(err))
		}
	}
	for _, err := range []error{nil, wrapDB("op", &pgconn.PgError{Code: "23505"}), fail(vocab.CodeAccountNotActive, "paused")} {
		if isConflict(err) {
			t.Errorf("%v counted as a conflict", err)
		}
	}
}
