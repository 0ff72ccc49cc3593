package activity

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Worker liveness (docs/poll-leases.md). A lease ttl tells a dead worker from a slow one
// only by waiting; a worker's own PostgreSQL session is observed instead: the server ends
// it within milliseconds of the process's death, because the process's socket closes.
// Each worker keeps one session of its own (not from the pool) with an open transaction
// that holds an advisory lock on a random key, the liveness key, for the life of the
// process, and stamps the key on every lease it takes. A peer's supervisor claims a lease
// whose key no session holds at once, instead of after the ttl. The transaction holds no
// snapshot and no row, so it keeps nothing from vacuum and blocks no DDL; through
// PgBouncer in transaction mode it keeps one server connection for itself (the lock
// lives with it, and PgBouncer closes that connection when the worker's goes away).
//
// A worker that loses its session while it lives (PostgreSQL restarted, the backend
// terminated) drops every lease taken under the key at once, since its peers may claim
// them, and opens a new session. Without a session (none could be opened, or the server
// could end a silent session sooner than a lease's local validity) leases are taken
// without a key and move only when they expire, as before.

// Back-off between attempts to open the liveness session.
const (
	livenessRetryFirst = 500 * time.Millisecond
	livenessRetryMax   = 10 * time.Second
)

// Liveness runs one worker's liveness session (StartLiveness).
type Liveness struct {
	a      *Activities
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{}
	once   sync.Once
	stop   sync.Once
}

// StartLiveness starts a's liveness session on its own connection (a.Pool's settings),
// reopened whenever it is lost, until Stop. Without a pool it does nothing (the leases of
// a's worker then move only when they expire).
func StartLiveness(a *Activities) *Liveness {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Liveness{a: a, cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
	go l.run(ctx)
	return l
}

// Ready is closed once the first session holds its key (or liveness is off).
func (l *Liveness) Ready() <-chan struct{} { return l.ready }

// Stop ends the session: its lock is released, so any lease still held moves at once. Call
// it after the worker handed its leases over. The worker's row stays: a peer's supervisor
// marks it dead as it does a crashed worker's, and so fails the poll activities Temporal
// handed this worker as it stopped that it never ran (each would otherwise wait out its
// start-to-close); the peer deletes the row later.
func (l *Liveness) Stop() {
	l.stop.Do(func() {
		l.cancel()
		<-l.done
	})
}

func (l *Liveness) markReady() { l.once.Do(func() { close(l.ready) }) }

func (l *Liveness) run(ctx context.Context) {
	defer close(l.done)
	defer l.markReady()
	a := l.a
	if a.Pool == nil {
		return
	}
	log := a.log().With("component", "liveness")
	wait := livenessRetryFirst
	for ctx.Err() == nil {
		conn, key, err := l.open(ctx)
		if errors.Is(err, errLivenessUntrusted) {
			log.Warn("this worker's bots move only after the lease ttl when it dies", "reason", err)
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("opening the liveness session failed; leases taken meanwhile move only when they expire", "error", err, "retry_in", wait)
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
				wait = min(2*wait, livenessRetryMax)
			}
			continue
		}
		wait = livenessRetryFirst
		a.keeper().setLivenessKey(key)
		l.markReady()
		// Nothing is sent on the session: a read returns only when the server ends it
		// (or ctx ends).
		err = conn.PgConn().WaitForNotification(ctx)
		a.keeper().livenessLost(key)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Close(cctx)
		cancel()
		if ctx.Err() == nil {
			log.Warn("the liveness session was lost: this worker's leases were dropped (peers may take them); opening a new one", "error", err)
			a.Metrics.LivenessLost()
		}
	}
}

// errLivenessUntrusted: the server may end a silent session sooner than a lease's local
// validity, so a session's end does not prove its worker dead.
var errLivenessUntrusted = errors.New("liveness untrusted")

// open opens the session, takes the lock on a new key and registers the worker with it.
func (l *Liveness) open(ctx context.Context) (*pgx.Conn, int64, error) {
	a := l.a
	cc := a.Pool.Config().ConnConfig.Copy()
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(octx, cc)
	if err != nil {
		return nil, 0, fmt.Errorf("connect: %w", err)
	}
	key, err := newLivenessKey()
	if err == nil {
		err = l.lock(octx, conn, key)
	}
	if err == nil {
		err = a.Store.RegisterPollWorker(octx, a.keeper().holder, key)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, 0, err
	}
	return conn, key, nil
}

// lock opens the session's transaction and takes the lock on key, after checking that the
// server cannot end a silent session before a lease's local validity ends.
func (l *Liveness) lock(ctx context.Context, conn *pgx.Conn, key int64) error {
	var interval, count, userTimeoutMS int
	if err := conn.QueryRow(ctx, `SELECT current_setting('tcp_keepalives_interval')::int,
		current_setting('tcp_keepalives_count')::int, current_setting('tcp_user_timeout')::int`).
		Scan(&interval, &count, &userTimeoutMS); err != nil {
		return fmt.Errorf("read the session's keepalive settings: %w", err)
	}
	validity := localValidity(l.a.cfg().LeaseTTL)
	if d := silentSessionEnd(interval, count, userTimeoutMS); d < validity {
		return fmt.Errorf("%w: PostgreSQL ends a session whose peer stopped answering after %v "+
			"(tcp_keepalives_interval × tcp_keepalives_count, or tcp_user_timeout), sooner than a lease's local validity (%v): "+
			"raise them or the lease ttl", errLivenessUntrusted, d, validity)
	}
	// One simple-protocol query, literal key, no result kept: the transaction stays open
	// holding the lock but no portal and so no snapshot (an extended-protocol statement's
	// portal would keep one, and with it an xmin that holds back vacuum and makes every
	// CREATE INDEX CONCURRENTLY in the database wait for this worker to exit).
	if _, err := conn.Exec(ctx, fmt.Sprintf(`BEGIN;
		SELECT set_config('idle_in_transaction_session_timeout', '0', true), set_config('statement_timeout', '0', true);
		SELECT pg_advisory_xact_lock(%d)`, key)); err != nil {
		return fmt.Errorf("take the liveness lock: %w", err)
	}
	return nil
}

// silentSessionEnd is the soonest PostgreSQL ends a session whose client stopped answering
// without closing its socket (a partition): the keepalive probes' interval × count, or the
// TCP user timeout when shorter. Zero settings are the operating system's defaults (Linux:
// 75 s × 9, no user timeout); a Unix socket has none and never ends silently.
func silentSessionEnd(intervalS, count, userTimeoutMS int) time.Duration {
	if intervalS <= 0 {
		intervalS = 75
	}
	if count <= 0 {
		count = 9
	}
	d := time.Duration(intervalS*count) * time.Second
	if userTimeoutMS > 0 {
		d = min(d, time.Duration(userTimeoutMS)*time.Millisecond)
	}
	return d
}

// newLivenessKey returns a random key in 1..2^62-1 (its high and low 32 bits are the
// advisory lock's classid and objid in pg_locks).
func newLivenessKey() (int64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if k := int64(binary.BigEndian.Uint64(b[:]) & (1<<62 - 1)); k != 0 {
			return k, nil
		}
	}
}

// WorkerIdentity is the name of a's worker process: the holder of its poll leases, its
// liveness row, and its Temporal worker identity (so that a peer can tell which started
// activities died with it).
func WorkerIdentity(a *Activities) string { return a.keeper().holder }
