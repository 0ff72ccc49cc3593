package db_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
)

// The driver is pgx with a patch (third_party/pgx/PATCH.md): a small write to a
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
	ctx := context.Background()
	conn := oneConn(t)
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

// The patched driver keeps the field descriptions of a result wider than 16 columns for
// the next such result: results of different widths, names and types read one after
// another in one pipeline (and again after it) each decode by their own columns.
func TestWideResultsDecodeByTheirOwnColumnsOneAfterAnother(t *testing.T) {
	ctx := context.Background()
	conn := oneConn(t)
	query := func(prefix string, width int, value func(int) string) string {
		cols := make([]string, width)
		for i := range cols {
			cols[i] = value(i) + " AS " + prefix + strconv.Itoa(i)
		}
		return "SELECT " + strings.Join(cols, ", ")
	}
	shapes := []struct {
		prefix string
		width  int
		value  func(int) string
		want   func(int) any
	}{
		{"n", 20, func(i int) string { return strconv.Itoa(i) + "::int" }, func(i int) any { return int32(i) }},
		{"t", 18, func(i int) string { return "'v" + strconv.Itoa(i) + "'::text" }, func(i int) any { return "v" + strconv.Itoa(i) }},
		{"w", 40, func(i int) string { return strconv.Itoa(i*3) + "::bigint" }, func(i int) any { return int64(i * 3) }},
		{"s", 17, func(i int) string { return "'s" + strconv.Itoa(i) + "'::text" }, func(i int) any { return "s" + strconv.Itoa(i) }},
	}
	check := func(round string, rows pgx.Rows, s int) {
		t.Helper()
		got, err := pgx.CollectExactlyOneRow(rows, pgx.RowToMap)
		if err != nil {
			t.Fatalf("%s, result %d: %v", round, s, err)
		}
		sh := shapes[s]
		if len(got) != sh.width {
			t.Fatalf("%s, result %d: %d columns, want %d", round, s, len(got), sh.width)
		}
		for i := range sh.width {
			if v := got[sh.prefix+strconv.Itoa(i)]; v != sh.want(i) {
				t.Fatalf("%s, result %d: column %s%d = %#v, want %#v", round, s, sh.prefix, i, v, sh.want(i))
			}
		}
	}
	batch := &pgx.Batch{}
	for _, sh := range shapes {
		batch.Queue(query(sh.prefix, sh.width, sh.value))
	}
	results := conn.SendBatch(ctx, batch)
	for s := range shapes {
		rows, err := results.Query()
		if err != nil {
			t.Fatalf("pipeline, result %d: %v", s, err)
		}
		check("pipeline", rows, s)
	}
	if err := results.Close(); err != nil {
		t.Fatal(err)
	}
	for s := len(shapes) - 1; s >= 0; s-- {
		rows, err := conn.Query(ctx, query(shapes[s].prefix, shapes[s].width, shapes[s].value))
		if err != nil {
			t.Fatalf("one by one, result %d: %v", s, err)
		}
		check("one by one", rows, s)
	}
}

// oneConn is a connection of a fresh test pool, held for the test.
func oneConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	conn, err := dbtest.NewPool(t).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}
