// Package db holds the embedded PostgreSQL migrations of ilinkflow and applies them.
// The sqlc-generated queries live in the dbq subpackage; sqlc reads the same migration
// files, so the schema has one source of truth.
package db

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the embedded migration files, in the layout goose expects.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		// The directory is embedded at build time; its absence is a build defect.
		panic(fmt.Sprintf("db: embedded migrations missing: %v", err))
	}
	return sub
}

// Result reports what Migrate did.
type Result struct {
	// Applied lists the versions applied by this call (empty when already current).
	Applied []int64
	// Version is the schema version after the call.
	Version int64
}

// Migrate applies every pending embedded migration to the schema that the pool's
// search_path selects. It is idempotent and safe to run concurrently: a PostgreSQL
// advisory lock keyed by the target schema serialises concurrent runs.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (Result, error) {
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return Result{}, fmt.Errorf("db: read current schema: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("ilinkflow/migrate/" + schema))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64()>>1)),
		lock.WithLockTimeout(1, 600),
	)
	if err != nil {
		return Result{}, fmt.Errorf("db: migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer func() { _ = sqlDB.Close() }()
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations(), opts...)
	if err != nil {
		return Result{}, fmt.Errorf("db: migration provider: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("db: apply migrations: %w", err)
	}
	out := Result{}
	for _, r := range results {
		out.Applied = append(out.Applied, r.Source.Version)
	}
	out.Version, err = provider.GetDBVersion(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("db: read schema version: %w", err)
	}
	return out, nil
}
