package store_test

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// installationID is the id of the store's installation (Installation).
func installationID(ctx context.Context, st *store.Store) (string, error) {
	in, err := st.Installation(ctx)
	return in.ID, err
}

func TestInstallationIDIsStableAcrossReadsAndDiffersBetweenDatabases(t *testing.T) {
	t.Parallel()
	a, b := newEnv(t), newEnv(t)
	first, err := installationID(a.ctx, a.store)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(first) {
		t.Fatalf("installation id %q, want 12 hex digits", first)
	}
	// Again, from the cache and from another store over the same database.
	again, err := installationID(a.ctx, a.store)
	if err != nil || again != first {
		t.Fatalf("second read %q %v, want %q", again, err, first)
	}
	other, err := store.New(a.pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if id, err := installationID(a.ctx, other); err != nil || id != first {
		t.Fatalf("read by another store %q %v, want %q", id, err, first)
	}
	if id, err := installationID(b.ctx, b.store); err != nil || id == first {
		t.Fatalf("the other database's installation id %q %v, want one of its own (not %q)", id, err, first)
	}
	inst, err := a.store.Installation(a.ctx)
	if err != nil || inst != (wfapi.Installation{ID: first}) {
		t.Fatalf("installation %+v %v, want id %s", inst, err, first)
	}
	// The table holds one row only.
	if _, err := a.pool.Exec(a.ctx, "INSERT INTO installation DEFAULT VALUES"); err == nil {
		t.Fatal("a second installation row was inserted")
	}
}

// A worker of the previous release that keeps running while a migration changes the type
// of columns its statements return (00007, run here from 6: the rule domains) gets one
// retryable error for such a statement on each of its connections, and the retries
// succeed: nothing is lost or reported as a rule violation.
func TestAStatementPreparedBeforeASchemaChangeFailsRetryablyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := dbtest.NewSchema(t)
	cfg, err := pgxpool.ParseConfig(dbtest.SchemaURL(schema))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the connection that prepared the statement is the one that runs it again
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrateTo(t, pool, 7)
	st, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, pool: pool, store: st}
	var b *bot
	withPageObjects(t, pool, func() {
		b = e.register()
		e.commit(b, t0, b.msg("before the migration", t0))
	})
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}

	// The page commit's statements were prepared before the change: the batch that runs
	// them fails once, then the page is stored.
	page := []store.PageEntry{b.msg("after the migration", t0.Add(1))}
	for attempt := 1; ; attempt++ {
		res, err := e.tryCommit(b, t0.Add(1), page...)
		if err == nil {
			if res.Deliverable == nil || res.Inserted != 1 {
				t.Fatalf("the retried page %+v", res)
			}
			if attempt == 1 {
				t.Fatal("the first commit after the migration succeeded: the test prepared nothing that changed")
			}
			break
		}
		wantCode(t, err, vocab.CodeUnavailable)
		if store.IsRuleViolation(err) {
			t.Fatalf("%v is reported as a rule violation", err)
		}
		if attempt == 3 {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
}

// migrateTo migrates the pool's schema up to version.
func migrateTo(t *testing.T, pool *pgxpool.Pool, version int64) {
	t.Helper()
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer func() { _ = sqlDB.Close() }()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
}

// withPageObjects runs fn, which commits pages with the current store on a schema of an
// older release, with the objects the page commit reads that later migrations add in
// place (the Up sections of 00008 and 00015), and takes them away again (their Down
// sections, newest first) so that the schema can be upgraded afterwards as that
// release's would be.
func withPageObjects(t *testing.T, pool *pgxpool.Pool, fn func()) {
	t.Helper()
	ctx := context.Background()
	var downs []string
	for _, name := range []string{"00008_predicted_pages.sql", "00015_held_replies.sql"} {
		text, err := fs.ReadFile(db.Migrations(), name)
		if err != nil {
			t.Fatal(err)
		}
		up, down, ok := strings.Cut(strings.TrimPrefix(string(text), "-- +goose Up"), "-- +goose Down")
		if !ok {
			t.Fatalf("migration %s has no Down section", name)
		}
		if _, err := pool.Exec(ctx, up); err != nil {
			t.Fatal(err)
		}
		downs = append([]string{down}, downs...)
	}
	fn()
	for _, down := range downs {
		if _, err := pool.Exec(ctx, down); err != nil {
			t.Fatal(err)
		}
	}
}
