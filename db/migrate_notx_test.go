package db_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
)

// noTxMigrations are a test's own migrations: a table with rows, then a migration without
// a transaction (second, after "-- +goose NO TRANSACTION").
func noTxMigrations(second string) fstest.MapFS {
	return fstest.MapFS{
		"00001_table.sql": {Data: []byte("-- +goose Up\nCREATE TABLE busy (id int PRIMARY KEY, v int NOT NULL);\n" +
			"INSERT INTO busy SELECT g, g FROM generate_series(1, 1000) g;\n")},
		"00002_concurrently.sql": {Data: []byte("-- +goose NO TRANSACTION\n-- +goose Up\n" + second + "\n")},
	}
}

// uniqueV is a migration that builds a unique index on busy.v concurrently.
const uniqueV = "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS busy_v ON busy (v);"

// indexState is "valid", "invalid" or "absent": the state of the index name in the
// pool's schema.
func indexState(ctx context.Context, t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var valid bool
	err := pool.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = $1`, name).Scan(&valid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "absent"
	case err != nil:
		t.Fatal(err)
	case valid:
		return "valid"
	}
	return "invalid"
}

// invalidIndexes counts the invalid indexes of the pool's schema.
func invalidIndexes(ctx context.Context, t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND NOT i.indisvalid`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A concurrent index build that fails (here a unique index over duplicate rows) fails its
// migration with an error that names it, leaves no invalid index behind (the run drops
// the one the build left), and once the cause is gone the next run applies the migration.
func TestANoTransactionIndexBuildThatFailsLeavesNoInvalidIndexAndRunsAgain(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := noTxMigrations(uniqueV)
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE busy SET v = 1 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	_, err := db.MigrateFS(ctx, pool, fsys, db.Options{})
	var me *db.Error
	if !errors.As(err, &me) || me.Code != db.CodeFailed || me.Version != 2 || !strings.Contains(err.Error(), "schema migration 00002") ||
		!strings.Contains(err.Error(), "23505") {
		t.Fatalf("a unique index over duplicates: %v, want code %s for version 2 with the unique violation", err, db.CodeFailed)
	}
	t.Logf("the failed build: %v", err)
	if n, state := invalidIndexes(ctx, t, pool), indexState(ctx, t, pool, "busy_v"); n != 0 || state != "absent" {
		t.Fatalf("after the failed build: %d invalid indexes, busy_v %s; want none", n, state)
	}
	if st, err := db.CheckFS(ctx, pool, fsys); db.CodeOf(err) != db.CodeSchemaBehind || st.Version != 1 {
		t.Fatalf("after the failed build: %+v, %v; want version 1", st, err)
	}
	if _, err := pool.Exec(ctx, "UPDATE busy SET v = 2 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	res, err := db.MigrateFS(ctx, pool, fsys, db.Options{})
	if err != nil || len(res.Applied) != 1 || res.Version != 2 {
		t.Fatalf("once the duplicates are gone: %+v, %v; want version 2 applied", res, err)
	}
	if state := indexState(ctx, t, pool, "busy_v"); state != "valid" {
		t.Fatalf("busy_v is %s after the migration, want valid", state)
	}
	assertNoMigrationLockHeld(ctx, t, pool)
}

// An invalid index an earlier build left (a run killed during the build, whose drop
// never came) does not pass for built: the run drops it before it builds the index, where
// IF NOT EXISTS alone would keep it and record the migration as applied.
func TestAnInvalidIndexAnInterruptedBuildLeftIsDroppedAndBuiltAgain(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := noTxMigrations(uniqueV)
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	// The interrupted build, left as a failed build leaves it: by hand, outside the run.
	if _, err := pool.Exec(ctx, "UPDATE busy SET v = 1 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY busy_v ON busy (v)"); err == nil {
		t.Fatal("the unique index over duplicates was built")
	}
	if _, err := pool.Exec(ctx, "UPDATE busy SET v = 2 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	if state := indexState(ctx, t, pool, "busy_v"); state != "invalid" {
		t.Fatalf("the interrupted build left busy_v %s, want invalid", state)
	}
	res, err := db.MigrateFS(ctx, pool, fsys, db.Options{})
	if err != nil || len(res.Applied) != 1 || res.Version != 2 {
		t.Fatalf("%+v, %v; want version 2 applied", res, err)
	}
	if n, state := invalidIndexes(ctx, t, pool), indexState(ctx, t, pool, "busy_v"); n != 0 || state != "valid" {
		t.Fatalf("after the run: %d invalid indexes, busy_v %s; want it valid", n, state)
	}
}

// A concurrent build waits for the transactions that were writing to its table when it
// began, and writes go on meanwhile; the wait is bounded by the lock timeout as a
// transaction's lock wait is: past it, the migration fails with migration_lock_timeout,
// naming it, the migration lock free; once the old transaction ends, the next run
// applies it, with no invalid index left.
func TestANoTransactionBuildWaitingForAnOlderTransactionFailsWithinItsLockTimeout(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := noTxMigrations(uniqueV)
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "UPDATE busy SET v = v WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	const lockTimeout = time.Second
	began := time.Now()
	_, err = db.MigrateFS(ctx, pool, fsys, db.Options{LockTimeout: lockTimeout})
	took := time.Since(began)
	var me *db.Error
	if !errors.As(err, &me) || me.Code != db.CodeLockTimeout || me.Version != 2 {
		t.Fatalf("a build behind an open transaction: %v, want code %s for version 2", err, db.CodeLockTimeout)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "lock timeout (1s)") || !strings.Contains(msg, "schema migration 00002") {
		t.Fatalf("error is not one clear line: %q", msg)
	}
	// The build's wait, then the drop of the index it left (which waits as long, for the
	// same transaction), and the run's own round trips on a busy machine.
	if took > 2*lockTimeout+20*time.Second {
		t.Fatalf("the blocked build failed after %v, want about its lock timeout %v", took, lockTimeout)
	}
	t.Logf("blocked build failed after %v (lock timeout %v): %v", took.Round(time.Millisecond), lockTimeout, err)
	assertNoMigrationLockHeld(ctx, t, pool)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := db.MigrateFS(ctx, pool, fsys, db.Options{LockTimeout: lockTimeout})
	if err != nil || len(res.Applied) != 1 || res.Version != 2 {
		t.Fatalf("after the transaction ended: %+v, %v; want version 2 applied", res, err)
	}
	if n, state := invalidIndexes(ctx, t, pool), indexState(ctx, t, pool, "busy_v"); n != 0 || state != "valid" {
		t.Fatalf("after the run: %d invalid indexes, busy_v %s; want it valid", n, state)
	}
}

// A statement of a migration without a transaction that runs past the statement timeout
// is cancelled on the server (not only abandoned by the client) and fails its migration
// with migration_statement_timeout.
func TestANoTransactionStatementPastItsTimeoutIsCancelledWithItsCode(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := noTxMigrations("SELECT pg_sleep(30);")
	const statementTimeout = 300 * time.Millisecond
	began := time.Now()
	_, err := db.MigrateFS(ctx, pool, fsys, db.Options{StatementTimeout: statementTimeout})
	took := time.Since(began)
	var me *db.Error
	if !errors.As(err, &me) || me.Code != db.CodeStatementTimeout || me.Version != 2 ||
		!strings.Contains(err.Error(), "statement timeout (300ms)") {
		t.Fatalf("slow statement: %v, want code %s for version 2", err, db.CodeStatementTimeout)
	}
	if took > 20*time.Second {
		t.Fatalf("the slow statement failed after %v, want about its statement timeout %v", took, statementTimeout)
	}
	t.Logf("slow statement failed after %v: %v", took.Round(time.Millisecond), err)
	var sleeping int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()").
		Scan(&sleeping); err != nil || sleeping != 0 {
		t.Fatalf("the cancelled statement still runs on the server: %d (%v)", sleeping, err)
	}
	st, err := db.CheckFS(ctx, pool, fsys)
	if db.CodeOf(err) != db.CodeSchemaBehind || st.Version != 1 {
		t.Fatalf("after the timed-out migration: %+v, %v; want version 1", st, err)
	}
	assertNoMigrationLockHeld(ctx, t, pool)
}

// migrationsThrough is the embedded migrations up to version last.
func migrationsThrough(t *testing.T, last int64) fstest.MapFS {
	t.Helper()
	names, err := fs.Glob(db.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		prefix, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", name, err)
		}
		if v > last {
			continue
		}
		b, err := fs.ReadFile(db.Migrations(), name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = &fstest.MapFile{Data: b}
	}
	return out
}

// consoleIndexes are the indexes migration 00017 builds.
var consoleIndexes = []string{"inbound_messages_by_account_time", "send_attempts_by_account_time"}

// Migration 00017 builds its indexes concurrently: on a schema at 00016 whose
// inbound_messages has rows and a transaction writing to it, the build waits for that
// transaction while new messages are stored, and ends once it ends, both indexes valid.
// (In a transaction, the build would have queued the new messages behind it.)
func TestTheConsoleIndexesAreBuiltWhileMessagesAreStored(t *testing.T) {
	pool := schemaPool(t)
	buildConsoleIndexesWhileMessagesAreStored(t, pool, pool)
}

// buildConsoleIndexesWhileMessagesAreStored runs the test above: migrations and the
// messages through pool (directly or through PgBouncer), the older transaction and the
// checks through direct.
func buildConsoleIndexesWhileMessagesAreStored(t *testing.T, pool, direct *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := db.MigrateFS(ctx, pool, migrationsThrough(t, 16), db.Options{}); err != nil {
		t.Fatal(err)
	}
	const account = "ilk_0123456789abcdef0123456789abcdef"
	if _, err := pool.Exec(ctx, `INSERT INTO accounts (account_key, provider_account_id, owner_peer_id, base_url, generation, status, created_at, updated_at)
		VALUES ($1, 'bot-1@im.bot', 'owner-1@im.wechat', 'https://ilink.example', 1, 'active', now(), now())`, account); err != nil {
		t.Fatal(err)
	}
	storeMessages := func(ctx context.Context, from, to int) error {
		_, err := pool.Exec(ctx, `INSERT INTO inbound_messages (message_key, account_key, peer_id, provider_message_id, sent_at, status, payload, created_at, updated_at)
			SELECT 'im_' || md5(g::text), $1, 'peer-1@im.wechat', 'm-' || g, now(), 'received', '{}', now(), now()
			FROM generate_series($2::int, $3::int) g`, account, from, to)
		return err
	}
	if err := storeMessages(ctx, 1, 2000); err != nil {
		t.Fatal(err)
	}
	older, err := direct.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = older.Rollback(ctx) }()
	if _, err := older.Exec(ctx, "UPDATE inbound_messages SET updated_at = now() WHERE provider_message_id = 'm-1'"); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res db.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := db.MigrateFS(ctx, pool, migrationsThrough(t, 17), db.Options{LockTimeout: time.Minute})
		done <- outcome{res, err}
	}()
	// The build waits for the older transaction.
	for {
		var waiting bool
		if err := direct.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%INDEX%inbound_messages_by_account_time%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case o := <-done:
			t.Fatalf("the migration ended before the build waited for the older transaction: %+v, %v", o.res, o.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Messages are stored meanwhile.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	err = storeMessages(wctx, 2001, 2010)
	wcancel()
	if err != nil {
		t.Fatalf("a message stored while the index is built: %v (writes waited for the build)", err)
	}
	select {
	case o := <-done:
		t.Fatalf("the migration ended while the older transaction was open: %+v, %v", o.res, o.err)
	default:
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || len(o.res.Applied) != 1 || o.res.Applied[0] != 17 {
		t.Fatalf("migration 00017: %+v, %v; want it applied", o.res, o.err)
	}
	for _, name := range consoleIndexes {
		if state := indexState(ctx, t, direct, name); state != "valid" {
			t.Errorf("%s is %s, want valid", name, state)
		}
	}
	var indexed int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND created_at > now() - interval '1 hour'", account).
		Scan(&indexed); err != nil || indexed != 2010 {
		t.Fatalf("messages of the bot's last hour: %d, %v; want 2010", indexed, err)
	}
}
