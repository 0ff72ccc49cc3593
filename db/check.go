package db

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/redact"
)

// Status is what Check found: the schema's version and the embedded migrations it lacks.
type Status struct {
	// Version is the highest migration applied (0: none, or no migration table).
	Version int64
	// Latest is the highest embedded migration.
	Latest int64
	// Pending are the embedded migrations not applied, in order.
	Pending []int64
}

// Check reads, without writing anything or taking any lock, whether the schema that the
// pool's search_path selects has every embedded migration applied. A schema that lacks
// some is an [*Error] with [CodeSchemaBehind] whose message is the one line of
// [NotMigratedHint] (the database named by its redacted URL); a schema ahead of this
// release (migrated by a newer one) is not an error.
func Check(ctx context.Context, pool *pgxpool.Pool) (Status, error) {
	return checkFS(ctx, pool, Migrations())
}

// NotMigratedHint is the one line a process prints when the database at url (already
// redacted) lacks migrations this build needs: its schema is at version, the build needs
// latest, and "starter migrate" applies the rest.
func NotMigratedHint(url string, version, latest int64) string {
	return fmt.Sprintf(`the database at %s is not migrated (schema version %d, this build needs %d): run "starter migrate"`,
		url, version, latest)
}

// where names the pool's database for a person: its connection string, redacted, or
// (for a configuration built without one) its user, host, port and database.
func where(pool *pgxpool.Pool) string {
	cfg := pool.Config()
	if s := cfg.ConnString(); s != "" {
		return redact.DatabaseURL(s)
	}
	cc := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
}

// checkFS is Check for the migrations in fsys.
func checkFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (Status, error) {
	embedded, err := versionsOf(fsys)
	if err != nil {
		return Status{}, &Error{Code: CodeFailed, Msg: "cannot list the embedded migrations", Err: err}
	}
	var st Status
	if len(embedded) > 0 {
		st.Latest = embedded[len(embedded)-1]
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('goose_db_version') IS NOT NULL").Scan(&exists); err != nil {
		return st, &Error{Code: CodeFailed, Msg: "cannot read the schema version", Err: err}
	}
	applied := map[int64]bool{}
	if exists {
		// goose records each apply and each rollback; the latest row of a version says
		// whether it is applied.
		rows, err := pool.Query(ctx, "SELECT version_id, is_applied FROM goose_db_version ORDER BY id")
		if err != nil {
			return st, &Error{Code: CodeFailed, Msg: "cannot read the schema version", Err: err}
		}
		var v int64
		var on bool
		if _, err := pgx.ForEachRow(rows, []any{&v, &on}, func() error {
			applied[v] = on
			return nil
		}); err != nil {
			return st, &Error{Code: CodeFailed, Msg: "cannot read the schema version", Err: err}
		}
	}
	for v, on := range applied {
		if on && v > st.Version {
			st.Version = v
		}
	}
	for _, v := range embedded {
		if !applied[v] {
			st.Pending = append(st.Pending, v)
		}
	}
	if len(st.Pending) > 0 {
		return st, &Error{Code: CodeSchemaBehind, Msg: NotMigratedHint(where(pool), st.Version, st.Latest)}
	}
	return st, nil
}

// versionsOf lists the versions of the migration files in fsys (NNNNN_name.sql), sorted.
func versionsOf(fsys fs.FS) ([]int64, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration file %q has no version prefix", name)
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration file %q has no version prefix", name)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}
