// Package dbtest gives each test an isolated, migrated PostgreSQL schema on the real
// server at DATABASE_URL (default: the local server). Tests may run in parallel; each
// schema is dropped when its test ends.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
)

// DefaultURL is the database tests use when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the database URL tests connect to.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewPool creates a fresh schema, migrates it with the embedded migrations and returns a
// pool whose connections use it. The schema and the pool are removed at cleanup.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return NewPoolWith(tb, nil)
}

// NewPoolWith is NewPool with the pool's configuration adjusted by configure (for example
// a tracer that counts round trips) before the pool is made.
func NewPoolWith(tb testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		tb.Fatalf("dbtest: random schema name: %v", err)
	}
	schema := "t_" + hex.EncodeToString(raw[:])

	admin, err := pgxpool.New(ctx, URL())
	if err != nil {
		tb.Fatalf("dbtest: connect %s: %v", URL(), err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		tb.Fatalf("dbtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("dbtest: drop schema %s: %v", schema, err)
		}
		admin.Close()
	})

	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		tb.Fatalf("dbtest: parse url: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 24
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("dbtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		tb.Fatalf("dbtest: migrate: %v", err)
	}
	return pool
}

// SchemaURL returns URL() with its search_path set to schema, for a process (a worker, a
// CLI) that must use a test's schema.
func SchemaURL(schema string) string {
	u := URL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "search_path=" + schema
}
