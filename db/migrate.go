// Package db holds the embedded PostgreSQL migrations of ilinkflow and applies them.
// The sqlc-generated queries live in the dbq subpackage; sqlc reads the same migration
// files, so the schema has one source of truth.
//
// Migrations keep no session state, so they run through a pooler in transaction mode
// (PgBouncer) as well as directly: concurrent runs are serialised by a lock row in a
// table (goose's table locker, not a session-level advisory lock), and each migration's
// transaction sets its own lock_timeout and statement_timeout (SET LOCAL, through
// set_config(..., true)), which end with the transaction.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// Defaults of the migration settings.
const (
	// DefaultLockTimeout is how long a migration statement waits for a table lock. While
	// it waits, every statement that needs that table queues behind it, so it is short:
	// a migration that cannot get its lock fails (and is run again later) rather than
	// stall production writes.
	DefaultLockTimeout = 10 * time.Second
	// DefaultStatementTimeout bounds one migration statement (a rewrite of a large table
	// may need more: raise it for that run).
	DefaultStatementTimeout = 15 * time.Minute
	// DefaultLockWait is how long a run waits for another run's migration lock.
	DefaultLockWait = 10 * time.Minute
)

// LockTable is the table (in the migrated schema) whose row serialises migration runs.
const LockTable = "goose_lock"

// Options are the settings of a migration run; zero values take the defaults.
type Options struct {
	// Logger receives goose's progress (nil: none).
	Logger *slog.Logger
	// LockTimeout is the PostgreSQL lock_timeout of each migration's transaction.
	LockTimeout time.Duration
	// StatementTimeout is the PostgreSQL statement_timeout of each migration's transaction.
	StatementTimeout time.Duration
	// LockWait bounds the wait for the migration lock another run holds.
	LockWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.LockWait <= 0 {
		o.LockWait = DefaultLockWait
	}
	return o
}

// Result reports what Migrate did.
type Result struct {
	// Applied lists the versions applied by this call (empty when already current).
	Applied []int64
	// Version is the schema version after the call.
	Version int64
}

// Migrate applies every pending embedded migration with the default settings
// ([MigrateWith]).
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (Result, error) {
	return MigrateWith(ctx, pool, Options{Logger: logger})
}

// MigrateWith applies every pending embedded migration to the schema that the pool's
// search_path selects. It is idempotent and safe to run concurrently, also through a
// pooler in transaction mode: a lock row in [LockTable] serialises concurrent runs (a run
// that dies leaves it to expire within 30 s). A migration that waits for a table lock
// longer than opts.LockTimeout, or runs a statement longer than opts.StatementTimeout,
// is rolled back and reported as an [*Error] with [CodeLockTimeout] or
// [CodeStatementTimeout].
func MigrateWith(ctx context.Context, pool *pgxpool.Pool, opts Options) (Result, error) {
	return migrateFS(ctx, pool, Migrations(), opts)
}

// migrateFS is MigrateWith for the migrations in fsys (tests use their own).
func migrateFS(ctx context.Context, appPool *pgxpool.Pool, fsys fs.FS, opts Options) (Result, error) {
	opts = opts.withDefaults()
	// A pool of its own: the lock's heartbeat and the migrations each hold a connection,
	// so a run on the caller's pool would wait forever for a second connection of a pool
	// of one.
	cfg := appPool.Config()
	cfg.MinConns, cfg.MaxConns = 0, 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "cannot open the migration connections", Err: err}
	}
	defer pool.Close()
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "cannot read the current schema", Err: err}
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("ilinkflow/migrate/" + schema))
	lockOpts := []lock.TableLockerOption{
		lock.WithTableName(LockTable),
		lock.WithTableLockID(int64(h.Sum64()>>1) | 1), // positive
		lock.WithTableLeaseDuration(30 * time.Second),
		lock.WithTableHeartbeatInterval(5 * time.Second),
		lock.WithTableLockTimeout(time.Second, uint64(max(1, opts.LockWait/time.Second))),
		lock.WithTableUnlockTimeout(time.Second, 30),
	}
	if opts.Logger != nil {
		lockOpts = append(lockOpts, lock.WithTableLogger(opts.Logger))
	} else {
		lockOpts = append(lockOpts, lock.WithTableLogger(slog.New(slog.DiscardHandler)))
	}
	locker, err := lock.NewPostgresTableLocker(lockOpts...)
	if err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "migration lock", Err: err}
	}
	sqlDB := sql.OpenDB(timeoutConnector{Connector: stdlib.GetPoolConnector(pool),
		lockTimeout: pgDuration(opts.LockTimeout), statementTimeout: pgDuration(opts.StatementTimeout)})
	defer func() { _ = sqlDB.Close() }()
	popts := []goose.ProviderOption{goose.WithLocker(locker)}
	if opts.Logger != nil {
		popts = append(popts, goose.WithSlog(opts.Logger))
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys, popts...)
	if err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "migration provider", Err: err}
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return Result{}, classify(err, opts)
	}
	out := Result{}
	for _, r := range results {
		out.Applied = append(out.Applied, r.Source.Version)
	}
	out.Version, err = provider.GetDBVersion(ctx)
	if err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "cannot read the schema version", Err: err}
	}
	return out, nil
}

// pgDuration renders d as a PostgreSQL duration setting in milliseconds.
func pgDuration(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// classify turns a failed run into an *Error naming the cause.
func classify(err error, opts Options) error {
	var version int64
	var pe *goose.PartialError
	if errors.As(err, &pe) && pe.Failed != nil && pe.Failed.Source != nil {
		version = pe.Failed.Source.Version
	}
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg) && pg.Code == "55P03": // lock_not_available
		return &Error{Code: CodeLockTimeout, Version: version, Err: err,
			Msg: fmt.Sprintf("waited longer than the lock timeout (%v) for a table lock that other sessions hold; nothing of this migration was applied: run it again when the table is less busy, or raise the lock timeout", opts.LockTimeout)}
	case errors.As(err, &pg) && pg.Code == "57014" && strings.Contains(pg.Message, "statement timeout"):
		return &Error{Code: CodeStatementTimeout, Version: version, Err: err,
			Msg: fmt.Sprintf("a statement ran longer than the statement timeout (%v); nothing of this migration was applied: raise the statement timeout for this run", opts.StatementTimeout)}
	case strings.Contains(err.Error(), "acquire lock"):
		return &Error{Code: CodeLockBusy, Err: err,
			Msg: fmt.Sprintf("another migration run held the migration lock (table %s) for longer than %v", LockTable, opts.LockWait)}
	}
	return &Error{Code: CodeFailed, Version: version, Msg: "applying the migrations failed", Err: err}
}

// timeoutConnector opens the migration connections: each transaction begins by setting
// lock_timeout and statement_timeout for itself only (set_config with is_local), so no
// setting outlives it on a pooled server connection.
type timeoutConnector struct {
	driver.Connector
	lockTimeout, statementTimeout string
}

// Connect wraps the pool's connection so that its transactions set the timeouts.
func (c timeoutConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("db: unexpected driver connection %T", conn)
	}
	return &timeoutConn{Conn: sc, c: c}, nil
}

// timeoutConn is a pgx stdlib connection whose transactions set the migration timeouts.
type timeoutConn struct {
	*stdlib.Conn
	c timeoutConnector
}

// BeginTx begins a transaction and sets its lock_timeout and statement_timeout.
func (t *timeoutConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := t.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := t.Conn.ExecContext(ctx, "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)",
		[]driver.NamedValue{{Ordinal: 1, Value: t.c.lockTimeout}, {Ordinal: 2, Value: t.c.statementTimeout}}); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("set the migration's timeouts: %w", err)
	}
	return tx, nil
}
