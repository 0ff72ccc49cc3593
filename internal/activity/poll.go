package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// maxHeartbeatCursor bounds the cursor copied into heartbeat details; a longer one is
// left out (the stored cursor is authoritative anyway).
const maxHeartbeatCursor = 4096

// PollProgress is the heartbeat detail of PollAccount (recorded only when the activity is
// scheduled with a heartbeat timeout, which the AccountPoller no longer does). Pages and
// Messages are the poller's totals including this session (activities.PollInput.PagesBefore and
// MessagesBefore plus what it committed), the counts of the poller's state query. The
// cursor is opaque but not a credential; the stored cursor stays authoritative for a
// retried attempt.
type PollProgress struct {
	Pages    int
	Messages int
	Cursor   string
}

// PollAccount long-polls one account generation, committing each non-empty page with its
// cursor before anything else happens, under a per-account PostgreSQL lock so that two
// attempts never poll the same bot at once.
func (a *Activities) PollAccount(ctx context.Context, in activities.PollInput) (activities.PollResult, error) {
	defer a.keeper().polling(in.AccountKey)()
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 {
		defer a.resumed(ctx, in, activity.GetInfo(ctx).ScheduledTime)()
	}
	res, err := a.pollAccount(ctx, in)
	if errors.Is(err, errAttemptAdopted) {
		// The adopter ends the attempt; the SDK sends Temporal nothing for it.
		return activities.PollResult{}, activity.ErrResultPending
	}
	return a.pollEnded(ctx, in, res, err)
}

// resumed starts what a poll that goes on after a crash or a worker stop (a retry, or a
// poll adopted from a dead worker) owes beside its poll: it tells iLink the account is
// polled again (notifystart) and starts the workflow of a window whose page an earlier
// attempt of the poll activity (first scheduled at scheduled) committed. Beside the poll,
// not before it: after a worker's death the bot is polled again at once. The returned
// function waits for both; the poll returns only once they are done.
func (a *Activities) resumed(ctx context.Context, in activities.PollInput, scheduled time.Time) (wait func()) {
	if in.Probe {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.notify(ctx, activities.AccountRef{AccountKey: in.AccountKey, Generation: in.Generation}, "notifystart", (*ilink.Client).NotifyStart)
		if a.Temporal != nil {
			a.syncOpenWindows(ctx, in.AccountKey, scheduled)
		}
	}()
	return wg.Wait
}

// pollEnded turns the end of a poll session (its result and error) into the poll
// activity's outcome: a graceful worker stop tells iLink this poller stops and hands the
// poll over; a lost, held or shed lease becomes a retry after its own delay.
func (a *Activities) pollEnded(ctx context.Context, in activities.PollInput, res activities.PollResult, err error) (activities.PollResult, error) {
	if p := a.Config.Poller; p != (wfapi.PollerConfig{}) {
		res.Config = &p // this worker's settings reach pollers started before its restart
	}
	if workerStopping(ctx) && res.Stopped == "" && !res.StaleToken {
		// A graceful worker stop: tell iLink this poller stops (another worker resumes it
		// and calls notifystart). Best effort, with its own short deadline.
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		a.notify(nctx, activities.AccountRef{AccountKey: in.AccountKey, Generation: in.Generation}, "notifystop", (*ilink.Client).NotifyStop)
		cancel()
		if err == nil && res.UpstreamError == "" && len(res.Opened) == 0 && len(res.Retired) == 0 {
			// The poll ended only because this worker stops: Temporal retries it on another
			// worker, with no workflow task between the two (the session's page and message
			// counts are not added to the poller's). A workflow task would be faster in the
			// median (no retry timer: the server fires those about a second late) but can be
			// handed to a worker as it stops, and then waits out its 10 s timeout.
			return activities.PollResult{}, pollRetry("PollHandedOver", handOverRetry, errHandedOver)
		}
	}
	switch {
	case errors.Is(err, errLeaseHeld):
		err = pollRetry("PollLeaseHeld", leaseHeldRetry, err)
	case errors.Is(err, errLeaseLost):
		err = pollRetry("PollLeaseLost", leaseHeldRetry, err)
	case errors.Is(err, errLeaseShed):
		a.Metrics.LeaseMoved(metrics.LeaseMovedRebalanced)
		err = pollRetry("PollRebalanced", handOverRetry, err)
		if len(res.Opened) > 0 || len(res.Retired) > 0 {
			// Window starts or retirements the poller must still do: an ordinary end of
			// the session instead (its next poll goes to any worker too).
			err = nil
		}
	}
	return res, err
}

// syncOpenWindows makes sure the account's windows opened by earlier attempts of this poll
// activity (first scheduled at scheduled) have their workflows. A window opened by an
// attempt that died may have none; the windows of earlier poll activities had theirs
// started before those activities ended, or were handed to the poller to start. After a
// crash the surviving workers retry every poll the dead one held at once, so each retry
// starts only what may be missing rather than one workflow per open window.
func (a *Activities) syncOpenWindows(ctx context.Context, accountKey string, scheduled time.Time) {
	since := time.Time{}
	if !scheduled.IsZero() {
		// Temporal's clock and the store's may differ by the skew the store allows.
		since = scheduled.Add(-a.Store.Limits().MaxClockSkew)
	}
	open, err := a.Store.ListOpenWindows(ctx, accountKey, since, 0)
	if err != nil {
		a.log().Warn("listing open windows failed", "account", accountKey, "error", err)
		return
	}
	var refs []activities.WindowRef
	for _, w := range open {
		refs = append(refs, WindowRefOf(w))
	}
	if len(refs) > 0 {
		if err := a.SyncWindows(ctx, activities.WindowsInput{Opened: refs}); err != nil {
			a.log().Warn("starting open windows' workflows failed", "account", accountKey, "error", err)
		}
	}
}

// pollAccount is PollAccount's poll session: it takes the bot's lease, then polls
// (pollLeased) for one poll session.
func (a *Activities) pollAccount(ctx context.Context, in activities.PollInput) (res activities.PollResult, err error) {
	faultpoint.Hit(faultpoint.PollPickedUp, in.AccountKey)
	l, stopped, err := a.takePollLease(ctx, in)
	if err != nil || stopped.Stopped != "" {
		return stopped, err
	}
	return a.pollLeased(ctx, in, l, a.cfg().PollSession)
}

// pollLeased polls the bot while l, its lease, is held, for session at most: account,
// then the fetch-and-commit loop (poller.run); the lease is released and the starts of
// opened windows are awaited on every return.
func (a *Activities) pollLeased(ctx context.Context, in activities.PollInput, l *pollLease, session time.Duration) (res activities.PollResult, err error) {
	cfg := a.cfg()
	log := a.log().With("account", in.AccountKey, "generation", in.Generation)
	defer l.release(ctx)
	defer func() {
		// Run before the release, after the windows' starts were awaited: a poll that lost
		// its lease to the adoption of its attempt leaves the attempt to the adopter,
		// unless it has window starts of its own left for the poller.
		if len(res.Opened) == 0 && len(res.Retired) == 0 && l.adoptedElsewhere(ctx) {
			log.Info("this poll's lease expired (its worker was frozen or cut off) and another worker adopted its attempt: that worker ends it")
			res, err = activities.PollResult{}, errAttemptAdopted
		}
	}()
	if a.hooks != nil && a.hooks.leased != nil {
		a.hooks.leased(l.claim)
	}

	var progress pollProgress
	stopHeartbeat := heartbeat(ctx, cfg.HeartbeatEvery, progress.get)
	defer stopHeartbeat()

	// Windows a commit opens get their workflows (and their first hand-off) from here,
	// without holding up the next poll; the activity keeps polling across pages, so a
	// page costs no Temporal action of its own. Before returning (still heartbeating) it
	// waits for the starts under way and leaves what failed to the workflow.
	var ws *windowStarter
	if a.Temporal != nil {
		ws = newWindowStarter(a)
		defer func() {
			began := time.Now()
			failed := ws.wait()
			if took := time.Since(began); took > slowWindowStart {
				log.Warn("the poll waited for its windows' starts before it ended; the bot was not polled meanwhile",
					"waited", took.Round(time.Millisecond))
			}
			res.Opened = append(res.Opened, failed.Opened...)
			res.Retired = append(res.Retired, failed.Retired...)
		}()
	}

	acct, cl, stopped, err := a.pollTarget(ctx, in)
	if err != nil || stopped.Stopped != "" {
		return stopped, err
	}

	pollCtx, cancelPoll := pollContext(ctx, l)
	defer cancelPoll()

	p := poller{a: a, in: in, owner: acct.OwnerPeerID, cursor: acct.Cursor, log: log, windows: ws,
		deferredBefore: cfg.DeferredBefore, maxSkew: a.Store.Limits().MaxClockSkew}
	err = p.run(ctx, pollCtx, cl, l, &progress, now().Add(session))
	return p.res, err
}

// takePollLease takes the account's poll lease for this attempt. When it is not taken the
// activity returns stopped (a Stopped code: the account is gone) or err.
func (a *Activities) takePollLease(ctx context.Context, in activities.PollInput) (l *pollLease, stopped activities.PollResult, err error) {
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	l, err = a.keeper().take(ctx, in, attempt)
	if err != nil {
		if code := pollStopCode(err); code != "" {
			return nil, activities.PollResult{Stopped: code}, nil
		}
		return nil, activities.PollResult{}, err
	}
	return l, activities.PollResult{}, nil
}

// pollTarget reads the account and builds its iLink client. When this generation may not
// poll the activity returns stopped (a Stopped code) or err instead. A bot token the
// sealing keys cannot open ends the poll with a non-retryable sealed_unreadable error
// naming the fix (the poller stops; the account stays active, so a worker restarted with
// the key polls it again), logged once per worker process and counted.
func (a *Activities) pollTarget(ctx context.Context, in activities.PollInput) (acct store.AccountWithSecret, cl *ilink.Client, stopped activities.PollResult, err error) {
	acct, err = a.Store.GetAccountWithSecret(ctx, in.AccountKey)
	if err != nil {
		if code := pollStopCode(err); code != "" {
			return acct, nil, activities.PollResult{Stopped: code}, nil
		}
		if u, ok := store.UnreadableTokenOf(err); ok {
			a.noteUnreadable(u)
		}
		return acct, nil, activities.PollResult{}, storeErr("read account", err)
	}
	a.noteReadable(acct.AccountKey, acct.Generation)
	switch {
	case acct.Generation != in.Generation:
		return acct, nil, activities.PollResult{Stopped: string(vocab.CodeGenerationConflict)}, nil
	case acct.Status != vocab.AccountActive:
		return acct, nil, activities.PollResult{Stopped: string(vocab.CodeAccountNotActive)}, nil
	}
	cl, err = a.botClient(acct)
	if err != nil {
		return acct, nil, activities.PollResult{}, upstreamErr("ilink client", err)
	}
	return acct, cl, activities.PollResult{}, nil
}

// pollContext returns the context of the long polls: the in-flight long poll ends when the
// activity is cancelled or the lease is lost (a page in that instant is lost like one in
// flight when a process dies). A graceful worker stop does not cut it: iLink hands a page
// out once, so a long poll cut as it answers would lose its page; the poll lets it end (it
// is held at most iLink's long-poll timeout, 35 s), commits what it brought and starts no
// other. Only a long poll still held when the stop's grace ends is cut: the SDK cancels
// the activity then.
func pollContext(ctx context.Context, l *pollLease) (context.Context, context.CancelFunc) {
	pollCtx, cancelPoll := context.WithCancel(ctx)
	go func() {
		select {
		case <-l.lost:
			cancelPoll()
		case <-pollCtx.Done():
		}
	}()
	return pollCtx, cancelPoll
}

// pollProgress is the heartbeat detail of a running PollAccount, shared with the
// heartbeat's goroutine.
type pollProgress struct {
	mu       sync.Mutex
	progress PollProgress
}

// get returns the current progress (the heartbeat's details).
func (pp *pollProgress) get() any {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.progress
}

// set records the poller's totals and (when short enough) its cursor.
func (pp *pollProgress) set(p *poller) {
	pp.mu.Lock()
	pp.progress = PollProgress{Pages: p.in.PagesBefore + p.res.Pages, Messages: p.in.MessagesBefore + p.res.Messages}
	if len(p.cursor) <= maxHeartbeatCursor {
		pp.progress.Cursor = p.cursor
	}
	pp.mu.Unlock()
}

// run long-polls and commits pages until the session ends, the poll must stop or fails;
// the result is p.res. The long polls run on pollCtx, everything else on ctx.
func (p *poller) run(ctx, pollCtx context.Context, cl *ilink.Client, l *pollLease, progress *pollProgress, sessionEnd time.Time) error {
	a, in, ws := p.a, p.in, p.windows
	for n := 0; ; n++ {
		if stop, err := p.mayFetch(ctx, l); stop {
			return err
		}
		if a.hooks != nil && a.hooks.beforeFetch != nil {
			a.hooks.beforeFetch(n)
		}
		// A request still unwritten when the lease's validity ends is never sent: a
		// worker frozen between the check above and the write does not poll a bot that
		// another worker may hold by then.
		page, err := cl.GetUpdates(pollCtx, ilink.GetUpdatesRequest{Cursor: p.cursor, SendBy: l.sendBy()})
		if a.hooks != nil && a.hooks.fetched != nil {
			a.hooks.fetched()
		}
		if err != nil {
			return p.fetchFailed(ctx, l, err)
		}
		a.Metrics.Poll(in.AccountKey, metrics.PollOK)
		if a.hooks != nil && a.hooks.afterFetch != nil && len(page.Messages) > 0 {
			a.hooks.afterFetch(len(page.Messages))
		}
		done, err := p.commit(ctx, page)
		progress.set(p)
		// The session ends once no first offer is under way, so that a slow agent does
		// not hold up the next poll activity (the wait before returning would); a bot
		// written to more often than a long poll lasts always has one under way right
		// after a page, so past sessionOverrun the session ends all the same.
		over := !now().Before(sessionEnd)
		if err != nil || done || in.Probe || (over && (ws == nil || !ws.busy() || !now().Before(sessionEnd.Add(sessionOverrun)))) {
			return err
		}
	}
}

// mayFetch checks, before each getupdates, whether the poll must stop instead (and with
// which error): the activity ended, the worker stops, a window start failed, the lease is lost
// or is to be handed on to another worker.
func (p *poller) mayFetch(ctx context.Context, l *pollLease) (stop bool, err error) {
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	if workerStopping(ctx) {
		return true, nil
	}
	if p.windows != nil && p.windows.failures() {
		return true, nil // the workflow starts or signals what failed
	}
	if err := l.check(); err != nil {
		p.log.Warn("poll lease lost; stopping", "error", err)
		return true, err
	}
	if err := l.handOn(); err != nil {
		p.log.Info("poll handed on to even out the workers' load")
		return true, err
	}
	return false, nil
}

// fetchFailed ends the poll after a failed getupdates and returns the activity's error:
// the activity ended, the worker stops, the lease was lost, the bot token is stale
// (p.res.StaleToken) or iLink failed (p.res.UpstreamError).
func (p *poller) fetchFailed(ctx context.Context, l *pollLease, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case workerStopping(ctx):
		return nil
	case l.check() != nil:
		p.log.Warn("poll lease lost during a long poll; stopping", "error", l.check())
		return l.check()
	case ilink.IsStaleToken(err):
		p.log.Warn("bot token is stale (-14)")
		p.a.Metrics.Poll(p.in.AccountKey, metrics.PollStaleToken)
		p.res.StaleToken = true
		return nil
	}
	p.log.Warn("getupdates failed", "error", err)
	p.res.UpstreamError = string(ilink.CodeOf(err))
	if p.res.UpstreamError == "" {
		p.res.UpstreamError = string(ilink.CodeOutcomeUnknown)
	}
	p.a.Metrics.Poll(p.in.AccountKey, p.res.UpstreamError)
	return nil
}

// poller is the state of one PollAccount loop.
type poller struct {
	a              *Activities
	in             activities.PollInput
	owner          string
	cursor         string
	log            *slog.Logger
	deferredBefore *time.Time
	maxSkew        time.Duration
	res            activities.PollResult
	// windows starts the workflows of the windows a commit opens (nil without a Temporal
	// client: the activity returns them instead).
	windows *windowStarter
}

// commit stores one getupdates page: a page with entries or a moved cursor is committed
// with its cursor (compare-and-set on the stored one); an empty page with an unchanged
// cursor records the round trip (health). The windows the commit opened or retired go to
// the window starter. done reports that the activity must return: the account can no
// longer be polled, or (without a starter) the commit opened or retired windows.
func (p *poller) commit(ctx context.Context, page *ilink.UpdatesPage) (done bool, err error) {
	received := now()
	if len(page.Messages) > 0 {
		// With tracing on, a page with messages starts a trace of its own, linked to the
		// poll's span: its commit, first hand-off and window start, and through Temporal's
		// headers the window's workflow and its sends (docs/operations.md#tracing).
		var span trace.Span
		ctx, span = tracing.Root(ctx, "ilinkflow.page")
		if span.IsRecording() {
			span.SetAttributes(tracing.AttrAccount.String(p.in.AccountKey), tracing.AttrMessages.Int(len(page.Messages)))
		}
		defer span.End()
	}
	entries, leftOut := p.entries(page.Messages, received)
	if len(leftOut) > 0 {
		// Kept before the page commits: should the page fail too, the whole page is
		// quarantined as well, and nothing is lost either way.
		if _, err := p.quarantine(ctx, received, leftOut, store.QuarantineInput{
			Scope: store.QuarantineMessages, ErrorCode: errLeftOut, ErrorMessage: leftOutReasons(leftOut),
		}); err != nil {
			return p.storeFailure("quarantine messages", err)
		}
	}
	if len(entries) == 0 && page.Cursor == p.cursor {
		if err := p.a.Store.RecordPoll(ctx, received, p.in.AccountKey, p.in.Generation); err != nil {
			return p.storeFailure("record poll", err)
		}
		return false, nil
	}
	res, err := p.commitPage(ctx, received, store.PageInput{
		AccountKey: p.in.AccountKey, Generation: p.in.Generation,
		ExpectedCursor: p.cursor, NextCursor: page.Cursor,
		Entries: entries, DeferredBefore: p.deferredBefore,
	})
	if err != nil {
		if !retryCannotFix(err) {
			return p.storeFailure("commit page", err)
		}
		return p.quarantinePage(ctx, received, page, err)
	}
	p.cursor = res.Cursor
	p.res.Pages++
	p.a.Metrics.Page()
	p.a.Metrics.Messages(metrics.MessageInserted, res.Inserted)
	p.a.Metrics.Messages(metrics.MessageDuplicate, res.Duplicates)
	p.a.Metrics.Messages(metrics.MessageAbsorbed, res.Absorbed)
	p.a.Metrics.Messages(metrics.MessageDeferred, res.Deferred)
	if res.Deliverable != nil {
		p.a.Metrics.Messages(metrics.MessageDeliverable, 1)
	}
	p.res.Messages += res.Inserted
	// The page is committed: from here on nothing may fail the activity, or the opened
	// window would never get its workflow (a retry starts after this page). The commit
	// returned everything the window's workflow needs.
	var opened []activities.WindowRef
	if res.Opened != nil {
		opened = append(opened, WindowRefOf(*res.Opened))
	}
	// A pause or a removal that landed while the page was in flight takes effect now that
	// the page is stored: this poll ends.
	stop := res.AccountStatus != "" && res.AccountStatus != vocab.AccountActive
	switch {
	case res.Generation > p.in.Generation:
		// A rotation landed while the page was in flight: its poller takes over.
		stop = true
		p.log.Info("page stored after the account was rotated; the poll stops", "messages", res.Inserted, "generation", res.Generation)
		p.res.Stopped = string(vocab.CodeGenerationConflict)
	case stop:
		p.log.Info("page stored after the account became "+res.AccountStatus+"; the poll stops", "messages", res.Inserted)
		p.res.Stopped = string(vocab.CodeAccountNotActive)
	}
	if p.windows != nil {
		p.windows.add(ctx, opened, res.RetiredWindowIDs)
		return stop, nil
	}
	p.res.Opened = append(p.res.Opened, opened...)
	p.res.Retired = append(p.res.Retired, res.RetiredWindowIDs...)
	return stop || len(p.res.Opened) > 0 || len(p.res.Retired) > 0, nil
}

// sessionOverrun is how long a poll session may run past its end while a first offer is
// under way: well within the poll activity's slack past the session (wfapi.PollSlack).
const sessionOverrun = time.Minute

// adoptOverrun is how long past its session a dead worker's poll attempt may still be
// adopted (for one more long poll): what is left of the attempt's start-to-close then,
// adoptEndMargin, covers that long poll (iLink holds one up to 35 s) and the end of the
// attempt. A poll in its last long poll as its worker dies is adopted again by each
// worker of a crash loop until this runs out, and then retried through Temporal.
const (
	adoptEndMargin = time.Minute
	adoptOverrun   = wfapi.PollSlack - adoptEndMargin
)

// Back-off of a page commit that PostgreSQL did not take.
const (
	commitRetryFirst = 100 * time.Millisecond
	commitRetryMax   = 5 * time.Second
	// commitInternalTries bounds the tries of a write the store fails with an internal
	// error (not PostgreSQL's unavailability): then the page is quarantined.
	commitInternalTries = 3
	// commitLastTry bounds the last attempt after the activity's context ended (a worker
	// stopping gracefully, a heartbeat timeout).
	commitLastTry = 5 * time.Second
)

// commitPage commits a fetched page, retrying for as long as the failure is PostgreSQL's
// (unreachable, a dropped connection) rather than a rule's: iLink handed the page out
// once and will not again, so it is kept in memory and no further getupdates is made
// until it is stored. Only the death of the process loses it. When the activity's
// context ends meanwhile, one last attempt runs on a short detached deadline.
func (p *poller) commitPage(ctx context.Context, received time.Time, in store.PageInput) (store.PageResult, error) {
	var res store.PageResult
	err := p.untilStored(ctx, "page commit", len(in.Entries), func(ctx context.Context) error {
		var err error
		res, err = p.a.Store.CommitPage(ctx, received, in)
		return err
	})
	return res, err
}

// untilStored runs a write of a fetched page until PostgreSQL takes it, a rule refuses it,
// the store fails it the same way commitInternalTries times (a fault of our own: retrying
// will not fix it), or the activity's context ends (then one last try runs on a short
// detached deadline).
func (p *poller) untilStored(ctx context.Context, what string, messages int, write func(context.Context) error) error {
	wait := commitRetryFirst
	for try := 1; ; try++ {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if ctx.Err() != nil {
			cctx, cancel = detached(ctx, commitLastTry)
		}
		err := write(cctx)
		cancel()
		if err == nil || store.IsRuleViolation(err) || ctx.Err() != nil ||
			(store.CodeOf(err) == vocab.CodeInternal && try >= commitInternalTries) {
			if err == nil && try > 1 {
				p.log.Info(what+" stored after PostgreSQL came back", "tries", try)
			}
			return err
		}
		if try == 1 {
			p.log.Warn(what+" failed; keeping the page and retrying", "messages", messages, "error", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, commitRetryMax)
	}
}

// retryCannotFix reports whether a page commit failed for the page's own sake: a rule
// refused it (other than the rules that stop the poll or send it back to the stored
// cursor) or the store failed on it repeatedly. Such a page is quarantined.
func retryCannotFix(err error) bool {
	code := store.CodeOf(err)
	switch {
	case pollStopCode(err) != "", code == vocab.CodeCursorConflict, code == "", code == vocab.CodeUnavailable:
		return false
	}
	return true
}

// errLeftOut is the error code of messages left out of a page (quarantined with the
// reason of each).
const errLeftOut = "left_out"

// leftOutMessage is a message of a page that the page cannot carry, with why.
type leftOutMessage struct {
	Message ilink.Message `json:"message"`
	Reason  string        `json:"reason"`
}

// leftOutReasons sums up why messages were left out (no secret: reasons are ours).
func leftOutReasons(left []leftOutMessage) string {
	seen := map[string]bool{}
	var reasons []string
	for _, l := range left {
		if !seen[l.Reason] {
			seen[l.Reason] = true
			reasons = append(reasons, l.Reason)
		}
	}
	return fmt.Sprintf("%d message(s) left out of the page: %s", len(left), strings.Join(reasons, "; "))
}

// quarantine stores content (messages of a page) sealed in the quarantine, with in's
// error, retrying while PostgreSQL is unreachable as a page commit does.
func (p *poller) quarantine(ctx context.Context, received time.Time, content any, in store.QuarantineInput) (store.QuarantinedPage, error) {
	data, err := json.Marshal(content)
	if err != nil {
		return store.QuarantinedPage{}, &store.Error{Code: vocab.CodeInternal, Msg: "encode quarantined messages", Err: err}
	}
	in.AccountKey, in.Generation = p.in.AccountKey, p.in.Generation
	switch c := content.(type) {
	case []leftOutMessage:
		in.Messages = len(c)
	case []ilink.Message:
		in.Messages = len(c)
	}
	in.Content = sealing.NewSecret(string(data))
	var q store.QuarantinedPage
	err = p.untilStored(ctx, "quarantine", in.Messages, func(ctx context.Context) error {
		var err error
		q, err = p.a.Store.QuarantinePage(ctx, received, in)
		return err
	})
	if err != nil {
		return q, err
	}
	p.a.Metrics.Messages(metrics.MessageQuarantined, in.Messages)
	p.log.Error("messages quarantined: the store could not take them as they are; "+
		"`starter quarantine` lists them", "quarantine_id", q.QuarantineID, "scope", q.Scope,
		"messages", q.Messages, "error_code", q.ErrorCode, "error", q.ErrorMessage)
	return q, nil
}

// quarantinePage quarantines a page whose commit failed for a reason retrying will not
// fix, moving the cursor past it in the same transaction: the bot goes on at once.
func (p *poller) quarantinePage(ctx context.Context, received time.Time, page *ilink.UpdatesPage, cause error) (bool, error) {
	q, err := p.quarantine(ctx, received, page.Messages, store.QuarantineInput{
		Scope: store.QuarantineWholePage, ErrorCode: string(store.CodeOf(cause)), ErrorMessage: cause.Error(),
		MoveCursor: true, ExpectedCursor: p.cursor, NextCursor: page.Cursor,
	})
	if err != nil {
		return p.storeFailure("quarantine page", err)
	}
	if q.CursorMoved {
		p.cursor = page.Cursor
	}
	p.res.Pages++
	p.a.Metrics.Page()
	return false, nil
}

// entries converts a page's messages, leaving out (to the quarantine, never dropped) what
// the store would refuse for the whole page: messages without a usable context token, and
// messages that are not from the account's owner (an iLink bot talks to its owner only).
// Bot echoes are skipped. A sent-at beyond the allowed clock skew is clamped to the time
// the page arrived.
func (p *poller) entries(msgs []ilink.Message, received time.Time) ([]store.PageEntry, []leftOutMessage) {
	out := make([]store.PageEntry, 0, len(msgs))
	var left []leftOutMessage
	for i := range msgs {
		e, err := convertMessage(&msgs[i], p.cursor, received)
		switch {
		case errors.Is(err, errBotMessage):
			continue
		case err != nil:
			p.log.Warn("inbound message left out of its page", "reason", err.Error(), "message_id", msgs[i].ID())
			left = append(left, leftOutMessage{Message: msgs[i], Reason: err.Error()})
			continue
		case e.PeerID != p.owner:
			p.log.Warn("inbound message left out of its page", "reason", "sender is not the bot's owner",
				"provider_message_id", e.ProviderMessageID)
			left = append(left, leftOutMessage{Message: msgs[i], Reason: "sender is not the bot's owner"})
			continue
		}
		if e.SentAt.After(received.Add(p.maxSkew)) {
			p.log.Warn("inbound message sent-at is in the future; clamped",
				"provider_message_id", e.ProviderMessageID, "sent_at", e.SentAt)
			e.SentAt = received
		}
		out = append(out, e)
	}
	return out, left
}

// storeFailure maps a failed commit or health record: the account can no longer be
// polled by this generation → Stopped; a cursor that moved under us (a poller that lost
// its lease) → retryable, so that a retry starts again from the stored cursor; any other
// rule violation → non-retryable; infrastructure → retryable.
func (p *poller) storeFailure(op string, err error) (bool, error) {
	if code := pollStopCode(err); code != "" {
		p.res.Stopped = code
		return true, nil
	}
	if store.CodeOf(err) == vocab.CodeCursorConflict {
		return true, fmt.Errorf("%s: %w", op, err)
	}
	return true, storeErr(op, err)
}

// NotifyStart tells iLink that the account's poller started (failures are ignored).
func (a *Activities) NotifyStart(ctx context.Context, in activities.AccountRef) error {
	a.notify(ctx, in, "notifystart", (*ilink.Client).NotifyStart)
	return nil
}

// NotifyStop tells iLink that the account's poller stopped (failures are ignored).
func (a *Activities) NotifyStop(ctx context.Context, in activities.AccountRef) error {
	a.notify(ctx, in, "notifystop", (*ilink.Client).NotifyStop)
	return nil
}

func (a *Activities) notify(ctx context.Context, in activities.AccountRef, op string, call func(*ilink.Client, context.Context) error) {
	log := a.log().With("account", in.AccountKey, "generation", in.Generation, "op", op)
	acct, err := a.Store.GetAccountWithSecret(ctx, in.AccountKey)
	if err != nil {
		log.Warn("notify skipped: account unreadable", "error", err)
		return
	}
	cl, err := a.botClient(acct)
	if err != nil {
		log.Warn("notify skipped: no client", "error", err)
		return
	}
	if err := call(cl, ctx); err != nil {
		log.Info("notify failed (ignored)", "error", err)
	}
}

// workerStopping reports whether the worker running this poll (an activity, or a poll
// adopted from a dead worker) is stopping gracefully.
func workerStopping(ctx context.Context) bool {
	var stop <-chan struct{}
	switch {
	case activity.IsActivity(ctx):
		stop = activity.GetWorkerStopChannel(ctx)
	default:
		stop, _ = ctx.Value(adoptedStopKey{}).(<-chan struct{})
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
