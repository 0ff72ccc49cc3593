// Package db holds the embedded PostgreSQL migrations of ilinkflow and applies them.
// The store's sqlc-generated queries (internal to it) are generated from the same
// migration files, so the schema has one source of truth.
//
// Migrations keep no session state, so they run through a pooler in transaction mode
// (PgBouncer) as well as directly: concurrent runs are serialised by a lock row in a
// table (goose's table locker, not a session-level advisory lock). A migration in a
// transaction sets its own lock_timeout and statement_timeout (SET LOCAL, through
// set_config(..., true)), which end with the transaction. A migration that runs without
// one (-- +goose NO TRANSACTION, which CREATE INDEX CONCURRENTLY needs) has no transaction
// to hold them, and a session setting would reach its statement through the pooler only
// by chance (and stay behind for another client), so the run bounds each of its statements
// from a connection of its own instead: it watches the statement in pg_stat_activity and
// pg_locks and cancels it at the same bounds ([bounds]).
package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
	// LockTimeout is the PostgreSQL lock_timeout of each migration's transaction, and the
	// bound of each lock wait of a statement of a migration without one.
	LockTimeout time.Duration
	// StatementTimeout is the PostgreSQL statement_timeout of each migration's transaction,
	// and the bound of each statement of a migration without one.
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
// that dies leaves it to expire within 30 s). A migration that waits for a lock longer
// than opts.LockTimeout, or runs a statement longer than opts.StatementTimeout, fails
// with an [*Error] with [CodeLockTimeout] or [CodeStatementTimeout]: rolled back when it
// runs in a transaction; without one (NO TRANSACTION), its statements before the one that
// failed stay applied, an index build it cut short leaves no invalid index, and the next
// run applies it from its first statement.
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
	// And one more for the watch of the statements that run outside a transaction, so that
	// the watch never waits for a connection the run holds. It connects on first use.
	wcfg := appPool.Config()
	wcfg.MinConns, wcfg.MaxConns = 0, 1
	watchPool, err := pgxpool.NewWithConfig(ctx, wcfg)
	if err != nil {
		return Result{}, &Error{Code: CodeFailed, Msg: "cannot open the migration connections", Err: err}
	}
	defer watchPool.Close()
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
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sqlDB := sql.OpenDB(timeoutConnector{Connector: stdlib.GetPoolConnector(pool), bounds: &bounds{
		lockTimeout: opts.LockTimeout, statementTimeout: opts.StatementTimeout, watch: watchPool, logger: logger}})
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
	var be *boundError
	switch {
	case errors.As(err, &be) && be.code == CodeLockTimeout:
		return &Error{Code: CodeLockTimeout, Version: version, Err: err,
			Msg: fmt.Sprintf("a statement waited longer than the lock timeout (%v) for a lock that other sessions hold (a concurrent index build also waits, as for a lock, for older transactions to end); the migration runs without a transaction, so its statements before that one stay applied and it is safe to run again: run it again when the tables are less busy, or raise the lock timeout", opts.LockTimeout)}
	case errors.As(err, &be):
		return &Error{Code: CodeStatementTimeout, Version: version, Err: err,
			Msg: fmt.Sprintf("a statement ran longer than the statement timeout (%v); the migration runs without a transaction, so its statements before that one stay applied and it is safe to run again: raise the statement timeout for this run", opts.StatementTimeout)}
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

// timeoutConnector opens the migration connections. A transaction begins by setting
// lock_timeout and statement_timeout for itself only (set_config with is_local), so no
// setting outlives it on a pooled server connection; a statement outside a transaction
// runs within the same bounds, enforced by [bounds].
type timeoutConnector struct {
	driver.Connector
	bounds *bounds
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
	return &timeoutConn{Conn: sc, b: c.bounds}, nil
}

// timeoutConn is a pgx stdlib connection whose transactions set the migration timeouts
// and whose statements outside a transaction run within the same bounds.
type timeoutConn struct {
	*stdlib.Conn
	b *bounds
	// inTx: a transaction begun by BeginTx is open (database/sql uses a connection from
	// one goroutine at a time).
	inTx bool
}

// BeginTx begins a transaction and sets its lock_timeout and statement_timeout.
func (t *timeoutConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := t.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := t.Conn.ExecContext(ctx, "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)",
		[]driver.NamedValue{{Ordinal: 1, Value: pgDuration(t.b.lockTimeout)}, {Ordinal: 2, Value: pgDuration(t.b.statementTimeout)}}); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("set the migration's timeouts: %w", err)
	}
	t.inTx = true
	return &timeoutTx{Tx: tx, conn: t}, nil
}

// ExecContext runs a statement: in a transaction, bounded by the transaction's settings;
// outside one, a statement of a NO TRANSACTION migration (goose runs those without
// arguments) through [bounds.exec]. goose's own statements with arguments (its version
// and lock rows) run as they are: quick, and unique marked texts would only fill pgx's
// statement cache.
func (t *timeoutConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if t.inTx || len(args) > 0 {
		return t.Conn.ExecContext(ctx, query, args)
	}
	return t.b.exec(ctx, t.Conn, query)
}

// timeoutTx is a transaction of a timeoutConn: its end is the end of the connection's
// transaction.
type timeoutTx struct {
	driver.Tx
	conn *timeoutConn
}

func (x *timeoutTx) Commit() error {
	x.conn.inTx = false
	return x.Tx.Commit()
}

func (x *timeoutTx) Rollback() error {
	x.conn.inTx = false
	return x.Tx.Rollback()
}

// Bounds of a statement outside a transaction.
//
// PostgreSQL takes lock_timeout and statement_timeout from the session or the transaction
// only, and a statement outside a transaction has neither that the run may set: through
// PgBouncer in transaction mode, a session SET before the statement may land on another
// server connection than the statement (and stay there, for another client), and the SET
// cannot share the statement's transaction, because CREATE INDEX CONCURRENTLY refuses to
// run in a transaction block, which a multi-statement query string is (implicitly) as is
// a pipeline of statements before one Sync ("cannot be executed within a pipeline").
//
// So the run watches the statement from a connection of its own: the statement carries
// a random marker (a leading comment) by which the watch finds its backend in
// pg_stat_activity, whichever server connection it runs on; the watch cancels it
// (pg_cancel_backend) once it has waited for one lock longer than the lock timeout
// (pg_locks.waitstart: table locks, and the waits of a concurrent index build for older
// transactions, as lock_timeout counts them) or has run longer than the statement timeout
// (pg_stat_activity.query_start). The check and the cancel are one statement, so a
// backend that ended the marked statement just then (and, behind PgBouncer, began another
// client's) has microseconds to do so before the cancel arrives; a cancel that finds it
// idle is ignored.
const (
	// watchEvery is how often the watch looks: a bound holds within this much.
	watchEvery = 100 * time.Millisecond
	// clientGrace is how long after its statement timeout a statement's own context
	// ends (pgx then sends a cancel request and closes the connection), should the watch
	// not have cancelled it by then (say, its connection failed).
	clientGrace = 30 * time.Second
	// markerPrefix starts the comment that marks a watched statement.
	markerPrefix = "/* ilinkflow migration statement "
)

// watchQuery finds the statement marked $1, says which bound it passed (lock timeout $2,
// statement timeout $3, in seconds) and cancels it; no row: it passed none (or has
// ended). The cancel is in the select list, evaluated only for the rows the WHERE keeps.
const watchQuery = `SELECT s.bound, pg_cancel_backend(s.pid)
FROM (
    SELECT a.pid,
        CASE
            WHEN EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted
                         AND l.waitstart <= clock_timestamp() - make_interval(secs => $2)) THEN 'lock'
            WHEN a.query_start <= clock_timestamp() - make_interval(secs => $3) THEN 'statement'
        END AS bound
    FROM pg_stat_activity a
    WHERE a.state = 'active' AND starts_with(a.query, $1) AND a.pid <> pg_backend_pid()
    OFFSET 0
) s
WHERE s.bound IS NOT NULL`

// bounds runs the statements outside a transaction within the run's lock and statement
// timeouts.
type bounds struct {
	lockTimeout, statementTimeout time.Duration
	// watch is the watch's connection, apart from the run's.
	watch  *pgxpool.Pool
	logger *slog.Logger
}

// boundError is a statement outside a transaction that the run cancelled at one of its
// bounds; code is CodeLockTimeout or CodeStatementTimeout.
type boundError struct {
	code  string
	bound time.Duration
	err   error
}

func (e *boundError) Error() string {
	what := "ran longer than"
	if e.code == CodeLockTimeout {
		what = "waited for a lock longer than"
	}
	return fmt.Sprintf("the migration run cancelled a statement that %s %v: %v", what, e.bound, e.err)
}

func (e *boundError) Unwrap() error { return e.err }

// exec runs one statement outside a transaction within the bounds.
//
// A CREATE INDEX CONCURRENTLY that fails (a bound, a duplicate key, a lost connection)
// leaves its index behind, INVALID: no query uses it, every write still maintains it, and
// IF NOT EXISTS would take it for built at the next run. So before such a build exec drops
// an invalid index of that name on that table (an earlier run's, cut short), and after a
// failed build the one the build left; a drop that fails is reported (before the build)
// or left to the next run (after it).
//
// On an empty table (a fresh installation, a new schema) the index is built plainly: a
// concurrent build waits for every transaction in the database older than itself, however
// unrelated, and on an empty table a plain build holds its lock for no time.
func (b *bounds) exec(ctx context.Context, conn *stdlib.Conn, query string) (driver.Result, error) {
	index, table, ok := concurrentIndexBuild(query)
	if ok {
		if err := b.dropInvalidIndex(ctx, conn, index, table); err != nil {
			return nil, err
		}
		var rows bool
		if err := conn.Conn().QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+table+")").Scan(&rows); err != nil {
			return nil, fmt.Errorf("look whether %s has rows: %w", table, err)
		}
		if !rows {
			query = concurrentlyRE.ReplaceAllString(query, "${1}")
		}
	}
	res, err := b.boundedExec(ctx, conn, query)
	if err != nil && ok && ctx.Err() == nil {
		if derr := b.dropInvalidIndex(ctx, conn, index, table); derr != nil {
			b.logger.Warn("migration: the invalid index a failed build left stays until the next run drops it",
				slog.String("index", index), slog.Any("err", derr))
		}
	}
	return res, err
}

// dropInvalidIndex drops (concurrently, within the bounds) the index named index on
// table when it is invalid; a valid one, or none, it leaves alone.
func (b *bounds) dropInvalidIndex(ctx context.Context, conn *stdlib.Conn, index, table string) error {
	var qualified string
	err := conn.Conn().QueryRow(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.indrelid = to_regclass($2) AND c.relname = $1 AND NOT i.indisvalid`, index, table).Scan(&qualified)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for an invalid index %s: %w", index, err)
	}
	b.logger.Warn("migration: dropping the invalid index a failed concurrent build left", slog.String("index", qualified))
	if _, err := b.boundedExec(ctx, conn, "DROP INDEX CONCURRENTLY IF EXISTS "+qualified); err != nil {
		return fmt.Errorf("drop the invalid index %s that a failed concurrent build left: %w", qualified, err)
	}
	return nil
}

// boundedExec runs query (a statement without arguments, which pgx sends as a simple
// query: one statement, the marker a comment of it) outside a transaction, marked and
// watched (see the bounds above).
func (b *bounds) boundedExec(ctx context.Context, conn *stdlib.Conn, query string) (driver.Result, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("mark the statement: %w", err)
	}
	marker := markerPrefix + hex.EncodeToString(raw[:]) + " */"
	sctx, cancel := context.WithTimeout(ctx, b.statementTimeout+clientGrace)
	defer cancel()
	done := make(chan struct{})
	cut := make(chan string, 1)
	go func() { cut <- b.watchStatement(ctx, marker, done) }()
	res, err := conn.ExecContext(sctx, marker+"\n"+query, nil)
	close(done)
	bound := <-cut
	if err == nil {
		return res, nil
	}
	var pg *pgconn.PgError
	switch {
	case bound == CodeLockTimeout && errors.As(err, &pg) && pg.Code == "57014":
		return nil, &boundError{code: CodeLockTimeout, bound: b.lockTimeout, err: err}
	case bound == CodeStatementTimeout && errors.As(err, &pg) && pg.Code == "57014":
		return nil, &boundError{code: CodeStatementTimeout, bound: b.statementTimeout, err: err}
	case ctx.Err() == nil && sctx.Err() != nil:
		return nil, &boundError{code: CodeStatementTimeout, bound: b.statementTimeout, err: err}
	}
	return nil, err
}

// watchStatement watches the statement marked marker until done is closed, and cancels
// it when it passes a bound: it returns the bound's code, or "" when the statement ended
// first.
func (b *bounds) watchStatement(ctx context.Context, marker string, done <-chan struct{}) string {
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-done:
			return ""
		case <-ctx.Done():
			return ""
		case <-tick.C:
		}
		var bound string
		var cancelled bool
		err := b.watch.QueryRow(ctx, watchQuery, marker, b.lockTimeout.Seconds(), b.statementTimeout.Seconds()).Scan(&bound, &cancelled)
		switch {
		case err == nil && cancelled && bound == "lock":
			return CodeLockTimeout
		case err == nil && cancelled:
			return CodeStatementTimeout
		case err == nil || errors.Is(err, pgx.ErrNoRows):
		case !warned:
			warned = true
			b.logger.Warn(fmt.Sprintf("migration: cannot watch a statement that runs outside a transaction: its lock waits are unbounded and it ends %v after its statement timeout", clientGrace),
				slog.Any("err", err))
		}
	}
}

// concurrentIndexBuild reports whether query is a CREATE [UNIQUE] INDEX CONCURRENTLY with
// a name, and returns the index's name (as PostgreSQL stores it) and its table (as
// written, for to_regclass).
func concurrentIndexBuild(query string) (index, table string, ok bool) {
	m := concurrentIndexRE.FindStringSubmatch(query)
	if m == nil {
		return "", "", false
	}
	index = m[1]
	if strings.HasPrefix(index, `"`) {
		index = strings.ReplaceAll(index[1:len(index)-1], `""`, `"`)
	} else {
		index = strings.ToLower(index)
	}
	return index, m[2], true
}

// concurrentlyRE matches the CONCURRENTLY of a CREATE INDEX CONCURRENTLY (its head before
// it in group 1).
var concurrentlyRE = regexp.MustCompile(`(?is)^((?:\s+|--[^\n]*\n|/\*.*?\*/)*CREATE\s+(?:UNIQUE\s+)?INDEX\s+)CONCURRENTLY\s+`)

// concurrentIndexRE matches the head of a named CREATE INDEX CONCURRENTLY (after any
// leading comments): the index name and the table.
var concurrentIndexRE = func() *regexp.Regexp {
	const ident = `(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)`
	return regexp.MustCompile(`(?is)^(?:\s+|--[^\n]*\n|/\*.*?\*/)*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?(` +
		ident + `)\s+ON\s+(?:ONLY\s+)?(` + ident + `(?:\s*\.\s*` + ident + `)?)`)
}()
