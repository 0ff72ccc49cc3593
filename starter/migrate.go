package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
)

// migrate applies the embedded migrations: "starter migrate" (the migration job of a
// deployment, or an operator before an upgrade). It takes the worker's migration
// timeouts, from flags or the same environment variables.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("migrate", help{"migrate [--database-url URL] [--lock-timeout D] [--statement-timeout D]",
		"Applies the embedded PostgreSQL schema migrations (idempotent, safe to run concurrently, also through PgBouncer in transaction mode).",
		"DATABASE_URL=postgres://postgres@127.0.0.1:5432/ilinkflow starter migrate"}, withDB, stderr, getenv)
	lockTimeout, err := envDuration(getenv, gateway.EnvMigrateLockTimeout, db.DefaultLockTimeout)
	if err != nil {
		return err
	}
	statementTimeout, err := envDuration(getenv, gateway.EnvMigrateStatementTimeout, db.DefaultStatementTimeout)
	if err != nil {
		return err
	}
	fs.DurationVar(&lockTimeout, "lock-timeout", lockTimeout,
		"how long a migration may wait for a table lock (queueing writes behind it) before it fails (env "+gateway.EnvMigrateLockTimeout+")")
	fs.DurationVar(&statementTimeout, "statement-timeout", statementTimeout,
		"how long one migration statement may run (env "+gateway.EnvMigrateStatementTimeout+")")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if lockTimeout <= 0 || statementTimeout <= 0 {
		return usagef("--lock-timeout and --statement-timeout must be positive")
	}
	pool, err := connectDB(ctx, c.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	res, err := db.MigrateWith(ctx, pool, db.Options{Logger: logger, LockTimeout: lockTimeout, StatementTimeout: statementTimeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema at version %d (%d migration(s) applied)\n", res.Version, len(res.Applied))
	return nil
}

// envDuration is the duration in the environment variable name, or def when it is unset.
func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	if getenv == nil {
		return def, nil
	}
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("environment variable %s=%q: want a positive duration such as 10s or 15m", name, v)
	}
	return d, nil
}
