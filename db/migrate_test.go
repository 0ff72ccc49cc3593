package db_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
)

// schemaPool is a pool on a fresh, empty schema of its own.
func schemaPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	schema := dbtest.NewSchema(t)
	pool, err := pgxpool.New(context.Background(), dbtest.SchemaURL(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// twoMigrations are a test's own migrations: a table, then a change of it that needs its
// exclusive lock (or a statement that runs for a while).
func twoMigrations(second string) fstest.MapFS {
	return fstest.MapFS{
		"00001_table.sql":  {Data: []byte("-- +goose Up\nCREATE TABLE busy (id int PRIMARY KEY);\n")},
		"00002_change.sql": {Data: []byte("-- +goose Up\n" + second + "\n")},
	}
}

func firstOnly(m fstest.MapFS) fstest.MapFS {
	return fstest.MapFS{"00001_table.sql": m["00001_table.sql"]}
}

// A migration that needs a table another session holds a lock on waits at most its
// lock_timeout, then fails with migration_lock_timeout, rolled back and leaving no
// migration lock behind: once the table is free, the next run applies it.
func TestAMigrationBlockedByAHeldTableLockFailsWithinItsLockTimeout(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := twoMigrations("ALTER TABLE busy ADD COLUMN note text;")
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "LOCK TABLE busy IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	const lockTimeout = time.Second
	began := time.Now()
	_, err = db.MigrateFS(ctx, pool, fsys, db.Options{LockTimeout: lockTimeout})
	took := time.Since(began)
	var me *db.Error
	if !errors.As(err, &me) || me.Code != db.CodeLockTimeout || me.Version != 2 {
		t.Fatalf("migration under a held lock: %v, want code %s for version 2", err, db.CodeLockTimeout)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "lock timeout (1s)") {
		t.Fatalf("error is not one clear line: %q", msg)
	}
	// The wait is the lock timeout plus the run's own round trips, on a busy machine.
	if took > lockTimeout+20*time.Second {
		t.Fatalf("the blocked migration failed after %v, want about its lock timeout %v", took, lockTimeout)
	}
	t.Logf("blocked migration failed after %v (lock timeout %v): %v", took.Round(time.Millisecond), lockTimeout, err)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := db.MigrateFS(ctx, pool, fsys, db.Options{LockTimeout: lockTimeout})
	if err != nil || len(res.Applied) != 1 || res.Version != 2 {
		t.Fatalf("after the lock was released: %+v, %v; want version 2 applied", res, err)
	}
	assertNoMigrationLockHeld(ctx, t, pool)
}

// A migration statement that runs past its statement_timeout fails with
// migration_statement_timeout and is rolled back.
func TestAMigrationStatementPastItsTimeoutFailsWithItsCode(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := twoMigrations("SELECT pg_sleep(30);")
	_, err := db.MigrateFS(ctx, pool, fsys, db.Options{StatementTimeout: 300 * time.Millisecond})
	if db.CodeOf(err) != db.CodeStatementTimeout {
		t.Fatalf("slow migration: %v, want code %s", err, db.CodeStatementTimeout)
	}
	st, err := db.CheckFS(ctx, pool, fsys)
	if db.CodeOf(err) != db.CodeSchemaBehind || st.Version != 1 || len(st.Pending) != 1 {
		t.Fatalf("after the timed-out migration: %+v, %v; want version 1 with 00002 pending", st, err)
	}
	assertNoMigrationLockHeld(ctx, t, pool)
}

// Runs that start at once (workers and the migration job of a rolling deploy) apply each
// migration once between them, all succeed, and leave the migration lock free.
func TestConcurrentMigrationsApplyEachMigrationOnceAndLeaveNoLockHeld(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const runs = 3
	var wg sync.WaitGroup
	results := make([]db.Result, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = db.MigrateWith(ctx, pool, db.Options{})
		}()
	}
	wg.Wait()
	applied := map[int64]int{}
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		for _, v := range results[i].Applied {
			applied[v]++
		}
	}
	st, err := db.Check(ctx, pool)
	if err != nil {
		t.Fatalf("after the concurrent runs: %v", err)
	}
	if len(applied) != int(st.Latest) {
		t.Fatalf("applied %v between the runs, want each of 1..%d", applied, st.Latest)
	}
	for v, n := range applied {
		if n != 1 {
			t.Fatalf("migration %d applied %d times", v, n)
		}
	}
	assertNoMigrationLockHeld(ctx, t, pool)
}

// Check reads a schema without changing it: an empty schema and one migrated part of the
// way are behind, with an error that names "starter migrate"; a migrated one is current.
func TestCheckReportsASchemaBehindWithoutWritingAnything(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := twoMigrations("ALTER TABLE busy ADD COLUMN note text;")
	st, err := db.CheckFS(ctx, pool, fsys)
	if db.CodeOf(err) != db.CodeSchemaBehind || st.Version != 0 || st.Latest != 2 || len(st.Pending) != 2 ||
		!strings.Contains(err.Error(), `"starter migrate"`) {
		t.Fatalf("empty schema: %+v, %v", st, err)
	}
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("Check wrote to the schema: %d tables, %v", tables, err)
	}
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	if st, err := db.CheckFS(ctx, pool, fsys); db.CodeOf(err) != db.CodeSchemaBehind || st.Version != 1 {
		t.Fatalf("schema one migration behind: %+v, %v", st, err)
	}
	if _, err := db.MigrateFS(ctx, pool, fsys, db.Options{}); err != nil {
		t.Fatal(err)
	}
	if st, err := db.CheckFS(ctx, pool, fsys); err != nil || st.Version != 2 || len(st.Pending) != 0 {
		t.Fatalf("migrated schema: %+v, %v", st, err)
	}
}

// assertNoMigrationLockHeld checks that no run left the migration lock row held.
func assertNoMigrationLockHeld(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var held int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+db.LockTable+" WHERE locked").Scan(&held); err != nil || held != 0 {
		t.Fatalf("migration lock rows still held: %d (%v)", held, err)
	}
}
