package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
)

// The store sends each operation as one pipeline (a page of up to 1,000 messages): a large
// pipeline whose results fill the socket while it is still being written must complete
// (pgx starts a background reader when such a write blocks).
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
