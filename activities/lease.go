package activities

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/activity"
)

// pollLeaseNamespace is the namespace of the poll leases' PostgreSQL advisory locks.
// (Sends need no lock: the store serializes and paces them under the account's row lock.)
const pollLeaseNamespace = "ilinkflow/poll-lease"

// lockKey derives the int64 key of an advisory lock from a namespace and an account key.
func lockKey(namespace, accountKey string) int64 {
	sum := sha256.Sum256([]byte(namespace + "\x00" + accountKey))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// lease is a session-level PostgreSQL advisory lock held on one pooled connection. The
// lock lives exactly as long as that connection's session: if the connection dies the
// lock is gone, which is why holders check the connection before acting on the lock.
type lease struct {
	conn *pgxpool.Conn
	key  int64
	once sync.Once
}

// tryLease takes the advisory lock key without waiting. It returns (nil, nil) when
// another session holds it.
func tryLease(ctx context.Context, pool *pgxpool.Pool, key int64) (*lease, error) {
	if pool == nil {
		return nil, errors.New("activities: no database pool for the lease")
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire lease connection: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Release()
		return nil, fmt.Errorf("take lease: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, nil
	}
	return &lease{conn: conn, key: key}, nil
}

// pid is the backend process id of the lease's session.
func (l *lease) pid() uint32 { return l.conn.Conn().PgConn().PID() }

// alive checks that the lease's session still exists (the lock is only held while it does).
func (l *lease) alive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := l.conn.Exec(ctx, "SELECT 1"); err != nil {
		return fmt.Errorf("lease connection lost: %w", err)
	}
	return nil
}

// release unlocks and returns the connection to the pool. When the unlock cannot be
// confirmed, the connection is closed instead (closing the session drops its locks).
// It is safe to call more than once.
func (l *lease) release(ctx context.Context) {
	l.once.Do(func() {
		uctx, cancel := detached(ctx, 5*time.Second)
		defer cancel()
		var ok bool
		if err := l.conn.QueryRow(uctx, "SELECT pg_advisory_unlock($1)", l.key).Scan(&ok); err != nil || !ok {
			_ = l.conn.Conn().Close(uctx)
		}
		l.conn.Release()
	})
}

// heartbeat records a heartbeat every period until the returned stop function is
// called; details() supplies the details of each one. It runs on its own goroutine
// because the activity's goroutine is blocked in long polls. None is recorded at once:
// the heartbeat timeout already counts from the activity's start, and Temporal Cloud
// bills each recorded heartbeat, so a send that ends within one period records none.
func heartbeat(ctx context.Context, period time.Duration, details func() any) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
