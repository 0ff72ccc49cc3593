package activity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

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
