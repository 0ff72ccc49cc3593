package e2e_test

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// behindPgBouncer moves the rig's workers onto a database of their own behind PgBouncer in
// transaction pooling mode (newPooledDatabase): the database is migrated, the rig's pool
// and store connect to it directly (the test's own checks), its DATABASE_URL goes through
// PgBouncer, and the rig's bot is registered there. The rig's schema, where the bot was
// registered first, is left unused.
func behindPgBouncer(t *testing.T, r *procRig) *pgBouncer {
	t.Helper()
	bouncer, direct := newPooledDatabase(t)
	pool, err := pgxpool.New(r.ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the database is dropped (cleanups run last first)
	if _, err := db.Migrate(r.ctx, pool, nil); err != nil {
		t.Fatalf("migrate the pooled database: %v", err)
	}
	st, err := store.New(pool, testkit.Keyring, r.limits)
	if err != nil {
		t.Fatal(err)
	}
	acct, err := storetest.RegisterAccount(r.ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: r.bot.BotID,
		OwnerPeerID: r.bot.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(r.bot.Token)})
	if err != nil {
		t.Fatal(err)
	}
	r.pool, r.store, r.acct, r.dbURL = pool, st, acct, bouncer.url()
	return bouncer
}

// stats is PgBouncer's SHOW STATS row of the pooled database (the admin console speaks the
// simple protocol only).
func (b *pgBouncer) stats(ctx context.Context) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, "postgres://"+url.PathEscape(b.user)+"@"+b.addr+"/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol")
	if err != nil {
		return nil, fmt.Errorf("PgBouncer's admin console: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, "SHOW STATS")
	if err != nil {
		return nil, fmt.Errorf("SHOW STATS: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("SHOW STATS: %w", err)
		}
		row := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			v := vals[i]
			if n, ok := v.(driver.Valuer); ok { // the counters are numeric
				v, _ = n.Value()
			}
			row[f.Name] = fmt.Sprint(v)
		}
		if row["database"] == b.alias {
			return row, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SHOW STATS: %w", err)
	}
	return nil, fmt.Errorf("SHOW STATS has no row of database %s", b.alias)
}

// queued is how many transactions PgBouncer ran for the pooled database so far and how
// long they waited for a server connection in all (SHOW STATS).
func (b *pgBouncer) queued(t *testing.T, ctx context.Context) (int64, time.Duration) {
	t.Helper()
	stats, err := b.stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	xacts, err1 := strconv.ParseInt(stats["total_xact_count"], 10, 64)
	waitedUS, err2 := strconv.ParseInt(stats["total_wait_time"], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("SHOW STATS: %v", stats)
	}
	return xacts, time.Duration(waitedUS) * time.Microsecond
}

// livenessKeys maps each registered worker's process id to its liveness key.
func livenessKeys(t *testing.T, r *procRig) map[int]int64 {
	t.Helper()
	rows, err := r.pool.Query(r.ctx, "SELECT holder, liveness_key FROM poll_workers")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var holder string
		var key int64
		if err := rows.Scan(&holder, &key); err != nil {
			t.Fatal(err)
		}
		out[holderPID(holder)] = key
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Through a real PgBouncer in transaction pooling mode (both workers' DATABASE_URL, the
// documented URL parameter, PgBouncer's 4 server connections), the bots of a worker that
// is SIGKILLed are each polled by the other worker within 5 s of the kill, as without
// PgBouncer: each worker's liveness session keeps one server connection in its open
// transaction, PgBouncer closes that connection when the dead worker's client connection
// goes away, so the liveness lock is released and the survivor's supervisor claims the
// dead worker's leases at its next scan. A message sent once they are polled again is
// answered once.
func TestThroughPgBouncerADeadWorkersBotsArePolledByAnotherWorkerWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	var arrivals *pollArrivals
	r := newProcRigWith(t, 2*time.Second, store.DefaultLimits(), procRigOptions{Wrap: func(h http.Handler) http.Handler {
		arrivals = newPollArrivals(h)
		return arrivals
	}})
	bouncer := behindPgBouncer(t, r)
	t.Logf("%s in transaction mode on %s, %d server connections", bouncer.version(), bouncer.addr, pgBouncerPoolSize)
	bots := addBots(t, r, 8)
	env := r.baseEnv(map[string]string{"ILINKFLOW_SEND_GAP": "5ms", "ILINKFLOW_HANDLER": "echo", "ILINKFLOW_MIGRATE": "false"})
	workers := []*crashWorker{{t: t, bin: r.bin, env: env, tap: r.tap}, {t: t, bin: r.bin, env: env, tap: r.tap}}
	for _, w := range workers {
		w.launch()
	}
	// Every lease held under a liveness key some session holds: the failover below is the
	// liveness session's, not the lease ttl's (30 s).
	testkit.Eventually(t, "every bot's lease held under a live liveness key", time.Minute, func() (bool, error) {
		var held, live int
		err := r.pool.QueryRow(r.ctx, `SELECT count(*), count(*) FILTER (WHERE holder_key IN (SELECT ilk_live_keys()))
			FROM poll_leases WHERE holder IS NOT NULL AND expires_at > clock_timestamp()`).Scan(&held, &live)
		if err == nil {
			err = fmt.Errorf("%d of %d leases held, %d under a live key", held, len(bots), live)
		}
		return held == len(bots) && live == held, err
	})
	f := startFailover(t, r, arrivals, bots, workers)
	victim := f.victim
	victimKey, ok := livenessKeys(t, r)[victim.current().pid]
	if !ok {
		t.Fatalf("the victim (pid %d) has no liveness row: %v", victim.current().pid, livenessKeys(t, r))
	}

	xactsBefore, waitedBefore := bouncer.queued(t, r.ctx)
	f.kill()
	killed := f.killed
	// PgBouncer closed the server connection of the dead worker's open transaction: no
	// session holds its key any more.
	testkit.Eventually(t, "the victim's liveness key released", failoverWithin, func() (bool, error) {
		var live bool
		err := r.pool.QueryRow(r.ctx, "SELECT $1::bigint IN (SELECT ilk_live_keys())", victimKey).Scan(&live)
		return err == nil && !live, err
	})
	released := time.Since(killed)
	worst := f.awaitRepolled()
	f.answeredOnceBySurvivor()

	// The workers' transactions and the survivor's liveness session shared PgBouncer's few
	// server connections.
	pools, err := bouncer.pools(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	servers := 0
	for _, col := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
		v, err := strconv.Atoi(pools[col])
		if err != nil {
			t.Fatalf("SHOW POOLS %s = %q: %v", col, pools[col], err)
		}
		servers += v
	}
	if pools["pool_mode"] != "transaction" || servers > pgBouncerPoolSize {
		t.Fatalf("PgBouncer's pool: mode %q (want transaction), %d server connections (want at most %d): %v",
			pools["pool_mode"], servers, pgBouncerPoolSize, pools)
	}
	// How long the workers' transactions queued for a server connection: the two liveness
	// sessions keep 2 of the 4 to themselves.
	xacts, waited := bouncer.queued(t, r.ctx)
	for _, w := range workers {
		for _, bad := range []string{"prepared statement", "SQLSTATE 42P05", "SQLSTATE 26000", "SQLSTATE 08P01"} {
			if out := w.current().log.String(); strings.Contains(out, bad) {
				t.Fatalf("worker pid %d logged %q through PgBouncer:\n%s", w.current().pid, bad, crashTail(out, 40))
			}
		}
	}
	t.Logf("SIGKILL of the worker holding %d of %d bots through PgBouncer: its liveness lock was gone within %v, "+
		"the last of its bots was polled again %v after the kill; PgBouncer: %s client connection(s) (%s waiting) on %d server connection(s), "+
		"%d transactions waited %v in all for one, %d of them since the kill %v",
		len(f.orphans), len(bots), released.Round(time.Millisecond), worst.Round(time.Millisecond),
		pools["cl_active"], pools["cl_waiting"], servers, xacts, waited.Round(time.Millisecond),
		xacts-xactsBefore, (waited - waitedBefore).Round(time.Millisecond))
	if worst > failoverWithin {
		t.Fatalf("a dead worker's bot was polled again %v after the kill through PgBouncer, want within %v", worst, failoverWithin)
	}
}
