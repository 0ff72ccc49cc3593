package webui_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/webui"
)

// The login throttle's tests need PostgreSQL only: a login never asks Temporal, so the
// handlers get a Temporal client that is never dialled.

// throttleWorkers returns n web UIs as n worker processes would have them: one schema,
// and each its own pool and store. FailedLoginEvery is an hour, so that the time a test
// takes never refills a wrong token.
func throttleWorkers(t *testing.T, n int) []http.Handler {
	t.Helper()
	first := dbtest.NewPool(t)
	var schema string
	if err := first.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	hs := make([]http.Handler, n)
	for i := range hs {
		pool := first
		if i > 0 {
			var err error
			if pool, err = pgxpool.New(context.Background(), dbtest.SchemaURL(schema)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
		}
		hs[i] = throttledUI(t, pool, nil)
	}
	return hs
}

// throttledUI is a web UI on pool whose Temporal client is never dialled.
func throttledUI(t *testing.T, pool *pgxpool.Pool, configure func(*webui.Config)) http.Handler {
	t.Helper()
	st, err := store.New(pool, keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	cfg := webui.Config{Temporal: tc, Store: st, OperatorToken: tokenSecret(), FailedLoginEvery: time.Hour}
	if configure != nil {
		configure(&cfg)
	}
	h, err := webui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// throttledOf sends 100 wrong tokens from one address, round-robin over hs, and returns
// how many were throttled (429).
func throttledOf(t *testing.T, hs []http.Handler) int {
	t.Helper()
	throttled := 0
	for i := range 100 {
		switch rec := loginFrom(hs[i%len(hs)], "203.0.113.7:40000", "wrong-token-"+operatorToken); rec.Code {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			throttled++
		default:
			t.Fatalf("wrong token %d on worker %d: %d", i, i%len(hs), rec.Code)
		}
	}
	return throttled
}

// Three workers behind a load balancer count the same wrong tokens: 100 of them from one
// address spread over three workers are throttled exactly as 100 on one worker are (all
// but the burst), and the correct token from another address still logs in on each.
func TestAHundredWrongTokensSpreadOverThreeWorkersAreThrottledAsOnOne(t *testing.T) {
	t.Parallel()
	one := throttledOf(t, throttleWorkers(t, 1))
	three := throttleWorkers(t, 3)
	spread := throttledOf(t, three)
	if one != 100-webui.LoginBurst || spread != one {
		t.Fatalf("throttled of 100 wrong tokens: %d on one worker, %d spread over three; want %d each", one, spread, 100-webui.LoginBurst)
	}
	for i, h := range three {
		if rec := loginFrom(h, "203.0.113.7:40001", operatorToken); rec.Code != http.StatusTooManyRequests || len(rec.Result().Cookies()) != 0 {
			t.Errorf("worker %d: the throttled address got %d with the right token", i, rec.Code)
		}
		if rec := loginFrom(h, fmt.Sprintf("198.51.100.%d:50000", 20+i), operatorToken); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
			t.Errorf("worker %d: the operator's address got %d", i, rec.Code)
		}
	}
}

// A login the throttle cannot be asked about is not looked at: with the throttle's rows
// held by another transaction past the page's timeout, the right token answers 503 as a
// page does when PostgreSQL is away, and no session; so does a wrong one, with the same
// page, so that the answer says nothing of the token. It logs in once the rows are free.
func TestALoginIsNotLookedAtWhenTheThrottleCannotBeAsked(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	h := throttledUI(t, pool, func(c *webui.Config) { c.Timeout = time.Second })
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE webui_login_throttle IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, tok := range []string{operatorToken, "wrong-token-" + operatorToken} {
		began := time.Now()
		rec := loginFrom(h, "198.51.100.20:50000", tok)
		took := time.Since(began)
		if rec.Code != http.StatusServiceUnavailable || len(rec.Result().Cookies()) != 0 || !strings.Contains(rec.Body.String(), "Cannot reach PostgreSQL") {
			t.Fatalf("with the throttle unreachable, a login answered %d %v", rec.Code, rec.Result().Cookies())
		}
		if took > 3*time.Second {
			t.Errorf("the login took %v to say PostgreSQL cannot be reached", took)
		}
		bodies = append(bodies, rec.Body.String())
	}
	if bodies[0] != bodies[1] {
		t.Error("with the throttle unreachable, a right and a wrong token answer different pages")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := loginFrom(h, "198.51.100.20:50000", operatorToken); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
		t.Fatalf("once the throttle answers, the right token got %d", rec.Code)
	}
}

// With PostgreSQL itself away, the login says so within its timeout, as the pages do, and
// works again once it answers.
func TestWithPostgreSQLAwayTheLoginSaysSoWithinItsTimeout(t *testing.T) {
	t.Parallel()
	cc, err := pgxpool.ParseConfig(dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.New(net.JoinHostPort(cc.ConnConfig.Host, strconv.Itoa(int(cc.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	})
	h := throttledUI(t, pool, func(c *webui.Config) { c.Timeout = time.Second })
	if rec := loginFrom(h, "198.51.100.20:50000", operatorToken); rec.Code != http.StatusSeeOther {
		t.Fatalf("before the outage the right token got %d", rec.Code)
	}
	proxy.Blackhole()
	for _, tok := range []string{operatorToken, "wrong-token-" + operatorToken} {
		began := time.Now()
		rec := loginFrom(h, "198.51.100.20:50000", tok)
		took := time.Since(began)
		if rec.Code != http.StatusServiceUnavailable || len(rec.Result().Cookies()) != 0 || !strings.Contains(rec.Body.String(), "Cannot reach PostgreSQL") {
			t.Fatalf("with PostgreSQL away, a login answered %d %v", rec.Code, rec.Result().Cookies())
		}
		if took > 3*time.Second {
			t.Errorf("the login took %v to say PostgreSQL cannot be reached", took)
		}
	}
	proxy.Restore()
	testkit.Eventually(t, "the right token logs in again", 30*time.Second, func() (bool, error) {
		return loginFrom(h, "198.51.100.20:50000", operatorToken).Code == http.StatusSeeOther, nil
	})
}
