package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Poll leases (docs/poll-leases.md). A bot is polled by at most one PollAccount activity at
// a time: the activity holds the bot's lease row in PostgreSQL, taken before its first
// getupdates and renewed by its worker's lease keeper. Nothing pins a database connection:
// the keeper renews all of a worker's leases with one statement every LeaseRenewEvery.
// The lease replaces the Temporal heartbeat as the poll's liveness, so an idle bot costs
// no heartbeat actions; a worker's supervisor (SuperviseLeases) has the poller of a bot
// whose lease expired replace the dead activity.

// Defaults of the lease settings.
const (
	DefaultLeaseTTL = 30 * time.Second
)

// leaseKeeper renews the leases of one worker process.
type leaseKeeper struct {
	a      *Activities
	holder string

	mu      sync.Mutex
	held    map[string]*pollLease
	running bool
}

// pollLease is one lease a PollAccount activity holds.
type pollLease struct {
	k     *leaseKeeper
	claim store.PollLease
	lost  chan struct{}
	once  sync.Once
	// guarded by k.mu
	validUntil time.Time
	why        string
}

// newHolderID names this worker process in the lease rows (host, pid and a random part, so
// that a restarted process with the same pid is another holder).
func newHolderID() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func (a *Activities) keeper() *leaseKeeper {
	a.keeperOnce.Do(func() {
		a.leases = &leaseKeeper{a: a, holder: newHolderID(), held: map[string]*pollLease{}}
	})
	return a.leases
}

// take takes the bot's lease for one poll activity; errLeaseHeld when a live holder has it
// (a newer claim has asked it to let go).
func (k *leaseKeeper) take(ctx context.Context, accountKey string, epoch int64, attempt int32) (*pollLease, error) {
	cfg := k.a.cfg()
	claim := store.PollLease{AccountKey: accountKey, Holder: k.holder, Epoch: epoch, Attempt: attempt}
	start := time.Now()
	taken, _, err := k.a.Store.TakePollLease(ctx, claim, cfg.LeaseTTL)
	if err != nil {
		if pollStopCode(err) != "" {
			return nil, err // the account is gone: the caller stops
		}
		return nil, storeErr("take poll lease", err)
	}
	if !taken {
		return nil, errLeaseHeld
	}
	l := &pollLease{k: k, claim: claim, lost: make(chan struct{}), validUntil: start.Add(localValidity(cfg.LeaseTTL))}
	k.mu.Lock()
	if old := k.held[accountKey]; old != nil {
		old.loseLocked("taken by a newer poll on this worker")
	}
	k.held[accountKey] = l
	if !k.running {
		k.running = true
		go k.run()
	}
	k.mu.Unlock()
	return l, nil
}

// localValidity is how long after a renewal started the holder trusts its lease: less than
// the ttl counted by the database from a later instant, so a cut-off holder stops polling
// before anyone else may take the lease.
func localValidity(ttl time.Duration) time.Duration { return ttl * 8 / 10 }

// run renews the held leases every LeaseRenewEvery until none is held.
func (k *leaseKeeper) run() {
	every := k.a.cfg().LeaseRenewEvery
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if !k.renew(every) {
			return
		}
	}
}

// renew renews every held lease once; false when none is held (the loop ends).
func (k *leaseKeeper) renew(timeout time.Duration) bool {
	cfg := k.a.cfg()
	k.mu.Lock()
	if len(k.held) == 0 {
		k.running = false
		k.mu.Unlock()
		return false
	}
	keys := make([]string, 0, len(k.held))
	renewed := make(map[string]*pollLease, len(k.held))
	for key, l := range k.held {
		keys = append(keys, key)
		renewed[key] = l
	}
	k.mu.Unlock()

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	kept, err := k.a.Store.RenewPollLeases(ctx, k.holder, keys, cfg.LeaseTTL)
	cancel()
	k.a.Metrics.LeaseRenewal(err == nil)

	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.a.log().Warn("renewing poll leases failed", "leases", len(keys), "error", err)
		now := time.Now()
		for _, l := range k.held {
			if now.After(l.validUntil) {
				l.loseLocked("lease not renewed in time")
			}
		}
		return true
	}
	byKey := make(map[string]store.LeaseRenewal, len(kept))
	for _, r := range kept {
		byKey[r.AccountKey] = r
	}
	for _, key := range keys {
		l := k.held[key]
		if l != renewed[key] {
			// Released meanwhile, or released and taken again by a newer poll: the answer
			// (read before or after the release) says nothing of the lease held now.
			continue
		}
		r, ok := byKey[key]
		switch {
		case !ok || r.Epoch != l.claim.Epoch || r.Attempt != l.claim.Attempt:
			l.loseLocked("lease taken over")
		case r.Wanted:
			l.loseLocked("a newer poll asked for the lease")
		default:
			l.validUntil = start.Add(localValidity(cfg.LeaseTTL))
		}
	}
	return true
}

// loseLocked marks the lease lost (k.mu held): its poll stops fetching.
func (l *pollLease) loseLocked(why string) {
	l.once.Do(func() {
		l.why = why
		close(l.lost)
		if l.k.held[l.claim.AccountKey] == l {
			delete(l.k.held, l.claim.AccountKey)
		}
	})
}

// check returns errLeaseLost once the lease is lost or past its local validity.
func (l *pollLease) check() error {
	l.k.mu.Lock()
	defer l.k.mu.Unlock()
	if time.Now().After(l.validUntil) {
		l.loseLocked("lease not renewed in time")
	}
	select {
	case <-l.lost:
		return fmt.Errorf("%w: %s", errLeaseLost, l.why)
	default:
		return nil
	}
}

// release frees the lease row if this poll still holds it (best effort: an unreleased
// lease expires).
func (l *pollLease) release(ctx context.Context) {
	l.k.mu.Lock()
	l.loseLocked("released")
	l.k.mu.Unlock()
	rctx, cancel := detached(ctx, 5*time.Second)
	defer cancel()
	if _, err := l.k.a.Store.ReleasePollLease(rctx, l.claim); err != nil {
		l.k.a.log().Warn("releasing a poll lease failed (it expires)", "account", l.claim.AccountKey, "error", err)
	}
}

// LeaseSupervisor finds bots whose poll died with its worker (their lease expired) and has
// each bot's AccountPoller replace the dead poll activity. Every worker runs one; each
// expired lease is claimed by one supervisor, never by the holder's own worker (its poll
// is alive: after a database outage it commits the page it holds before it lets go).
type LeaseSupervisor struct {
	a *Activities
	// Every is the period of the scan (default LeaseRenewEvery).
	Every time.Duration
	// Grace is how long past its expiry a lease is left before it is claimed.
	Grace time.Duration

	mu sync.Mutex
	// untold are the leases claimed whose poller could not be told yet (Temporal
	// unreachable): the claim freed their rows, so no later scan finds them again; each
	// scan tells them first, until the signal is delivered or no poller runs.
	untold map[string]store.PollLease
}

// NewLeaseSupervisor returns the supervisor of a's leases.
func NewLeaseSupervisor(a *Activities) *LeaseSupervisor {
	return &LeaseSupervisor{a: a, Every: a.cfg().LeaseRenewEvery}
}

// Run scans every s.Every until ctx is done.
func (s *LeaseSupervisor) Run(ctx context.Context) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Once(ctx); err != nil && ctx.Err() == nil {
				s.a.log().Warn("poll lease supervision failed", "error", err)
			}
		}
	}
}

// maxClaimsPerScan bounds the pollers one scan signals.
const maxClaimsPerScan = 200

// Once claims the expired leases of active bots and signals their pollers; it returns
// how many pollers it told.
func (s *LeaseSupervisor) Once(ctx context.Context) (int, error) {
	if s.a.Temporal == nil {
		return 0, errors.New("activities: lease supervision needs a Temporal client")
	}
	inst, err := s.a.Store.Installation(ctx)
	if err != nil {
		return 0, err
	}
	dead, claimErr := s.a.Store.ClaimExpiredPollLeases(ctx, s.a.keeper().holder, s.Grace, maxClaimsPerScan)
	s.mu.Lock()
	if s.untold == nil {
		s.untold = map[string]store.PollLease{}
	}
	for _, l := range dead {
		if prev, ok := s.untold[l.AccountKey]; !ok || l.Epoch > prev.Epoch || (l.Epoch == prev.Epoch && l.Attempt > prev.Attempt) {
			s.untold[l.AccountKey] = l
		}
	}
	tell := make([]store.PollLease, 0, len(s.untold))
	for _, l := range s.untold {
		tell = append(tell, l)
	}
	s.mu.Unlock()
	n := 0
	for _, l := range tell {
		_, err := wfclient.SignalPoller(ctx, s.a.Temporal, inst, l.AccountKey, wfapi.SignalPollLost,
			wfapi.PollLostSignal{Epoch: l.Epoch, Attempt: l.Attempt})
		switch {
		case isNotFound(err):
			// No poller runs: the start-up reconcile of a worker starts it.
		case err != nil:
			s.a.log().Warn("telling a poller its poll activity died failed; told again at the next scan", "account", l.AccountKey, "error", err)
			continue
		}
		s.mu.Lock()
		if cur, ok := s.untold[l.AccountKey]; ok && cur == l {
			delete(s.untold, l.AccountKey)
		}
		s.mu.Unlock()
		s.a.log().Info("poll lease expired: the poller replaces its poll activity", "account", l.AccountKey)
		n++
	}
	return n, claimErr
}

// heartbeat records a heartbeat every period until the returned stop function is
// called; details() supplies the details of each one. It runs on its own goroutine
// because the activity's goroutine is blocked. None is recorded at once: the heartbeat
// timeout already counts from the activity's start, and Temporal Cloud bills each
// recorded heartbeat, so an activity that ends within one period records none. It does
// nothing for an activity scheduled without a heartbeat timeout.
func heartbeat(ctx context.Context, period time.Duration, details func() any) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout <= 0 {
		return func() {}
	}
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
