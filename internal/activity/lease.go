package activity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
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
	// polls counts the PollAccount activities running in this process, by bot.
	polls map[string]int
	// livenessKey is the key this worker's liveness session holds now (0: none).
	livenessKey int64
	// adopted runs the polls this worker adopted from dead workers.
	adopted *adoptions
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
	// sessionLost: the liveness session the lease was taken under is gone; the poll
	// fetches no more (check), its long poll in flight ends by itself.
	sessionLost bool
	// shed: this worker polls more than its share of the bots; the poll ends once its
	// long poll in flight ended (check) and goes on on another worker.
	shed bool
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
		a.leases = &leaseKeeper{a: a, holder: newHolderID(), held: map[string]*pollLease{}, adopted: newAdoptions()}
	})
	return a.leases
}

// take takes the bot's lease for one poll activity; errLeaseHeld when a live holder has it
// (a newer claim has asked it to let go).
func (k *leaseKeeper) take(ctx context.Context, in activities.PollInput, attempt int32) (*pollLease, error) {
	cfg := k.a.cfg()
	claim := store.PollLease{AccountKey: in.AccountKey, Holder: k.holder, Epoch: in.LeaseEpoch, Attempt: attempt,
		Generation: in.Generation, Probe: in.Probe}
	if activity.IsActivity(ctx) {
		claim.TaskToken = activity.GetInfo(ctx).TaskToken
	}
	k.mu.Lock()
	claim.HolderKey = k.livenessKey
	k.mu.Unlock()
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
	return k.hold(claim, start), nil
}

// hold records a lease this worker took (or adopted) with a statement that began at start,
// and keeps it renewed.
func (k *leaseKeeper) hold(claim store.PollLease, start time.Time) *pollLease {
	l := &pollLease{k: k, claim: claim, lost: make(chan struct{}), validUntil: start.Add(localValidity(k.a.cfg().LeaseTTL))}
	k.mu.Lock()
	if old := k.held[claim.AccountKey]; old != nil {
		old.loseLocked("taken by a newer poll on this worker")
	}
	k.held[claim.AccountKey] = l
	if !k.running {
		k.running = true
		go k.run()
	}
	k.mu.Unlock()
	return l
}

// polling records a PollAccount activity of the bot running in this process until the
// returned function is called.
func (k *leaseKeeper) polling(accountKey string) (done func()) {
	k.mu.Lock()
	if k.polls == nil {
		k.polls = map[string]int{}
	}
	k.polls[accountKey]++
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		if k.polls[accountKey]--; k.polls[accountKey] <= 0 {
			delete(k.polls, accountKey)
		}
		k.mu.Unlock()
	}
}

// pollsRunning reports whether a PollAccount activity of the bot runs in this process.
func (k *leaseKeeper) pollsRunning(accountKey string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.polls[accountKey] > 0
}

// setLivenessKey records the key the liveness session holds now: leases taken from now on
// carry it.
func (k *leaseKeeper) setLivenessKey(key int64) {
	k.mu.Lock()
	k.livenessKey = key
	k.mu.Unlock()
}

// livenessLost gives up every lease taken under key: the session that held it is gone, so a
// peer may claim them at once. Their polls fetch no more, but a long poll in flight is let
// end and its page committed: the session is lost with PostgreSQL (an outage, a restart)
// as often as with the process, and iLink hands a page out once.
func (k *leaseKeeper) livenessLost(key int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.livenessKey == key {
		k.livenessKey = 0
	}
	for _, l := range k.held {
		if l.claim.HolderKey == key {
			l.sessionLost = true
		}
	}
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
	if l.sessionLost {
		l.loseLocked("this worker's liveness session was lost")
	}
	select {
	case <-l.lost:
		return fmt.Errorf("%w: %s", errLeaseLost, l.why)
	default:
		return nil
	}
}

// sendBy is the last instant a request made under the lease may leave: its local
// validity now. A renewal later moves the validity on; a request built before a freeze
// (SIGSTOP) and written after it still carries the validity it was built under.
func (l *pollLease) sendBy() time.Time {
	l.k.mu.Lock()
	defer l.k.mu.Unlock()
	return l.validUntil
}

// adoptedElsewhere reports whether the lease was lost to a worker that adopted its poll
// activity attempt (it holds the lease under the same epoch and attempt): the lease expired
// while this worker was frozen or cut off. False when it was not lost, or when the store
// cannot tell (the attempt then ends here as any poll that lost its lease does).
func (l *pollLease) adoptedElsewhere(ctx context.Context) bool {
	if l.check() == nil {
		return false
	}
	rctx, cancel := detached(ctx, 5*time.Second)
	defer cancel()
	adopted, err := l.k.a.Store.PollAttemptAdopted(rctx, l.claim)
	return err == nil && adopted
}

// handOn reports errLeaseShed when the lease is marked to be handed on (shed), and gives it
// up. It is asked between two long polls only: a long poll in flight is never cut for it.
func (l *pollLease) handOn() error {
	l.k.mu.Lock()
	defer l.k.mu.Unlock()
	if !l.shed {
		return nil
	}
	l.loseLocked("handed on: this worker polls more than its share")
	return errLeaseShed
}

// shed marks up to n held leases to be handed on (the poll of each ends at its next check,
// between two long polls, so no page is at stake); it returns how many it marked and how
// many leases this worker keeps. Which ones is left to the map's order: any bot will do.
func (k *leaseKeeper) shed(n int) (marked, kept int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range k.held {
		switch {
		case l.shed || l.sessionLost:
		case marked < n:
			l.shed = true
			marked++
		default:
			kept++
		}
	}
	return marked, kept
}

// kept counts the held leases not marked to be handed on.
func (k *leaseKeeper) kept() int {
	_, kept := k.shed(0)
	return kept
}

// release frees the lease row if this poll still holds it (best effort: an unreleased
// lease expires). A lease handed on, or handed over as its worker stops, is freed as one
// that a recheck finds should its retry not be taken up: a stopping worker's open
// requests for work may be handed that retry after it failed the polls it dropped, and
// drop it too.
func (l *pollLease) release(ctx context.Context) {
	l.k.mu.Lock()
	l.loseLocked("released")
	handedOn := l.shed || workerStopping(ctx)
	l.k.mu.Unlock()
	rctx, cancel := detached(ctx, 5*time.Second)
	defer cancel()
	free := l.k.a.Store.ReleasePollLease
	if handedOn {
		free = l.k.a.Store.HandOnPollLease
	}
	if _, err := free(rctx, l.claim); err != nil {
		l.k.a.log().Warn("releasing a poll lease failed (it expires)", "account", l.claim.AccountKey, "error", err)
	}
}
