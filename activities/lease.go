package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
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
func (k *leaseKeeper) take(ctx context.Context, in actapi.PollInput, attempt int32) (*pollLease, error) {
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

// LeaseSupervisor finds bots whose poll activity died with its worker and has each one
// replaced at once on a live worker. Every worker runs one, scanning every
// Config.SuperviseEvery (1 s by default). A poll activity is dead when its lease's holder
// lost its liveness session (the process died: seconds after the death), or its lease
// expired (a frozen or cut-off process, or one without a liveness session: after the ttl);
// each such lease is claimed by one supervisor, never by the holder's own worker (its poll
// is alive: after a database outage it commits the page it holds before it lets go). The
// claimed attempt is failed through its task token, so Temporal retries it at once (no
// workflow task); a lease without a token has its poller told instead (poll-lost). A
// worker that died after it picked up a poll activity and before it took the lease leaves
// no lease: the supervisor that finds the dead worker first fails the poll activities
// Temporal counts as started by it among the bots whose lease is free.
type LeaseSupervisor struct {
	a *Activities
	// Every is the period of the scan (default Config.SuperviseEvery).
	Every time.Duration
	// Grace is how long past its expiry a lease is left before it is claimed.
	Grace time.Duration
	// AbandonedAfter is how long a poll started by a worker at work may leave its free
	// lease untaken before it is failed (default DefaultAbandonedAfter).
	AbandonedAfter time.Duration

	mu sync.Mutex
	// untold are the leases claimed whose poll activity could not be replaced yet
	// (Temporal unreachable): the claim freed their rows, so no later scan finds them
	// again; each scan tries them first, until Temporal answers.
	untold map[string]store.DeadPollLease
	// forgotAt is when dead workers' rows were last deleted.
	forgotAt time.Time
	// balancedAt is when this worker last compared its load with its share.
	balancedAt time.Time
}

// NewLeaseSupervisor returns the supervisor of a's leases.
func NewLeaseSupervisor(a *Activities) *LeaseSupervisor {
	return &LeaseSupervisor{a: a, Every: a.cfg().SuperviseEvery}
}

// Run scans at once and then every s.Every until ctx is done; between two scans it looks
// every quarter of s.Every for a worker that died (one cheap statement) and scans at once
// when one did, so a death is acted on within about a quarter of the period.
func (s *LeaseSupervisor) Run(ctx context.Context) {
	look := time.NewTicker(max(s.Every/4, time.Millisecond))
	defer look.Stop()
	next := time.Now()
	for {
		if !time.Now().Before(next) || s.deathSeen(ctx) {
			if _, err := s.Once(ctx); err != nil && ctx.Err() == nil {
				s.a.log().Warn("poll lease supervision failed", "error", err)
			}
			next = time.Now().Add(s.Every)
		}
		select {
		case <-ctx.Done():
			return
		case <-look.C:
		}
	}
}

// deathSeen reports whether a registered worker died and is not marked dead yet (a failed
// look is left to the next scan).
func (s *LeaseSupervisor) deathSeen(ctx context.Context) bool {
	dead, err := s.a.Store.AnyDeadPollWorker(ctx, s.a.keeper().holder)
	return err == nil && dead
}

// maxClaimsPerScan bounds the poll activities one scan replaces.
const maxClaimsPerScan = 500

// errPollWorkerDied fails a dead poll activity: Temporal retries it after the delay.
var errPollWorkerDied = pollRetry("PollWorkerDied", handOverRetry,
	errors.New("the worker running this poll died; retried on a live worker"))

// Once claims the leases of dead poll activities and has each replaced, then looks for
// poll activities that died before they took a lease; it returns how many it replaced.
func (s *LeaseSupervisor) Once(ctx context.Context) (int, error) {
	a := s.a
	if a.Temporal == nil {
		return 0, errors.New("activities: lease supervision needs a Temporal client")
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return 0, err
	}
	me := a.keeper().holder
	touchErr := a.Store.TouchPollWorker(ctx, me)
	adopted, adoptErr := s.adopt(ctx)
	// A worker that can adopt leaves what is adoptable to adoption: a death between its
	// adoption above and this claim is adopted at the next scan, not retried through
	// Temporal (hundreds of retries took seconds to dispatch in a chaos run).
	var leave store.Adoptable
	if s.canAdopt() {
		leave = store.Adoptable{Session: a.cfg().PollSession, Overrun: adoptOverrun}
	}
	dead, claimErr := a.Store.ClaimDeadPollLeases(ctx, me, s.Grace, maxClaimsPerScan, leave)
	s.mu.Lock()
	if s.untold == nil {
		s.untold = map[string]store.DeadPollLease{}
	}
	claimed := make(map[string]bool, len(dead))
	for _, l := range dead {
		claimed[l.AccountKey] = true
		if prev, ok := s.untold[l.AccountKey]; !ok || l.Epoch > prev.Epoch || (l.Epoch == prev.Epoch && l.Attempt > prev.Attempt) {
			s.untold[l.AccountKey] = l
		}
	}
	tell := make([]store.DeadPollLease, 0, len(s.untold))
	for _, l := range s.untold {
		tell = append(tell, l)
	}
	s.mu.Unlock()
	var n atomic.Int64
	n.Add(int64(adopted))
	forEach(tell, func(l store.DeadPollLease) {
		if !s.replace(ctx, inst, l) {
			return
		}
		s.mu.Lock()
		if cur, ok := s.untold[l.AccountKey]; ok && cur.Epoch == l.Epoch && cur.Attempt == l.Attempt {
			delete(s.untold, l.AccountKey)
		}
		s.mu.Unlock()
		n.Add(1)
	})
	unleased, err := s.unleased(ctx, inst, claimed)
	n.Add(int64(unleased))
	stuck, stuckErr := s.stuck(ctx, inst)
	n.Add(int64(stuck))
	s.forget(ctx)
	balanceErr := s.rebalance(ctx)
	return int(n.Load()), errors.Join(touchErr, adoptErr, claimErr, err, stuckErr, balanceErr)
}

// rebalanceEvery is how often a worker compares the bots it polls with its share.
const rebalanceEvery = 10 * time.Second

// atWorkWithin is how many supervisor periods a worker may go without a scan and still
// count as at work (not frozen).
const atWorkWithin = 3

// rebalance hands on, at most every rebalanceEvery, the polls this worker holds beyond its
// share (overload): a worker restarted after a crash starts with no bot, and the bots
// of every later crash go to the survivors, so without this the long-lived workers would
// poll ever more of the bots, and the next crash of one would move that many at once.
// Each poll handed on ends between two long polls and is retried at once (Temporal picks
// the worker, so some come back; the next round hands on what is still over).
func (s *LeaseSupervisor) rebalance(ctx context.Context) error {
	if time.Since(s.balancedAt) < rebalanceEvery {
		return nil
	}
	s.balancedAt = time.Now()
	k := s.a.keeper()
	mine := k.kept()
	if mine == 0 {
		return nil
	}
	// A worker whose supervisor has not run for a few periods is frozen (or stopping): it
	// would take up nothing handed on to it.
	load, err := s.a.Store.ReadPollLoad(ctx, atWorkWithin*s.Every)
	if err != nil {
		return err
	}
	if load.Moving > 0 {
		// A dead worker's bots are moving: handing polls on now would only slow them.
		return nil
	}
	over := overload(mine, load.Workers, load.Accounts)
	if over == 0 {
		return nil
	}
	marked, kept := k.shed(over)
	s.a.log().Info("this worker polls more than its share of the bots: handing some on",
		"polls", mine, "workers", load.Workers, "bots", load.Accounts, "handed_on", marked, "keeps", kept)
	return nil
}

// overload is how many of the polls a worker holds (mine) it hands on when workers share
// the polls of bots between them: what it holds beyond its fair share (bots / workers,
// rounded up) and a tenth of it more, so that workers near their share leave each other
// alone. The share counts the bots to poll, not the leases held: while a dead worker's
// bots move their leases are free, and the survivors must not hand on polls then.
func overload(mine, workers, bots int) int {
	if workers < 2 || mine <= 0 {
		return 0
	}
	share := (bots + workers - 1) / workers
	over := mine - share - max(1, share/10)
	return max(0, over)
}

// stuckAfter is how long a lease claimed from a worker that still lives (a frozen one) may
// stay free before its poll is looked at again: Temporal's retry comes about a second after
// the claim, and a live worker takes the lease within milliseconds of starting it.
// stuckAfterDeath is the same for a lease claimed from a worker that died: Temporal hands
// a dead worker nothing, so only a second death leaves it free, and after a crash the
// retries of all its bots take seconds to start; looking each up every second then would
// cost Temporal a lookup per bot just as they move.
const (
	stuckAfter      = time.Second
	stuckAfterDeath = 5 * time.Second
)

// DefaultAbandonedAfter is how long a poll activity started by a worker at work may go
// without taking its free lease before the recheck fails it all the same: a busy worker
// takes the lease within seconds of the start, so a poll that has not after this was lost
// on its way (Temporal records a task started when it hands it to a worker's request for
// work, and a task lost in that delivery waits out its start-to-close; chaos runs saw it
// twice in rolling restarts, on live workers). Should the poll still run, its lease
// protocol keeps it from polling beside the retry.
const DefaultAbandonedAfter = 10 * time.Second

// abandonedAfter is s.AbandonedAfter or its default.
func (s *LeaseSupervisor) abandonedAfter() time.Duration {
	if s.AbandonedAfter > 0 {
		return s.AbandonedAfter
	}
	return DefaultAbandonedAfter
}

// stuck fails again the retried polls of claimed leases that no poll took within
// stuckAfter: Temporal handed the retry to a worker that does not run it (a frozen one
// still holds requests for work open at Temporal, and gets the retry of its own poll), so
// it is failed again and goes to another worker. A retry started by the worker the lease
// was claimed from is failed at once; one started by another worker when it has not taken
// the lease for stuckAfter and that worker is not at work (frozen, or dead after it
// picked the retry up), or when it has not for AbandonedAfter (a worker at work that
// dropped the task).
func (s *LeaseSupervisor) stuck(ctx context.Context, inst wfapi.Installation) (int, error) {
	a := s.a
	claims, err := a.Store.RecheckClaimedPollLeases(ctx, stuckAfter, stuckAfterDeath, maxClaimsPerScan)
	if err != nil || len(claims) == 0 {
		return 0, err
	}
	// A retry started by a worker at work is left to it, for AbandonedAfter: on a busy
	// worker the lease may be taken seconds after the start, and failing it again would
	// only start it over.
	atWork, err := a.Store.WorkersAtWork(ctx, atWorkWithin*s.Every)
	if err != nil {
		return 0, err
	}
	before := time.Now().Add(-stuckAfter)
	return failEach(claims, func(c store.ClaimedPollLease) (bool, error) {
		ok, err := wfclient.FailDeadPollActivity(ctx, a.Temporal, a.cfg().Namespace, inst, c.AccountKey, c.ClaimedFrom, before, atWork,
			time.Now().Add(-s.abandonedAfter()), errPollWorkerDied)
		if ok {
			a.Metrics.LeaseMoved(metrics.LeaseMovedStuck)
			a.log().Info("a retried poll went to a worker that did not take it up (a frozen one?): retried again elsewhere",
				"account", c.AccountKey, "claimed_from", c.ClaimedFrom)
		}
		return ok, err
	})
}

// failEach runs fail on every item (forEach) and returns how many it failed (true) and
// the errors joined.
func failEach[T any](items []T, fail func(T) (bool, error)) (int, error) {
	var n atomic.Int64
	var mu sync.Mutex
	var errs []error
	forEach(items, func(it T) {
		ok, err := fail(it)
		switch {
		case err != nil:
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		case ok:
			n.Add(1)
		}
	})
	return int(n.Load()), errors.Join(errs...)
}

// replace has the dead poll activity of a claimed lease replaced: its attempt is failed
// through its task token (Temporal retries it at once), or, without a token, its poller is
// told (poll-lost). False: Temporal did not answer (tried again at the next scan).
func (s *LeaseSupervisor) replace(ctx context.Context, inst wfapi.Installation, l store.DeadPollLease) bool {
	a := s.a
	reason := metrics.LeaseMovedExpired
	if l.HolderDied {
		reason = metrics.LeaseMovedWorkerDied
	}
	log := a.log().With("account", l.AccountKey, "holder", l.Holder, "reason", reason)
	if len(l.TaskToken) > 0 {
		err := a.Temporal.CompleteActivity(ctx, l.TaskToken, nil, errPollWorkerDied)
		switch {
		case err == nil:
			a.Metrics.LeaseMoved(reason)
			log.Info("poll lease holder dead: its poll activity is retried on a live worker")
			return true
		case isNotFound(err):
			// That attempt ended already (its poller moved on): the next poll takes the
			// free lease.
			return true
		default:
			log.Warn("failing a dead poll activity failed; tried again at the next scan", "error", err)
			return false
		}
	}
	_, err := wfclient.SignalPoller(ctx, a.Temporal, inst, l.AccountKey, wfapi.SignalPollLost,
		wfapi.PollLostSignal{Epoch: l.Epoch, Attempt: l.Attempt})
	switch {
	case isNotFound(err):
		// No poller runs: the start-up reconcile of a worker starts it.
		return true
	case err != nil:
		log.Warn("telling a poller its poll activity died failed; told again at the next scan", "error", err)
		return false
	}
	a.Metrics.LeaseMoved(reason)
	log.Info("poll lease holder dead: the poller replaces its poll activity")
	return true
}

// unleased finds the workers that died since the last scan (this supervisor is the one
// that marks each dead) and fails the poll activities Temporal counts as started by them
// among the bots whose lease is free (except those in skip, claimed in this scan: their
// attempts are failed through their task tokens, and those polled in this process):
// activities picked up by a worker that
// died before it took their lease, the retry of a lease claimed or handed on earlier
// among them.
func (s *LeaseSupervisor) unleased(ctx context.Context, inst wfapi.Installation, skip map[string]bool) (int, error) {
	a := s.a
	workers, err := a.Store.MarkDeadPollWorkers(ctx, a.keeper().holder)
	if err != nil || len(workers) == 0 {
		return 0, err
	}
	total := 0
	var errs []error
	for _, w := range workers {
		a.log().Info("worker found dead (its liveness session is gone)", "holder", w.Holder)
		// A poll this worker adopted from the dead one runs here until it has ended the
		// attempt through its token: between its lease's release and that end its lease is
		// free, and failing the attempt then would start a needless retry beside it.
		k := a.keeper()
		n, err := failUnleasedStartedBy(ctx, a, inst, w.Holder, func(acct string) bool { return skip[acct] || k.pollsRunning(acct) }, errPollWorkerDied,
			"a poll activity picked up by a dead worker before it took its lease is retried on a live worker")
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// failUnleasedStartedBy fails, among the bots whose lease is free (but those skip names),
// the poll activities Temporal counts as started by holder, with cause (Temporal retries
// them on a live worker); it logs each with msg and returns how many it failed.
func failUnleasedStartedBy(ctx context.Context, a *Activities, inst wfapi.Installation, holder string,
	skip func(accountKey string) bool, cause error, msg string) (int, error) {
	accounts, err := a.Store.ListUnleasedAccounts(ctx, a.cfg().MaxAccounts+activitySlack)
	if err != nil {
		return 0, err
	}
	free := accounts[:0]
	for _, acct := range accounts {
		if !skip(acct) {
			free = append(free, acct)
		}
	}
	return failEach(free, func(acct string) (bool, error) {
		ok, err := wfclient.FailDeadPollActivity(ctx, a.Temporal, a.cfg().Namespace, inst, acct, holder, time.Time{}, nil, time.Time{}, cause)
		if ok {
			a.Metrics.LeaseMoved(metrics.LeaseMovedUnleased)
			a.log().Info(msg, "account", acct, "holder", holder)
		}
		return ok, err
	})
}

// activitySlack bounds the unleased accounts read beyond the worker's active bots.
const activitySlack = 256

// forget deletes the rows of workers dead for longer than their leases can live, at most
// once a ttl.
func (s *LeaseSupervisor) forget(ctx context.Context) {
	ttl := s.a.cfg().LeaseTTL
	if time.Since(s.forgotAt) < ttl {
		return
	}
	s.forgotAt = time.Now()
	if _, err := s.a.Store.ForgetDeadPollWorkers(ctx, 2*ttl); err != nil && ctx.Err() == nil {
		s.a.log().Warn("deleting dead workers' rows failed", "error", err)
	}
}

// superviseConcurrency bounds the Temporal calls one scan makes at once: after the crash
// of the only worker, its restarted successor fails 300 dead polls in 1.7 s at 32 (3.3 s at
// 8) on the 2-core machine beside two CPU burners.
const superviseConcurrency = 32

// forEach runs f on every item, superviseConcurrency at once, and waits.
func forEach[T any](items []T, f func(T)) {
	sem := make(chan struct{}, superviseConcurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(it)
		}()
	}
	wg.Wait()
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
