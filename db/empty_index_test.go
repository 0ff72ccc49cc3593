package db_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
)

// An index a migration builds concurrently on a table without rows (a fresh installation,
// a new schema) is built plainly, so it does not wait for the older transactions of the
// database, however unrelated: a snapshot held open in another schema would otherwise hold
// every fresh installation's migration until it failed on its lock timeout.
func TestAnIndexOnAnEmptyTableIsBuiltWithoutWaitingForOlderTransactions(t *testing.T) {
	pool := schemaPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys := fstest.MapFS{
		"00001_table.sql": {Data: []byte("-- +goose Up\nCREATE TABLE quiet (id int PRIMARY KEY, v int NOT NULL);\n")},
		"00002_concurrently.sql": {Data: []byte("-- +goose NO TRANSACTION\n-- +goose Up\n" +
			"CREATE INDEX CONCURRENTLY IF NOT EXISTS quiet_v ON quiet (v);\n")},
	}
	if _, err := db.MigrateFS(ctx, pool, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}
	// Another session's transaction with a snapshot, in a table of its own.
	other, err := pgx.Connect(ctx, dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close(context.Background()) }()
	if _, err := other.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := other.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	res, err := db.MigrateFS(ctx, pool, fsys, db.Options{LockTimeout: 2 * time.Second})
	if err != nil || res.Version != 2 {
		t.Fatalf("an index on an empty table beside an older snapshot: %+v, %v", res, err)
	}
	if state := indexState(ctx, t, pool, "quiet_v"); state != "valid" {
		t.Fatalf("quiet_v is %s, want valid", state)
	}
}
