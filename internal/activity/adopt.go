package activity

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// A dead worker's poll is adopted, not retried: the supervisor that finds the holder of a
// lease dead takes the lease over and goes on polling the bot in its own process, under
// the dead poll activity's attempt (its task token), for what is left of that attempt's
// poll session; then it ends the attempt through the token with the result the activity
// would have returned. The bot is polled again as soon as the death is seen, without the
// failure, the retry timer (the server fires those a second late) and the dispatch of a
// new attempt that a retry costs per bot, which beside a burst of hundreds of bots took
// seconds (docs/poll-leases.md). A frozen or cut-off holder's poll is adopted the same way
// once its lease expired; the holder, should it thaw, leaves the attempt to the adopter
// (errAttemptAdopted).

// adoptedStopKey is the context key under which an adopted poll finds the channel closed
// when its worker begins to stop (an activity's is its worker stop channel).
type adoptedStopKey struct{}

// adoptions runs the polls a worker adopted, and stops them with the worker as the SDK
// stops its activities: first the stop channel (each poll ends after its long poll and
// hands the bot over), then, once the grace is over, the context.
type adoptions struct {
	stop   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func newAdoptions() *adoptions {
	ad := &adoptions{stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ad.ctx = context.WithValue(ctx, adoptedStopKey{}, (<-chan struct{})(ad.stop))
	ad.cancel = cancel
	return ad
}

// stopping reports whether the worker began to stop (no poll is adopted then).
func (ad *adoptions) stopping() bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	return ad.stopped
}

// start runs poll on its own goroutine unless the worker stops (false).
func (ad *adoptions) start(poll func(ctx context.Context)) bool {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.stopped {
		return false
	}
	ad.wg.Add(1)
	go func() {
		defer ad.wg.Done()
		poll(ad.ctx)
	}()
	return true
}

// StopAdoptedPolls stops the polls this worker adopted from dead workers, for a worker that
// stops: each ends after the long poll it holds and hands its bot over (its attempt fails
// with a retry Temporal runs on another worker at once); a poll still running when grace
// ends is cut. It returns once all have ended their attempts.
//
// It is a function, not a method: every method of Activities is registered as an activity.
func StopAdoptedPolls(a *Activities, grace time.Duration) {
	ad := a.keeper().adopted
	ad.mu.Lock()
	if !ad.stopped {
		ad.stopped = true
		close(ad.stop)
	}
	ad.mu.Unlock()
	done := make(chan struct{})
	go func() {
		ad.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		ad.cancel()
		<-done
	}
}

// adopt adopts the polls of dead workers' bots (or frozen ones', once their leases expired)
// that can go on here (AdoptDeadPollLeases) and starts each; it returns how many. A worker
// without a liveness session adopts none: should it die too, what it adopted would move
// only after the ttl.
func (s *LeaseSupervisor) adopt(ctx context.Context) (int, error) {
	a := s.a
	k := a.keeper()
	if !s.canAdopt() {
		return 0, nil
	}
	k.mu.Lock()
	key := k.livenessKey
	k.mu.Unlock()
	if key == 0 { // lost since
		return 0, nil
	}
	cfg := a.cfg()
	start := time.Now()
	got, err := a.Store.AdoptDeadPollLeases(ctx, k.holder, key, cfg.LeaseTTL, s.Grace, cfg.PollSession, adoptOverrun, maxClaimsPerScan)
	for _, d := range got {
		l := k.hold(d.PollLease, start)
		if !k.adopted.start(func(ctx context.Context) { a.pollAdopted(ctx, l, d) }) {
			// The worker began to stop meanwhile: the poll is handed over at once.
			l.release(ctx)
			a.endAdopted(ctx, d, activities.PollResult{}, pollRetry("PollHandedOver", handOverRetry, errHandedOver))
		}
	}
	return len(got), err
}

// canAdopt reports whether this worker adopts dead polls: it has a Temporal client (to end
// the attempts) and a liveness session (so that its own death shows), and is not stopping.
func (s *LeaseSupervisor) canAdopt() bool {
	k := s.a.keeper()
	k.mu.Lock()
	key := k.livenessKey
	k.mu.Unlock()
	return s.a.Temporal != nil && key != 0 && !k.adopted.stopping()
}

// pollAdopted goes on with the dead poll activity attempt d, whose lease l this worker
// holds now: as a retry would, it tells iLink the bot is polled again and starts the
// workflows of windows the attempt opened, polls for the rest of the attempt's session,
// and ends the attempt with the poll's outcome.
func (a *Activities) pollAdopted(ctx context.Context, l *pollLease, d store.AdoptedPollLease) {
	in := activities.PollInput{AccountKey: d.AccountKey, Generation: d.Generation, Probe: d.Probe, LeaseEpoch: d.Epoch}
	defer a.keeper().polling(in.AccountKey)()
	a.Metrics.LeaseMoved(metrics.LeaseMovedAdopted)
	a.log().Info("poll lease holder dead or frozen: its poll is adopted and goes on on this worker",
		"account", d.AccountKey, "holder", d.DeadHolder, "session_left", d.Remaining.Round(time.Second))
	// The epoch is the poll activity's scheduling time on the poller workflow's clock.
	wait := a.resumed(ctx, in, time.Unix(0, d.Epoch))
	res, err := a.pollLeased(ctx, in, l, d.Remaining)
	wait()
	if errors.Is(err, errAttemptAdopted) {
		return // adopted again (this worker froze meanwhile): the new adopter ends it
	}
	res, err = a.pollEnded(ctx, in, res, err)
	a.endAdopted(ctx, d, res, err)
}

// Retries of the end of an adopted poll's attempt while Temporal does not answer.
const (
	endAdoptedFirst = 200 * time.Millisecond
	endAdoptedMax   = 5 * time.Second
	endAdoptedCall  = 10 * time.Second
)

// endAdopted ends the adopted attempt d through its task token with the poll's result or
// error, retrying while Temporal does not answer, until the attempt's own start-to-close
// would have ended it or the worker's stop grace is over. An attempt that ended already
// (its poller was stopped or moved on) is left alone.
func (a *Activities) endAdopted(ctx context.Context, d store.AdoptedPollLease, res activities.PollResult, err error) {
	var result any
	if err == nil {
		result = res
	}
	log := a.log().With("account", d.AccountKey)
	giveUp := time.Now().Add(d.Remaining + wfapi.PollSlack)
	for wait := endAdoptedFirst; ; wait = min(2*wait, endAdoptedMax) {
		cctx, cancel := detached(ctx, endAdoptedCall)
		cerr := a.Temporal.CompleteActivity(cctx, d.TaskToken, result, err)
		cancel()
		switch {
		case cerr == nil:
			return
		case isNotFound(cerr):
			log.Info("the adopted poll's attempt had ended already")
			return
		case ctx.Err() != nil || time.Now().After(giveUp):
			log.Warn("ending an adopted poll's attempt failed; it ends at its start-to-close", "error", cerr)
			return
		}
		log.Warn("ending an adopted poll's attempt failed; trying again", "error", cerr, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}
