package workflows

// The ReplyWindow workflow. This file holds its state, its main loop and the transitions
// the loop makes (offers, the account's pause, the reminder, the expiry);
// window_handoff.go takes a hand-off's answer; window_handlers.go holds the query, the
// send and finish Updates and the sends they run.

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// windowState is where a ReplyWindow workflow stands: open until it is retired (the
// retired signal, or the store found the window superseded or cancelled) or expired.
type windowState string

// The states of a ReplyWindow workflow.
const (
	windowOpen    windowState = wfapi.WindowStateOpen
	windowRetired windowState = wfapi.WindowStateRetired
	windowExpired windowState = wfapi.WindowStateExpired
)

// window is the whole state of one ReplyWindow workflow: the input it started with,
// where it stands, and three small parts, each changed by its own transitions.
type window struct {
	in    wfapi.WindowInput // the start's input, never changed: ids, expiry, quota, settings
	state windowState       // open until retired or expired; the main loop runs while open
	msg   windowMessage     // the message, its agent session and its verdict
	offer windowOffers      // the hand-offs made and when the next one is due
	sends windowSends       // the quota counted, the reminder, the one-at-a-time lock
	wake  workflow.Channel  // wakes the main loop when a handler's work met the account's pause
}

// windowMessage is what the window learned of its message and the agent's work on it.
type windowMessage struct {
	key       string // the message's key: a finish names it (the input's, else the first hand-off's)
	sessionID string // the current agent session ("" before a hand-off): sends go under it
	verdict   string // handled or failed once finished through this window: no more offers or sends
	confirmed bool   // a send of this run was accepted by iLink: an answer's "handled" stands
	finishing int    // finishes in progress: no re-offer while one may record the verdict
}

// windowOffers is the hand-offs of the message to its agent.
type windowOffers struct {
	made            int       // hand-offs made, the one before the start included: the next attempt is made+1
	at              time.Time // when the last one ended: the next re-offer is ReofferAfter later
	due             bool      // the unhandled message waits to be offered again
	awaitingAccount bool      // the account's pause refused work: offer again once it is active
}

// windowSends is the window's quota and the order of its sends.
type windowSends struct {
	used     int32          // sends reserved or spent, of in.MaxSends: the validator refuses past it
	reminded bool           // the reminder's time came (sent or not needed): never a second one
	lock     workflow.Mutex // runs sends, finishes, held replies and the reminder one at a time
}

// newWindow is the state of a window workflow just started with in. An offer made before
// the start is known at once, so that an Update that arrived with the start is validated
// against it (takeOffer takes the rest of it).
func newWindow(ctx workflow.Context, in wfapi.WindowInput) *window {
	w := &window{in: in, state: windowOpen, msg: windowMessage{key: in.MessageKey},
		sends: windowSends{used: in.SendsUsed, lock: workflow.NewMutex(ctx)},
		wake:  workflow.NewBufferedChannel(ctx, 1)}
	if o := in.Offered; in.Deliverable && o != nil {
		w.msg.key, w.msg.sessionID = o.MessageKey, o.SessionID
		if o.Failed {
			w.msg.verdict = vocab.MessageFailed
		}
	}
	return w
}

// ReplyWindow owns one reply window from opening to retirement: it
// opens the agent session for the deliverable message and hands it to the agent, sends
// the replies the hand-off answered with and marks the message handled when the answer
// says so, accepts sends as Updates whose validator refuses what the store would refuse
// (retired, expired, quota) so a refused send writes nothing and leaves no history, runs
// each send one at a time, accepts the agent's verdict as the Update finish, offers an
// unhandled message again every ReofferAfter while the window is open, offers it again at
// once when its account resumes after a pause that refused its hand-off or a reply,
// expires the window on a timer at expires_at, and ends early when retired (see
// docs/architecture.md#temporal-orchestration and docs/agents.md#agent-hand-off).
func ReplyWindow(ctx workflow.Context, in wfapi.WindowInput) error {
	w := newWindow(ctx, in)
	if err := w.register(ctx); err != nil {
		return err
	}
	retired := workflow.GetSignalChannel(ctx, wfapi.SignalRetired)
	resumed := workflow.GetSignalChannel(ctx, wfapi.SignalAccountResumed)

	w.deliverHeld(ctx) // the conversation's held replies go before anything of this window's answer
	w.firstOffer(ctx)
	for w.state == windowOpen {
		w.step(ctx, retired, resumed)
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// register sets the window's query and Update handlers (window_handlers.go).
func (w *window) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryWindowState, w.query); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateSend, w.send,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateFinish, w.finishUpdate,
		workflow.UpdateHandlerOptions{Validator: w.validateFinish})
}

// timedEvent is what the main loop sleeps until.
type timedEvent int

// The main loop's timed events.
const (
	atExpiry   timedEvent = iota // the window's end: ExpireWindow
	atReoffer                    // the unhandled message's next offer
	atReminder                   // the bot's reminder before the end
)

// nextEvent is the window's next timed event and how long until it: the expiry, unless a
// re-offer due before it or the reminder comes first.
func (w *window) nextEvent(now time.Time) (time.Duration, timedEvent) {
	wait, event := w.in.ExpiresAt.Sub(now), atExpiry
	if w.reofferPending() {
		if at := w.offer.at.Add(w.reofferAfter()); at.Before(w.in.ExpiresAt) {
			wait, event = at.Sub(now), atReoffer
		}
	}
	if at := w.reminderAt(); !at.IsZero() && at.Sub(now) < wait {
		wait, event = at.Sub(now), atReminder
	}
	return wait, event
}

// step is one turn of the main loop: it sleeps until the next timed event or a signal
// and acts on what woke it. The retired signal ends the window; a resume (or a refusal by
// the account's pause, through wake) offers the message again once the account is
// active; a timer runs its event.
func (w *window) step(ctx workflow.Context, retired, resumed workflow.ReceiveChannel) {
	wait, event := w.nextEvent(workflow.Now(ctx))
	fired := sleepOrSignal(ctx, wait, retired, resumed, w.wake)
	switch {
	case retired.ReceiveAsync(nil):
		w.state = windowRetired
	case drainedAny(resumed, w.wake):
		w.offerIfActive(ctx)
	case !fired:
		// Woken with nothing left to act on: sleep again.
	case event == atReminder:
		w.remind(ctx)
	case event == atReoffer:
		if w.reofferPending() { // not finished while waiting
			w.handOff(ctx)
		}
	default:
		w.expire(ctx, retired)
	}
}

// expire ends the window at its expiry as the store decides (ExpireWindow): expired, or
// retired when the store found it superseded or cancelled meanwhile. A refusal (our clock
// is behind the store's expiry) waits a second more.
func (w *window) expire(ctx workflow.Context, retired workflow.ReceiveChannel) {
	var st activities.WindowState
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.ExpireWindow,
		activities.ExpireInput{ReplyWindowID: w.in.ReplyWindowID, Now: workflow.Now(ctx)}).Get(ctx, &st)
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("expire refused", "window", w.in.ReplyWindowID, "error", err)
		sleepOrSignal(ctx, time.Second, retired)
	case st.State == vocab.WindowExpired:
		w.state = windowExpired
	case st.State != vocab.WindowOpen:
		w.state = windowRetired
	}
}

// firstOffer is the window's first hand-off. The offer made before the start
// (wfclient.LaunchWindow, the one place a first offer is made outside the workflow) is
// taken from the input at no activity; when none came with the start (a sync or
// reconcile start, or an offer that failed for now) the message is offered at once
// through handOff, the path of every later offer.
func (w *window) firstOffer(ctx workflow.Context) {
	switch o := w.in.Offered; {
	case !w.in.Deliverable:
	case o != nil:
		w.takeOffer(ctx, *o)
	default:
		w.handOff(ctx)
	}
}

// reofferAfter is the re-offer interval (negative: never).
func (w *window) reofferAfter() time.Duration {
	if w.in.ReofferAfter == 0 {
		return wfapi.DefaultReofferAfter
	}
	return w.in.ReofferAfter.D()
}

// reofferPending reports whether the message waits to be offered again.
func (w *window) reofferPending() bool {
	return w.offer.due && w.in.Deliverable && w.msg.verdict == "" && w.msg.finishing == 0 && w.reofferAfter() > 0
}

// awaitForAccount records that the account's pause refused the window's work and wakes
// the main loop, which offers the message again once the account is active.
func (w *window) awaitForAccount() {
	if !w.offer.awaitingAccount {
		w.offer.awaitingAccount = true
		w.wake.SendAsync(nil)
	}
}

// offerIfActive runs when the account was resumed (signal) or a pause refused work
// (wake): while the window waits for its account, it reads the account and, once it is
// active, offers the message again. Reading after the refusal closes the race with a
// resume whose signal came before the refusal was known.
func (w *window) offerIfActive(ctx workflow.Context) {
	if !w.offer.awaitingAccount {
		return
	}
	var st activities.AccountState
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.ReadAccountState,
		activities.AccountRef{AccountKey: w.in.AccountKey}).Get(ctx, &st)
	if err != nil || st.Status != vocab.AccountActive {
		return // still paused (the resume signals), or unreadable (the re-offer timer)
	}
	w.offer.awaitingAccount = false
	if w.in.Deliverable && w.msg.verdict == "" && w.msg.finishing == 0 && w.state == windowOpen {
		w.handOff(ctx)
	}
}

// reminderAt is when the window's reminder is due (zero: none, or done).
func (w *window) reminderAt() time.Time {
	if w.sends.reminded || w.in.RemindBefore <= 0 {
		return time.Time{}
	}
	return w.in.ExpiresAt.Add(-w.in.RemindBefore.D())
}

// remind sends the window's reminder (SendReminder: only when the conversation holds
// replies, once), under the sending lock.
func (w *window) remind(ctx workflow.Context) {
	w.sends.reminded = true
	if err := w.sends.lock.Lock(ctx); err != nil {
		return
	}
	var out wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), activities.SendReminder,
		activities.ReminderInput{ReplyWindowID: w.in.ReplyWindowID}).Get(ctx, &out)
	w.sends.lock.Unlock()
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("reminder not sent", "window", w.in.ReplyWindowID, "error", err)
	case out.ClientMessageID != "":
		w.sends.used = w.in.MaxSends - out.SendsLeft
	}
}

// drainedAny empties signal channels without payload and reports whether any held one.
func drainedAny(chs ...workflow.ReceiveChannel) bool {
	got := false
	for _, ch := range chs {
		if drained(ch) {
			got = true
		}
	}
	return got
}

// drained empties a signal channel without payload and reports whether it held any.
func drained(ch workflow.ReceiveChannel) bool {
	got := false
	for ch.ReceiveAsync(nil) {
		got = true
	}
	return got
}
