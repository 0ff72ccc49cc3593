package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
)

// The driver is pgx with one patch (third_party/pgx/PATCH.md): a small write to a
// connection with nothing left to read goes out without pgx's slow-write timer. A large
// pipeline whose results fill the socket while it is still being written must still
// complete: the timer starts pgx's background reader when such a write blocks.
func TestALargePipelineWhoseResultsFillTheSocketStillCompletes(t *testing.T) {
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const queries = 400
	param := strings.Repeat("p", 20_000) // 8 MB written in all
	batch := &pgx.Batch{}
	for range queries {
		// Each result is 64 KB: the server blocks writing them long before the batch is
		// written, unless the client reads meanwhile.
		batch.Queue("SELECT repeat('r', 65536) || left($1::text, 0)", param)
	}
	results := pool.SendBatch(ctx, batch)
	for i := range queries {
		var s string
		if err := results.QueryRow().Scan(&s); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if len(s) != 65536 {
			t.Fatalf("query %d: %d bytes", i, len(s))
		}
	}
	if err := results.Close(); err != nil {
		t.Fatal(err)
	}
}

// A small query on an idle connection (the patched path) returns its result, many times
// over on one connection.
func TestSmallQueriesOnAnIdleConnectionReturnTheirResults(t *testing.T) {
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i := range 500 {
		var got int
		if err := conn.QueryRow(ctx, "SELECT $1::int + 1", i).Scan(&got); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if got != i+1 {
			t.Fatalf("query %d: got %d", i, got)
		}
	}
}
