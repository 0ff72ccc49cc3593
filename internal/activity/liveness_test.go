package activity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// livenessBackend returns the backend (pid) of the session holding the liveness key and
// its xmin (nil: none).
func livenessBackend(t *testing.T, h *harness, key int64) (pid int, xmin *string, ok bool) {
	t.Helper()
	err := h.pool.QueryRow(h.ctx, `SELECT a.pid, a.backend_xmin::text FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid
		WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
		  AND ((k.classid::bigint << 32) | k.objid::bigint) = $1::bigint`, key).Scan(&pid, &xmin)
	if err != nil {
		return 0, nil, false
	}
	return pid, xmin, true
}

// A worker's liveness session holds its key for as long as it runs, with the worker's row
// registered, and keeps no snapshot: vacuum and CREATE INDEX CONCURRENTLY anywhere in the
// database go on beside it (an open transaction with an xmin would hold them until the
// worker exits). Leases taken meanwhile carry the key. Stop releases the key and deletes
// the row.
func TestTheLivenessSessionHoldsItsKeyAndNoSnapshotAndAStoppedWorkerIsMarkedDeadByAPeer(t *testing.T) {
	h := newHarness(t)
	live := StartLiveness(h.acts)
	select {
	case <-live.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the liveness session did not open")
	}
	k := h.acts.keeper()
	k.mu.Lock()
	key := k.livenessKey
	k.mu.Unlock()
	if key == 0 {
		t.Fatalf("no liveness key after Ready:\n%s", h.logs.String())
	}
	pid, xmin, ok := livenessBackend(t, h, key)
	if !ok {
		t.Fatal("no session holds the liveness key")
	}
	if xmin != nil {
		t.Fatalf("the liveness session (pid %d) holds xmin %s", pid, *xmin)
	}
	var registered int64
	if err := h.pool.QueryRow(h.ctx, "SELECT liveness_key FROM poll_workers WHERE holder = $1", WorkerIdentity(h.acts)).Scan(&registered); err != nil || registered != key {
		t.Fatalf("worker row: key %d, %v; want %d", registered, err, key)
	}
	// An index built concurrently while the session lives.
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	table := fmt.Sprintf("liveness_cic_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (x int); INSERT INTO "+table+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = h.pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) }()
	if _, err := conn.Exec(ctx, "SET lock_timeout = '20s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX CONCURRENTLY "+table+"_x ON "+table+" (x)"); err != nil {
		t.Fatalf("an index built concurrently beside the liveness session: %v", err)
	}
	if _, err := conn.Exec(ctx, "RESET lock_timeout"); err != nil {
		t.Fatal(err)
	}
	// A lease taken now carries the key.
	l, err := k.take(h.ctx, activities.PollInput{AccountKey: h.key, LeaseEpoch: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.claim.HolderKey != key {
		t.Fatalf("lease key %d, want %d", l.claim.HolderKey, key)
	}
	l.release(h.ctx)

	live.Stop()
	testkit.Eventually(t, "the liveness key released", 10*time.Second, func() (bool, error) {
		_, _, held := livenessBackend(t, h, key)
		return !held, nil
	})
	// A stopped worker is left for a peer to mark dead, as a crashed one is: the peer then
	// fails any poll activity Temporal handed it as it stopped.
	dead, err := h.acts.Store.MarkDeadPollWorkers(h.ctx, "a-peer")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Holder != k.holder {
		t.Fatalf("a peer marked %+v dead after Stop, want this worker (%s)", dead, k.holder)
	}
}

// A worker whose liveness session is ended by the server (a terminated backend, a
// restart) gives up every lease it took under that key at once, since a peer may now claim
// them (its polls fetch no more; a long poll in flight ends by itself, so that its page is
// not lost), and opens a new session with a new key.
func TestAWorkerThatLosesItsLivenessSessionDropsItsLeasesAndOpensANewOne(t *testing.T) {
	h := newHarness(t)
	live := StartLiveness(h.acts)
	defer live.Stop()
	<-live.Ready()
	k := h.acts.keeper()
	k.mu.Lock()
	key := k.livenessKey
	k.mu.Unlock()
	l, err := k.take(h.ctx, activities.PollInput{AccountKey: h.key, LeaseEpoch: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pid, _, ok := livenessBackend(t, h, key)
	if !ok {
		t.Fatal("no session holds the liveness key")
	}
	if _, err := h.pool.Exec(h.ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the lease taken under the lost session given up", 30*time.Second, func() (bool, error) {
		return l.check() != nil, nil
	})
	testkit.Eventually(t, "a new liveness session", 30*time.Second, func() (bool, error) {
		k.mu.Lock()
		now := k.livenessKey
		k.mu.Unlock()
		if now == 0 || now == key {
			return false, fmt.Errorf("key %d", now)
		}
		_, _, held := livenessBackend(t, h, now)
		return held, nil
	})
	// The peer's claim sees the dead key at once.
	dead, err := h.store.ClaimDeadPollLeases(h.ctx, "a-peer", time.Hour, 10, store.Adoptable{})
	if err != nil || len(dead) != 1 || !dead[0].HolderDied {
		t.Fatalf("claim after the session's loss: %+v %v", dead, err)
	}
}
