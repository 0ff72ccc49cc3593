// Package store is the transactional store of ilinkflow on PostgreSQL: accounts and
// enrollment, the deduplicated inbox, reply windows, send attempts and agent sessions.
//
// Every exported operation validates its whole input before it writes, runs in exactly one
// transaction, takes the current time explicitly (it never reads the wall clock), and
// fails with an *Error carrying one of vocab's codes (docs/architecture.md#failure-codes).
// A failed operation writes nothing. Secrets (bot tokens, context tokens, image locators)
// are sealed with the store's key ring before they reach the database and are only
// returned as sealing.Secret.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Store is the transactional store. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	keys   *sealing.Keyring
	limits Limits
	// installation caches the installation's row once read (Installation).
	installation atomic.Pointer[wfapi.Installation]
}

// New returns a store over pool that seals secrets with keys and enforces limits.
func New(pool *pgxpool.Pool, keys *sealing.Keyring, limits Limits) (*Store, error) {
	if pool == nil || keys == nil {
		return nil, errors.New("store: pool and key ring are required")
	}
	if limits.WindowLifetime <= 0 || limits.MaxSends <= 0 || limits.MaxSends > maxSendIndex ||
		limits.MaxMergedSummaryBytes < 256 || limits.MaxTextBytes <= 0 || limits.MaxClockSkew < 0 ||
		limits.FinalSlots < 0 || limits.FinalSlots >= limits.MaxSends {
		return nil, fmt.Errorf("store: invalid limits %+v", limits)
	}
	return &Store{pool: pool, keys: keys, limits: limits}, nil
}

// Limits returns the limits the store enforces.
func (s *Store) Limits() Limits { return s.limits }

// inTx runs fn in one transaction and commits it when fn returns nil. Any error rolls the
// whole transaction back and is returned as a store error. The transaction is a pipeline
// (pipeline.go): BEGIN travels with the first statement, and batch-queued statements
// travel together.
func (s *Store) inTx(ctx context.Context, op string, fn func(q *dbq.Queries) error) error {
	return s.inPipeline(ctx, op, func(_ *pipeline, q *dbq.Queries) error { return fn(q) })
}

// inPipeline is inTx for a function that also steers the pipeline (commitQueued).
func (s *Store) inPipeline(ctx context.Context, op string, fn func(p *pipeline, q *dbq.Queries) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return wrapDB(op, err)
	}
	defer conn.Release() // a connection left inside a transaction is destroyed, not reused
	p := newPipeline(ctx, conn)
	err = fn(p, dbq.New(p))
	if err == nil {
		err = p.commit(ctx)
	}
	if err != nil {
		p.abort(ctx)
	}
	return wrapDB(op, err)
}

// read runs fn outside an explicit transaction (single-statement reads).
func (s *Store) read(ctx context.Context, op string, fn func(q *dbq.Queries) error) error {
	return wrapDB(op, fn(dbq.New(s.pool)))
}

// readOptional runs a statement that returns one row or none (found false) outside an
// explicit transaction, and converts a row it found.
func readOptional[R, T any](ctx context.Context, s *Store, op string, stmt func(q *dbq.Queries) (R, error), conv func(R) (T, error)) (T, bool, error) {
	var row R
	found := false
	var zero T
	err := s.read(ctx, op, func(q *dbq.Queries) error {
		var err error
		row, err = stmt(q)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return zero, false, err
	}
	out, err := conv(row)
	if err != nil {
		return zero, false, err
	}
	return out, true, nil
}

func validNow(now time.Time) error {
	if now.IsZero() || now.Year() < 2000 || now.Year() > 9999 {
		return fail(vocab.CodeInvalidInput, "now is invalid")
	}
	return nil
}

// notFound maps pgx.ErrNoRows to the given rule error and leaves other errors alone.
func notFound(err error, code vocab.Code, msg string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fail(code, "%s", msg)
	}
	return err
}
