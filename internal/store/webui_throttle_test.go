package store_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The login throttle reads the database's clock: a test moves time forward by moving every
// instant the throttle stored back by as much (age), never by sleeping. Intervals of an hour
// keep the seconds a test takes from refilling anything.

// slowRule is the console's rule with intervals of an hour.
func slowRule() store.LoginThrottle {
	return store.LoginThrottle{Burst: 10, Every: time.Hour, AllBurst: 100, AllEvery: time.Hour, MaxAddresses: 10000}
}

// attempt asks the throttle about one login and fails the test on an error.
func (e *env) attempt(rule store.LoginThrottle, addr string, wrong bool) bool {
	e.t.Helper()
	ok, err := e.store.WebUILoginAttempt(e.ctx, rule, addr, wrong)
	if err != nil {
		e.t.Fatalf("login attempt from %s: %v", addr, err)
	}
	return ok
}

// wrongTokens sends n wrong tokens from addr and returns how many were looked at.
func (e *env) wrongTokens(rule store.LoginThrottle, addr string, n int) int {
	e.t.Helper()
	let := 0
	for range n {
		if e.attempt(rule, addr, true) {
			let++
		}
	}
	return let
}

// age moves the throttle's time forward by d.
func (e *env) age(d time.Duration) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.ctx, `UPDATE webui_login_throttle
		SET full_at = full_at - $1::bigint * interval '1 microsecond', forget_at = forget_at - $1::bigint * interval '1 microsecond'`,
		d.Microseconds()); err != nil {
		e.t.Fatal(err)
	}
}

// used is how many tokens of a bucket are taken now (rounded: the test's seconds are
// nothing next to intervals of an hour).
func (e *env) used(scope, addr string, every time.Duration) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT COALESCE(round(GREATEST(extract(epoch FROM max(full_at) - clock_timestamp()), 0) / $3::float8), 0)::int
		FROM webui_login_throttle WHERE scope = $1 AND client_address = $2`, scope, addr, every.Seconds()).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestALoginAddressGetsItsBurstOfWrongTokensThenOnePerInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rule := slowRule()
	const addr = "203.0.113.7"
	// A right token from a clean address is looked at and writes nothing.
	if !e.attempt(rule, addr, false) || e.count(`SELECT count(*) FROM webui_login_throttle`) != 0 {
		t.Fatal("a right token from a clean address was refused or wrote a row")
	}
	if let := e.wrongTokens(rule, addr, 25); let != rule.Burst {
		t.Fatalf("%d of 25 wrong tokens were looked at, want the burst of %d", let, rule.Burst)
	}
	if e.attempt(rule, addr, false) {
		t.Fatal("the right token from the throttled address was looked at")
	}
	if got := e.used("address", addr, time.Hour); got != rule.Burst {
		t.Fatalf("the address's bucket has %d tokens taken, want %d (a refused attempt takes none)", got, rule.Burst)
	}
	e.age(time.Hour - time.Minute)
	if e.attempt(rule, addr, true) {
		t.Fatal("a wrong token was looked at before its interval passed")
	}
	e.age(time.Minute)
	if let := e.wrongTokens(rule, addr, 3); let != 1 {
		t.Fatalf("one interval later %d wrong tokens were looked at, want 1", let)
	}
	e.age(time.Hour)
	if !e.attempt(rule, addr, false) {
		t.Fatal("the right token was refused once the address had a token again")
	}
}

func TestTheCeilingHoldsBackOnlyAddressesThatSentAWrongTokenBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rule := slowRule()
	rule.AllBurst = 3
	if let := e.wrongTokens(rule, "203.0.113.1", 5); let != 3 {
		t.Fatalf("%d wrong tokens were looked at with a ceiling of 3", let)
	}
	// The ceiling is spent: a clean address is heard, once; after that it failed before.
	if !e.attempt(rule, "203.0.113.2", true) {
		t.Fatal("a clean address's first wrong token was held back by the ceiling")
	}
	if e.attempt(rule, "203.0.113.2", true) || e.attempt(rule, "203.0.113.2", false) {
		t.Fatal("an address that failed before was heard past the spent ceiling")
	}
	if !e.attempt(rule, "198.51.100.20", false) {
		t.Fatal("the right token from a clean address was held back by the ceiling")
	}
	// The ceiling refills one token per interval, for one remembered address.
	e.age(time.Hour)
	if !e.attempt(rule, "203.0.113.1", true) || e.attempt(rule, "203.0.113.2", true) {
		t.Fatal("one interval later the ceiling did not let exactly one wrong token in")
	}
	// An address is remembered for a whole bucket's refill after its last wrong token,
	// then it is clean again. (By then the ceiling is full again: another address spends
	// it.)
	e.age(time.Duration(rule.Burst)*time.Hour - time.Minute)
	if let := e.wrongTokens(rule, "203.0.113.9", 4); let != 3 {
		t.Fatalf("the refilled ceiling let %d wrong tokens in, want 3", let)
	}
	if e.attempt(rule, "203.0.113.1", false) {
		t.Fatal("an address was forgotten before a whole refill after its last wrong token")
	}
	e.age(time.Minute)
	if !e.attempt(rule, "203.0.113.1", false) {
		t.Fatal("an address was still held back a whole refill after its last wrong token")
	}
}

func TestBeyondMaxAddressesANewAddressCountsAsOneThatFailedBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rule := slowRule()
	rule.MaxAddresses, rule.AllBurst = 3, 4
	for i := range 3 {
		if !e.attempt(rule, fmt.Sprintf("203.0.113.%d", i), true) {
			t.Fatalf("address %d: its first wrong token was refused", i)
		}
	}
	// Three are remembered: a fourth address is heard on the ceiling's last token and is
	// not remembered; a fifth is not heard at all, not even with the right token.
	if !e.attempt(rule, "203.0.113.3", true) || e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address'`) != 3 {
		t.Fatal("beyond the bound a new address was refused while the ceiling had a token, or was remembered")
	}
	if e.attempt(rule, "203.0.113.4", true) || e.attempt(rule, "203.0.113.4", false) {
		t.Fatal("beyond the bound a new address was heard with the ceiling spent")
	}
	// Once the remembered ones are forgotten there is room again.
	e.age(time.Duration(rule.Burst) * time.Hour)
	if !e.attempt(rule, "203.0.113.4", true) {
		t.Fatal("a new address was refused after the remembered ones were forgotten")
	}
}

func TestForgottenAddressesAreDeletedAFewAtATimeByLaterWrongTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rule := slowRule()
	rule.AllBurst = 1000
	for i := range 40 {
		e.wrongTokens(rule, fmt.Sprintf("203.0.113.%d", i), 2)
	}
	e.age(time.Duration(rule.Burst) * time.Hour)
	// A right token and a refused attempt write nothing; a counted wrong token deletes
	// 16 forgotten rows at most and adds its own.
	e.attempt(rule, "198.51.100.1", false)
	if n := e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address'`); n != 40 {
		t.Fatalf("a right token changed the rows: %d", n)
	}
	e.attempt(rule, "198.51.100.1", true)
	if n := e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address'`); n != 40-16+1 {
		t.Fatalf("after one wrong token %d address rows, want %d", n, 40-16+1)
	}
	e.attempt(rule, "198.51.100.2", true)
	e.attempt(rule, "198.51.100.2", true)
	if n := e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address'`); n != 2 ||
		e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address' AND forget_at <= clock_timestamp()`) != 0 {
		t.Fatalf("after three wrong tokens %d address rows, want the 2 remembered", n)
	}
	// A forgotten address that comes back starts afresh with a whole burst.
	e.age(time.Duration(rule.Burst) * time.Hour)
	if let := e.wrongTokens(rule, "198.51.100.1", 12); let != rule.Burst {
		t.Fatalf("a forgotten address got %d wrong tokens, want a whole burst of %d", let, rule.Burst)
	}
}

// Concurrent workers never lose a count: on one address's row exactly its burst of
// wrong tokens is let in however many race for it, and on the ceiling's row every wrong
// token let in from many addresses at once is counted.
func TestConcurrentWrongTokensFromManyWorkersAreAllCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	workers := make([]*store.Store, 3)
	for i := range workers {
		s, err := store.New(e.pool, testKeys, store.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = s
	}
	rule := store.LoginThrottle{Burst: 5, Every: time.Hour, AllBurst: 100000, AllEvery: time.Hour, MaxAddresses: 10000}
	var let, errs atomic.Int64
	ask := func(i int, addr string) {
		ok, err := workers[i%len(workers)].WebUILoginAttempt(e.ctx, rule, addr, true)
		if err != nil {
			errs.Add(1)
			t.Error(err)
		}
		if ok {
			let.Add(1)
		}
	}
	// Rounds of 48 wrong tokens racing from one address each (a new address a round, so
	// that every round starts from a clean one and crosses its burst while the race is on).
	const rounds, racers = 10, 48
	for r := range rounds {
		addr := fmt.Sprintf("203.0.113.%d", r)
		let.Store(0)
		ccRace(racers, func(i int) { ask(i, addr) })
		if let.Load() != int64(rule.Burst) {
			t.Fatalf("round %d: %d of %d racing wrong tokens from one address were let in, want its burst of %d", r, let.Load(), racers, rule.Burst)
		}
		if got := e.used("address", addr, time.Hour); got != rule.Burst {
			t.Fatalf("round %d: the address's row counts %d wrong tokens, want %d", r, got, rule.Burst)
		}
	}
	// 24 goroutines, each 10 addresses of its own with 3 wrong tokens each: all are let in
	// (within every burst) and each takes a token of the ceiling's row.
	let.Store(0)
	ccRace(24, func(i int) {
		for a := range 10 {
			for range 3 {
				ask(i, fmt.Sprintf("2001:db8:%x:%x::/64", i, a))
			}
		}
	})
	if let.Load() != 24*10*3 || errs.Load() != 0 {
		t.Fatalf("%d of %d wrong tokens were let in (%d errors)", let.Load(), 24*10*3, errs.Load())
	}
	if got, want := e.used("all", "", time.Hour), rounds*rule.Burst+24*10*3; got != want {
		t.Fatalf("the ceiling counts %d wrong tokens, want %d", got, want)
	}
}

func TestALongOrUnprintableClientAddressIsKeptAsItsHashAndStillCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rule := slowRule()
	for _, addr := range []string{strings.Repeat("proxy-said-", 40), "bad\x00\xffaddress"} {
		if let := e.wrongTokens(rule, addr, 12); let != rule.Burst {
			t.Fatalf("%q: %d wrong tokens let in, want %d", addr, let, rule.Burst)
		}
	}
	if n := e.count(`SELECT count(*) FROM webui_login_throttle WHERE scope = 'address' AND client_address ~ '^sha256:[0-9a-f]{64}$'`); n != 2 {
		t.Fatalf("%d addresses kept as their hash, want 2", n)
	}
}

func TestALoginThrottleRuleOutsideItsLimitsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, r := range []store.LoginThrottle{
		{},
		{Burst: 10, Every: time.Hour, AllBurst: 100, AllEvery: time.Hour},
		{Burst: 10, Every: 0, AllBurst: 100, AllEvery: time.Hour, MaxAddresses: 1},
		{Burst: 0, Every: time.Hour, AllBurst: 100, AllEvery: time.Hour, MaxAddresses: 1},
	} {
		if _, err := e.store.WebUILoginAttempt(e.ctx, r, "203.0.113.7", true); store.CodeOf(err) != vocab.CodeInvalidInput {
			t.Errorf("%+v: %v", r, err)
		}
	}
}
