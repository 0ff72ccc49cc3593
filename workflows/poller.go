package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func pollerDefaults(c wfapi.PollerConfig) wfapi.PollerConfig {
	if c.StalePause <= 0 {
		c.StalePause = wfapi.Duration(time.Hour)
	}
	if c.ShortBackoff <= 0 {
		c.ShortBackoff = wfapi.Duration(2 * time.Second)
	}
	if c.LongBackoff <= 0 {
		c.LongBackoff = wfapi.Duration(30 * time.Second)
	}
	if c.MaxLoops <= 0 {
		c.MaxLoops = 500
	}
	return c
}

// poller is the state machine of one account's poller.
type poller struct {
	in                          wfapi.PollerInput
	rotate, pause, resume, stop workflow.ReceiveChannel
	// pollLost: a lease supervisor found the running poll activity's lease expired.
	pollLost workflow.ReceiveChannel
	status   string
	// commanded: pause or resume signals arrived since the stored state was last read.
	commanded bool
	// lastEpoch is the lease epoch of the last poll activity scheduled.
	lastEpoch int64
}

// AccountPoller polls one account: it loops long-poll → page commit (both
// inside the PollAccount activity, so no page and no token crosses history and an idle
// account adds no events), starts a ReplyWindow workflow for each window a commit opens
// and tells superseded ones to end, backs off after upstream errors (2 s, then 30 s after
// three failures in a row), pauses one hour on a stale token (-14) and probes once after,
// marking the account needs_relogin on a second -14, obeys rotate/pause/resume/stop
// signals, and continues as new before its history grows large.
func AccountPoller(ctx workflow.Context, in wfapi.PollerInput) error {
	in.Config = pollerDefaults(in.Config)
	p := &poller{
		in:     in,
		rotate: workflow.GetSignalChannel(ctx, wfapi.SignalRotate),
		pause:  workflow.GetSignalChannel(ctx, wfapi.SignalPause),
		resume: workflow.GetSignalChannel(ctx, wfapi.SignalResume),
		stop:   workflow.GetSignalChannel(ctx, wfapi.SignalStop),
		status: "polling",

		pollLost: workflow.GetSignalChannel(ctx, wfapi.SignalPollLost),
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryPollerState, p.state); err != nil {
		return err
	}
	if in.Loops == 0 && !in.Stopped && in.PausedUntil == nil {
		p.notify(ctx, activities.NotifyStart)
	}
	for {
		p.drain()
		p.followStore(ctx)
		if p.in.Stopped {
			p.status = wfapi.PollerStopped
			p.notify(ctx, activities.NotifyStop)
			return nil
		}
		if p.in.PausedUntil != nil {
			if !p.waitPause(ctx) {
				continue // a signal arrived: re-evaluate
			}
		}
		if err := p.pollOnce(ctx); err != nil {
			return err
		}
		p.in.Loops++
		if p.in.Loops >= p.in.Config.MaxLoops || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			p.drain()
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			next := p.in
			next.Loops = 0
			if next.Stopped {
				continue
			}
			return workflow.NewContinueAsNewError(ctx, wfapi.AccountPollerWorkflow, next)
		}
	}
}

// followStore makes operator commands last-one-wins: the signals of a pause and a resume
// carry no order across their channels, so once any arrived (or a poll ended because the
// account was not active) the poller reads the stored state (the operator's CLI writes
// the store before it signals) and acts on it: paused until a time, active, or stopped
// for any other status (removed, needs_relogin).
func (p *poller) followStore(ctx workflow.Context) {
	if !p.commanded {
		return
	}
	p.commanded = false
	var st activities.AccountState
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.ReadAccountState,
		activities.AccountRef{AccountKey: p.in.AccountKey, Generation: p.in.Generation}).Get(ctx, &st)
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("reading the account after an operator command failed; acting on the signals",
			"account", p.in.AccountKey, "error", err)
	case st.Generation != p.in.Generation:
		// A rotation is on its way (its own signal moves the poller).
	case st.Status == vocab.AccountPaused && st.PausedUntil != nil:
		until := *st.PausedUntil
		p.in.PausedUntil = &until
	case st.Status == vocab.AccountActive:
		p.in.PausedUntil = nil
	case st.Status != vocab.AccountPaused:
		p.in.Stopped = true
	}
}

func (p *poller) state() (wfapi.PollerState, error) {
	return wfapi.PollerState{AccountKey: p.in.AccountKey, Generation: p.in.Generation, Status: p.status,
		PausedUntil: p.in.PausedUntil, Failures: p.in.Failures, Pages: p.in.Pages, Messages: p.in.Messages}, nil
}

// drain applies every pending signal (signals are not carried across continue-as-new).
func (p *poller) drain() {
	var rot wfapi.RotateSignal
	for p.rotate.ReceiveAsync(&rot) {
		if rot.Generation > p.in.Generation {
			p.in.Generation = rot.Generation
			p.in.Failures, p.in.PausedUntil, p.in.StaleProbe = 0, nil, false
		}
	}
	var ps wfapi.PauseSignal
	for p.pause.ReceiveAsync(&ps) {
		until := ps.Until
		p.in.PausedUntil = &until
		p.commanded = true
		p.status = wfapi.PollerPaused
	}
	for p.resume.ReceiveAsync(nil) {
		p.commanded = true
		p.status = wfapi.PollerPolling
		if p.in.PausedUntil != nil {
			now := time.Time{}
			p.in.PausedUntil = &now // ends the pause at the next evaluation
		}
	}
	var st wfapi.StopSignal
	for p.stop.ReceiveAsync(&st) {
		p.in.Stopped = true
		p.status = wfapi.PollerStopping
	}
}

// waitPause sleeps on a timer until the pause ends (true), or until a signal arrives
// (false). When the pause ends the account is resumed in the store; after a stale-token
// pause the next poll is the probe.
func (p *poller) waitPause(ctx workflow.Context) bool {
	p.status = wfapi.PollerPaused
	if !sleepOrSignal(ctx, p.in.PausedUntil.Sub(workflow.Now(ctx)), p.rotate, p.pause, p.resume, p.stop) {
		return false
	}
	return p.endPause(ctx)
}

// endPause resumes the account in the store when its pause ends (ResumeAccount also tells
// its open windows, which offer what the pause refused again) and reports whether the
// poller polls on; a resume the store refuses (the account was removed or rotated
// meanwhile) stops this poller.
func (p *poller) endPause(ctx workflow.Context) bool {
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.ResumeAccount, activities.StatusInput{
		AccountKey: p.in.AccountKey, Generation: p.in.Generation, Reason: "pause ended", Now: workflow.Now(ctx),
	}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("resume after pause failed", "account", p.in.AccountKey, "error", err)
		p.in.Stopped = true
		return false
	}
	p.in.PausedUntil = nil
	p.status = wfapi.PollerPolling
	return true
}

func (p *poller) pollOnce(ctx workflow.Context) error {
	gen := p.in.Generation
	res, abandoned, err := p.runPoll(ctx)
	if abandoned {
		return nil // the loop schedules the replacement at once, or stops
	}
	if err != nil {
		// Retries are exhausted only for rule violations: this generation cannot poll.
		workflow.GetLogger(ctx).Error("poll failed", "account", p.in.AccountKey, "error", err)
		p.in.Stopped = true
		return nil
	}
	p.in.Pages += res.Pages
	p.in.Messages += res.Messages
	if c := res.Config; c != nil {
		// The worker's settings win over those this poller was started with.
		if c.StalePause > 0 {
			p.in.Config.StalePause = c.StalePause
		}
		if c.PollSession > 0 {
			p.in.Config.PollSession = c.PollSession
		}
	}
	if len(res.Opened) > 0 || len(res.Retired) > 0 {
		if err := p.syncWindows(ctx, activities.WindowsInput{Opened: res.Opened, Retired: res.Retired}); err != nil {
			return err
		}
	}
	switch {
	case res.Stopped != "":
		p.drain()
		switch {
		case p.in.Generation != gen:
			// A rotation overtook the poll: its generation is polled next.
		case res.Stopped == string(vocab.CodeGenerationConflict):
			p.adoptRotation(ctx)
			if p.in.Generation == gen {
				p.in.Stopped = true
			}
		case res.Stopped == string(vocab.CodeAccountNotActive):
			// Paused, resumed or removed while the poll ran: the stored state decides
			// (a pause whose end the poller already carried out leaves it active).
			p.commanded = true
		default:
			p.in.Stopped = true
		}
	case res.StaleToken:
		return p.onStaleToken(ctx)
	case res.UpstreamError != "":
		p.in.Failures++
		backoff := p.in.Config.ShortBackoff
		if p.in.Failures >= 3 {
			backoff = p.in.Config.LongBackoff
		}
		p.status = wfapi.PollerBackingOff
		sleepOrSignal(ctx, backoff.D(), p.stop, p.rotate)
		p.status = wfapi.PollerPolling
	default:
		p.in.Failures = 0
		p.in.StaleProbe = false
	}
	return nil
}

// adoptRotation follows a rotation whose signal has not arrived yet: the poll stopped
// because the stored generation moved on, so the poller reads it and, when the account is
// active at a newer generation, polls that one (the rotate signal, when it comes, changes
// nothing more).
func (p *poller) adoptRotation(ctx workflow.Context) {
	var st activities.AccountState
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.ReadAccountState,
		activities.AccountRef{AccountKey: p.in.AccountKey, Generation: p.in.Generation}).Get(ctx, &st)
	if err != nil || st.Generation <= p.in.Generation || st.Status != vocab.AccountActive {
		return
	}
	p.in.Generation = st.Generation
	p.in.Failures, p.in.PausedUntil, p.in.StaleProbe = 0, nil, false
}

// runPoll runs one PollAccount activity. Its liveness is the poll lease, not a Temporal
// heartbeat (an idle bot costs one activity per poll session): when a worker's lease
// supervisor signals that the activity's lease expired (its worker died), the activity is
// abandoned and the caller schedules a new one, which takes the lease. Operator signals
// arriving meanwhile are applied at once, so the state query reflects them; the activity
// itself learns of a pause or removal from the store and ends after the long poll it
// holds (a page iLink hands out is stored, never cut off). A stop (removal) abandons the
// activity: the poller ends at once. A pause that lands during the poll ends on time
// even if the poll still runs: the account is resumed at its pause_until.
func (p *poller) runPoll(ctx workflow.Context) (res activities.PollResult, abandoned bool, err error) {
	epoch := workflow.Now(ctx).UnixNano()
	if epoch <= p.lastEpoch {
		epoch = p.lastEpoch + 1
	}
	p.lastEpoch = epoch
	actx, cancel := workflow.WithCancel(withOptions(ctx, pollOptionsFor(p.in.Config)))
	defer cancel()
	fut := workflow.ExecuteActivity(actx, activities.PollAccount, activities.PollInput{
		AccountKey: p.in.AccountKey, Generation: p.in.Generation, Probe: p.in.StaleProbe, LeaseEpoch: epoch,
		PagesBefore: p.in.Pages, MessagesBefore: p.in.Messages,
	})
	done, lost := false, false
	var pauseEnd workflow.Future
	var pauseEndAt time.Time
	cancelPauseEnd := func() {}
	defer func() { cancelPauseEnd() }()
	for !done && !lost && !p.in.Stopped {
		if p.in.PausedUntil == nil || !p.in.PausedUntil.Equal(pauseEndAt) {
			cancelPauseEnd()
			pauseEnd, pauseEndAt = nil, time.Time{}
			if p.in.PausedUntil != nil {
				pauseEndAt = *p.in.PausedUntil
				var tctx workflow.Context
				tctx, cancelPauseEnd = workflow.WithCancel(ctx)
				pauseEnd = workflow.NewTimer(tctx, max(pauseEndAt.Sub(workflow.Now(ctx)), 0))
			}
		}
		ended := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(f workflow.Future) {
			err = f.Get(ctx, &res)
			done = true
		})
		sel.AddReceive(p.pollLost, func(c workflow.ReceiveChannel, _ bool) {
			var s wfapi.PollLostSignal
			c.Receive(ctx, &s)
			if s.Epoch >= epoch {
				lost = true
			}
		})
		for _, ch := range []workflow.ReceiveChannel{p.rotate, p.pause, p.resume, p.stop} {
			sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) { p.drain() })
		}
		if pauseEnd != nil {
			sel.AddFuture(pauseEnd, func(workflow.Future) { ended = true })
		}
		sel.Select(ctx)
		if done || lost {
			break
		}
		// Operator commands are last-one-wins: the stored state decides (as at the top
		// of the poller's loop).
		p.followStore(ctx)
		if ended && p.in.PausedUntil != nil && p.in.PausedUntil.Equal(pauseEndAt) {
			// The pause ends while the poll still runs (it held a long poll when the
			// pause landed): resume now; the poll goes on for the active account.
			pauseEnd, pauseEndAt = nil, time.Time{}
			p.endPause(ctx)
		}
	}
	switch {
	case lost:
		workflow.GetLogger(ctx).Warn("the poll activity's lease expired (its worker died?): replacing it", "account", p.in.AccountKey)
	case !done:
		// Stopped: the activity is cancelled and not waited for; it ends after its long
		// poll, storing what that brings, and is not retried.
		return res, true, nil
	}
	return res, lost, err
}

// onStaleToken: the first -14 pauses the account for StalePause, after which one probe
// runs; a -14 on the probe marks the account needs_relogin and stops the poller.
func (p *poller) onStaleToken(ctx workflow.Context) error {
	now := workflow.Now(ctx)
	if p.in.StaleProbe {
		var out activities.StatusOutput
		err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.MarkNeedsRelogin, activities.StatusInput{
			AccountKey: p.in.AccountKey, Generation: p.in.Generation, Reason: "bot token stale (-14) after the pause", Now: now,
		}).Get(ctx, &out)
		if err != nil {
			workflow.GetLogger(ctx).Error("mark needs_relogin failed", "account", p.in.AccountKey, "error", err)
		}
		if len(out.CancelledWindowIDs) > 0 {
			if err := p.syncWindows(ctx, activities.WindowsInput{Retired: out.CancelledWindowIDs}); err != nil {
				return err
			}
		}
		p.in.Stopped = true
		return nil
	}
	until := now.Add(p.in.Config.StalePause.D())
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.PauseAccount, activities.PauseInput{
		AccountKey: p.in.AccountKey, Generation: p.in.Generation, Until: until, Reason: "bot token stale (-14)", Now: now,
	}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Error("pause failed", "account", p.in.AccountKey, "error", err)
		p.in.Stopped = true
		return nil
	}
	p.in.PausedUntil, p.in.StaleProbe = &until, true
	return nil
}

func (p *poller) syncWindows(ctx workflow.Context, in activities.WindowsInput) error {
	return workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.SyncWindows, in).Get(ctx, nil)
}

// notify calls NotifyStart or NotifyStop; their failures are logged, never fatal.
func (p *poller) notify(ctx workflow.Context, activity any) {
	err := workflow.ExecuteActivity(withOptions(ctx, upstreamOptions), activity,
		activities.AccountRef{AccountKey: p.in.AccountKey, Generation: p.in.Generation}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("notify failed", "account", p.in.AccountKey, "error", err)
	}
}
