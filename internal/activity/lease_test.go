package activity

import (
	"errors"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// A renewal answers only for the leases it renewed: when a poll releases its lease while a
// renewal is in flight and the next poll of the bot on this worker takes it again before
// the renewal's answer is read, the answer (without the lease: it was free when the
// renewal ran) does not make the new poll lose its lease. Seen on a busy machine as a
// poll's "poll lease lost: lease taken over" right after the previous poll of its bot.
func TestARenewalInFlightDoesNotJudgeALeaseTakenAfterItStarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.LeaseTTL, c.LeaseRenewEvery = time.Hour, 20*time.Minute } // no renewal but the test's
	})
	k := h.acts.keeper()
	old, err := k.take(h.ctx, activities.PollInput{AccountKey: h.key, LeaseEpoch: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}

	// The old poll's release, held uncommitted so that the renewal waits for it.
	tx, err := h.pool.Begin(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(h.ctx)
	var releaser int
	if err := tx.QueryRow(h.ctx, `UPDATE poll_leases SET holder = NULL, expires_at = clock_timestamp()
		WHERE account_key = $1 RETURNING pg_backend_pid()`, h.key).Scan(&releaser); err != nil {
		t.Fatal(err)
	}
	renewed := make(chan bool, 1)
	go func() { renewed <- k.renew(time.Minute) }()
	var renewer int
	testkit.Eventually(t, "the renewal waits for the release", time.Minute, func() (bool, error) {
		err := h.pool.QueryRow(h.ctx, `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, releaser).Scan(&renewer)
		return err == nil, err
	})

	// The renewal runs once the release commits (and finds the lease free); before its
	// answer is read, the bot's next poll on this worker takes the lease.
	k.mu.Lock()
	old.loseLocked("released")
	if err := tx.Commit(h.ctx); err != nil {
		k.mu.Unlock()
		t.Fatal(err)
	}
	testkit.Eventually(t, "the renewal ran", time.Minute, func() (bool, error) {
		// Once the renewal is done its connection goes back to the pool and may be the
		// one this query runs on: then it is active with this query, not the renewal.
		var done bool
		err := h.pool.QueryRow(h.ctx, `SELECT state <> 'active' OR pid = pg_backend_pid() FROM pg_stat_activity WHERE pid = $1`, renewer).Scan(&done)
		return err == nil && done, err
	})
	claim := store.PollLease{AccountKey: h.key, Holder: k.holder, Epoch: 2, Attempt: 1}
	if taken, _, err := h.store.TakePollLease(h.ctx, claim, h.acts.cfg().LeaseTTL); err != nil || !taken {
		k.mu.Unlock()
		t.Fatalf("the next poll's take: %v %v", taken, err)
	}
	next := &pollLease{k: k, claim: claim, lost: make(chan struct{}), validUntil: time.Now().Add(localValidity(h.acts.cfg().LeaseTTL))}
	k.held[h.key] = next
	k.mu.Unlock()

	<-renewed
	if err := next.check(); err != nil {
		t.Fatalf("the next poll's lease after a renewal that started before it was taken: %v", err)
	}
	next.release(h.ctx)
}

// A worker hands on what it polls beyond its fair share and a tenth of it, and nothing when
// it is alone or near its share: after a restart the long-lived workers give bots to the
// new one, and workers near their share do not trade bots back and forth.
func TestAWorkerHandsOnOnlyThePollsBeyondItsShareAndATenth(t *testing.T) {
	for _, c := range []struct {
		mine, workers, bots, want int
	}{
		{mine: 300, workers: 1, bots: 300, want: 0},            // alone: everything is its share
		{mine: 150, workers: 3, bots: 300, want: 40},           // share 100, a tenth 10
		{mine: 110, workers: 3, bots: 300, want: 0},            // within a tenth of its share
		{mine: 111, workers: 3, bots: 300, want: 1},            // just over
		{mine: 200, workers: 2, bots: 200, want: 90},           // the other worker was just restarted
		{mine: 5, workers: 3, bots: 8, want: 1},                // share 3 (rounded up), at least 1 more
		{mine: 4, workers: 3, bots: 8, want: 0},                //
		{mine: 0, workers: 3, bots: 300, want: 0},              // nothing to hand on
		{mine: 10, workers: 0, bots: 10, want: 0},              // no live worker counted (no liveness)
		{mine: 120, workers: 2, bots: 100, want: 120 - 50 - 5}, // read while bots were paused: more held than active
	} {
		if got := overload(c.mine, c.workers, c.bots); got != c.want {
			t.Errorf("overload(mine %d, workers %d, bots %d) = %d, want %d", c.mine, c.workers, c.bots, got, c.want)
		}
	}
}

// A worker frozen (SIGSTOP) between its lease check and the write of its next getupdates
// does not send that getupdates when it thaws past its lease's validity: the request
// carries the validity it was built under and is refused unwritten, so the bot, which
// another worker may poll by then, is never polled twice at once. The message iLink holds
// stays there for the lease's next holder.
func TestAPollFrozenBetweenItsLeaseCheckAndItsRequestNeverSendsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	k := h.acts.keeper()
	in := activities.PollInput{AccountKey: h.key, Generation: 1, LeaseEpoch: time.Now().UnixNano()}
	l, err := k.take(h.ctx, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.inject(ilinksim.InjectRequest{Text: "waits for the lease's next holder"})
	h.acts.hooks = &testHooks{beforeFetch: func(int) {
		// The freeze: the lease was valid at the check; the process resumes past it.
		k.mu.Lock()
		l.validUntil = time.Now().Add(-time.Millisecond)
		k.mu.Unlock()
	}}
	res, err := h.acts.pollLeased(h.ctx, in, l, time.Minute)
	if !errors.Is(err, errLeaseLost) || res.Pages != 0 {
		t.Fatalf("the thawed poll ended with %+v, %v; want its lease lost before any page", res, err)
	}
	st, err := h.ctl.BotState(h.ctx, h.bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 1 || st.Overlaps != 0 {
		t.Fatalf("bot state %+v: the thawed poll's getupdates reached iLink", st)
	}
}
