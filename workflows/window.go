package workflows

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
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

// window is the whole state of one ReplyWindow workflow (design.md §4): the input it was
// started with (never changed), where it stands, what it learned of the message and its
// agent session, the quota it counts, the hand-offs it made and the verdict.
type window struct {
	in    wfapi.WindowInput
	state windowState

	// messageKey and sessionID name the deliverable message and its current agent
	// session ("" before the first hand-off).
	messageKey string
	sessionID  string
	// sendsUsed counts the quota reserved or spent, of maxSends.
	sendsUsed, maxSends int32

	// offers counts hand-offs (the attempt of the next one is offers+1); offeredAt is
	// when the last one ended; reofferDue is set while an unhandled message waits to be
	// offered again.
	offers     int
	offeredAt  time.Time
	reofferDue bool

	// verdict is handled or failed once the message was finished through this workflow;
	// finishing counts the finishes in progress.
	verdict   string
	finishing int
	// confirmed is set once a send of this run was confirmed sent (accepted by iLink).
	confirmed bool
	// awaitingAccount is set when the account's pause refused the window's work (a
	// hand-off, a reply): the message is offered again as soon as the account is active.
	// wake tells the main loop (which may be asleep while an Update's send is refused).
	awaitingAccount bool
	wake            workflow.Channel

	// sending runs the window's sends (and finishes) one at a time.
	sending workflow.Mutex
	// reminded is set once the reminder's time came (sent or not needed).
	reminded bool
}

// newWindow is the state of a window workflow just started with in. An offer made before
// the start is known at once, so that an Update that arrived with the start is validated
// against it (firstOffer takes the rest of it).
func newWindow(ctx workflow.Context, in wfapi.WindowInput) *window {
	w := &window{in: in, state: windowOpen, messageKey: in.MessageKey,
		sendsUsed: in.SendsUsed, maxSends: in.MaxSends, sending: workflow.NewMutex(ctx),
		wake: workflow.NewBufferedChannel(ctx, 1)}
	if o := in.Offered; in.Deliverable && o != nil {
		w.messageKey, w.sessionID = o.MessageKey, o.SessionID
		if o.Failed {
			w.verdict = vocab.MessageFailed
		}
	}
	return w
}

// refusal is the typed error an update validator or handler answers with; its type is
// the store code, so agents branch on it.
func refusal(code vocab.Code, format string, args ...any) error {
	return temporal.NewApplicationError(fmt.Sprintf(format, args...), string(code))
}

// ReplyWindow owns one reply window from opening to retirement (design.md §4, §5): it
// opens the agent session for the deliverable message and hands it to the agent, sends
// the replies the hand-off answered with and marks the message handled when the answer
// says so, accepts sends as Updates whose validator refuses what the store would refuse
// (retired, expired, quota) so a refused send writes nothing and leaves no history, runs
// each send one at a time, accepts the agent's verdict as the Update finish, offers an
// unhandled message again every ReofferAfter while the window is open, offers it again at
// once when its account resumes after a pause that refused its hand-off or a reply,
// expires the window on a timer at expires_at, and ends early when retired.
func ReplyWindow(ctx workflow.Context, in wfapi.WindowInput) error {
	w := newWindow(ctx, in)
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryWindowState, w.query); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateSend, w.send,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateFinish, w.finishUpdate,
		workflow.UpdateHandlerOptions{Validator: w.validateFinish}); err != nil {
		return err
	}
	retired := workflow.GetSignalChannel(ctx, wfapi.SignalRetired)
	resumed := workflow.GetSignalChannel(ctx, wfapi.SignalAccountResumed)

	// The conversation's held replies go first, before anything of this window's answer.
	w.deliverHeld(ctx)
	switch {
	case in.Deliverable && in.Offered != nil:
		// The poll already handed the message off (one activity less per message).
		w.firstOffer(ctx, *in.Offered)
	case in.Deliverable:
		w.handOff(ctx)
	}

	for w.state == windowOpen {
		now := workflow.Now(ctx)
		wait := w.in.ExpiresAt.Sub(now)
		offerAgain := false
		if w.reofferPending() {
			if at := w.offeredAt.Add(w.reofferAfter()); at.Before(w.in.ExpiresAt) {
				wait, offerAgain = at.Sub(now), true
			}
		}
		remind := false
		if at := w.reminderAt(); !at.IsZero() && at.Sub(now) < wait {
			wait, offerAgain, remind = at.Sub(now), false, true
		}
		fired := sleepOrSignal(ctx, wait, retired, resumed, w.wake)
		if retired.ReceiveAsync(nil) {
			w.state = windowRetired
			break
		}
		if woke := drained(resumed); drained(w.wake) || woke {
			w.offerIfActive(ctx)
			continue
		}
		if !fired {
			continue
		}
		if remind {
			w.remind(ctx)
			continue
		}
		if offerAgain {
			if w.reofferPending() { // not finished while waiting
				w.handOff(ctx)
			}
			continue
		}
		var st actapi.WindowState
		err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), actapi.ExpireWindow,
			actapi.ExpireInput{ReplyWindowID: in.ReplyWindowID, Now: workflow.Now(ctx)}).Get(ctx, &st)
		switch {
		case err != nil:
			// The store refused because our clock is behind its expiry: wait a little more.
			workflow.GetLogger(ctx).Warn("expire refused", "window", in.ReplyWindowID, "error", err)
			sleepOrSignal(ctx, time.Second, retired)
		case st.State == vocab.WindowExpired:
			w.state = windowExpired
		case st.State != vocab.WindowOpen:
			w.state = windowRetired
		}
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// awaitForAccount records that the account's pause refused the window's work and wakes
// the main loop, which offers the message again once the account is active.
func (w *window) awaitForAccount() {
	if !w.awaitingAccount {
		w.awaitingAccount = true
		w.wake.SendAsync(nil)
	}
}

// offerIfActive runs when the account was resumed (signal) or a pause refused work
// (wake): while the window waits for its account, it reads the account and, once it is
// active, offers the message again. Reading after the refusal closes the race with a
// resume whose signal came before the refusal was known.
func (w *window) offerIfActive(ctx workflow.Context) {
	if !w.awaitingAccount {
		return
	}
	var st actapi.AccountState
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), actapi.ReadAccountState,
		actapi.AccountRef{AccountKey: w.in.AccountKey}).Get(ctx, &st)
	if err != nil || st.Status != vocab.AccountActive {
		return // still paused (the resume signals), or unreadable (the re-offer timer)
	}
	w.awaitingAccount = false
	if w.in.Deliverable && w.verdict == "" && w.finishing == 0 && w.state == windowOpen {
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
	return w.reofferDue && w.in.Deliverable && w.verdict == "" && w.finishing == 0 && w.reofferAfter() > 0
}

// handOff opens a new agent session and hands the message to the agent (the first offer
// or a re-offer), sends the replies the handler answered with, one at a time through the
// path of the send Update, and marks the message handled when the answer says so. An
// unhandled message is offered again later; a refusal (message finished, window retired)
// or a permanent failure (the activity marked the message failed) ends the offers.
func (w *window) handOff(ctx workflow.Context) {
	w.offers++
	attempt := w.offers
	var out actapi.HandOffOutput
	err := workflow.ExecuteActivity(withOptions(ctx, handOffOptions), actapi.HandOff,
		actapi.HandOffInput{ReplyWindowID: w.in.ReplyWindowID, Attempt: attempt}).Get(ctx, &out)
	w.offeredAt = workflow.Now(ctx)
	w.took(ctx, attempt, out, err)
}

// firstOffer takes the hand-off the poll made before it started this workflow as the
// first offer.
func (w *window) firstOffer(ctx workflow.Context, o wfapi.Offer) {
	w.offers, w.offeredAt = 1, workflow.Now(ctx)
	if o.Failed { // the verdict was set before the handlers were registered; no re-offer
		workflow.GetLogger(ctx).Warn("hand-off failed permanently; the message is failed", "window", w.in.ReplyWindowID, "attempt", 1)
		return
	}
	w.took(ctx, 1, actapi.HandOffOutput{SessionID: o.SessionID, MessageKey: o.MessageKey,
		Delivered: o.Delivered, Replies: o.Replies, Handled: o.Handled}, nil)
}

// took applies the outcome of a hand-off: on success it sends the replies the handler
// answered with and marks the message handled when the answer says so.
func (w *window) took(ctx workflow.Context, attempt int, out actapi.HandOffOutput, err error) {
	log := workflow.GetLogger(ctx)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.NonRetryable() {
			w.reofferDue = false
			switch app.Type() {
			case actapi.ErrTypeHandOffFailed:
				w.verdict = vocab.MessageFailed
				log.Warn("hand-off failed permanently; the message is failed", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
			case string(vocab.CodeAttemptConflict):
				log.Info("message already finished; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt)
			case string(vocab.CodeAccountNotActive):
				// Paused: the message is offered again when the account resumes (or at
				// the next re-offer, should the resume not be told).
				w.awaitForAccount()
				w.reofferDue = true
				log.Info("hand-off refused while the account is not active; offered again when it resumes",
					"window", w.in.ReplyWindowID, "attempt", attempt)
			case string(vocab.CodeReplyWindowInactive), string(vocab.CodeReplyWindowExpired):
				log.Info("the window ended before its hand-off; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt)
			default:
				log.Warn("hand-off refused; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
			}
			return
		}
		w.reofferDue = true
		log.Warn("hand-off failed; the message is offered again later", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
		return
	}
	w.sessionID = out.SessionID
	if w.messageKey == "" {
		w.messageKey = out.MessageKey
	}
	// Without a handler nobody is there to offer it to again.
	w.reofferDue = out.Delivered
	attempted, windowEnded, held := 0, false, false
	for i, text := range out.Replies {
		attempted++
		// The handler's answer is its final answer: it may use the slots kept for it.
		req := wfapi.SendRequest{Type: "text", Text: text, RequestID: fmt.Sprintf("handoff-%d-%d", attempt, i+1), Final: true}
		finishKey := ""
		if out.Handled && w.verdict == "" && i == len(out.Replies)-1 {
			// The answer's last reply, once sent, marks the message handled in the same
			// activity (a sent reply is the answer the verdict needs); otherwise the
			// verdict below is recorded on its own.
			finishKey = w.messageKey
		}
		res, err := w.sendOne(ctx, req, finishKey)
		code := res.ErrorCode
		if err != nil {
			code = refusalType(err)
		}
		switch {
		case err == nil && res.Status == vocab.AttemptSent:
		case err == nil && res.Status == wfapi.SendHeld:
			held = true
			log.Info("reply of the hand-off held for the next window", "window", w.in.ReplyWindowID, "request", req.RequestID,
				"held_reply", res.HeldID, "reason", res.ErrorCode)
		case code == string(vocab.CodeReplyWindowInactive), code == string(vocab.CodeReplyWindowExpired):
			// Superseded or expired meanwhile (refused, or failed as retired): the message
			// went with the next delivery, or the expiry settled it.
			windowEnded = true
			log.Info("reply of the hand-off not sent: the window ended", "window", w.in.ReplyWindowID, "request", req.RequestID)
		case code == string(vocab.CodeAccountNotActive):
			log.Info("reply of the hand-off not sent: the account is not active; the message is offered again when it resumes",
				"window", w.in.ReplyWindowID, "request", req.RequestID)
		case err != nil:
			log.Warn("reply of the hand-off not sent", "window", w.in.ReplyWindowID, "request", req.RequestID, "error", err)
		default:
			log.Warn("reply of the hand-off", "window", w.in.ReplyWindowID, "request", req.RequestID,
				"status", res.Status, "error_code", res.ErrorCode)
		}
	}
	if attempted > 0 && !w.confirmed && !held && (windowEnded || w.awaitingAccount) {
		// Nothing reached the user because the window ended (its message is no longer
		// this window's to finish) or the account was paused (offered again on resume):
		// no verdict now.
		return
	}
	if out.Handled && w.verdict == "" {
		// An answer's "handled" stands only if the user got an answer: when it carried
		// replies and none of them (nor any other send of the window) was confirmed sent
		// (refused, failed, or an unknown outcome), the message is failed with the reason,
		// never falsely handled.
		// A held reply is an answer on its way: the store makes the message held until
		// it is sent.
		status, reason := vocab.MessageHandled, ""
		if attempted > 0 && !w.confirmed && !held {
			status, reason = vocab.MessageFailed, "the agent answered handled, but none of its replies was confirmed sent"
			log.Warn("hand-off answered handled but no reply was confirmed sent; the message is failed", "window", w.in.ReplyWindowID)
		}
		if _, err := w.finish(ctx, status, reason); err != nil {
			if refusalType(err) == string(vocab.CodeAttemptConflict) {
				log.Info("message already finished; not marked "+status, "window", w.in.ReplyWindowID, "error", err)
			} else {
				log.Warn("could not mark the message "+status, "window", w.in.ReplyWindowID, "error", err)
			}
		}
	}
}

func (w *window) query() (wfapi.WindowState, error) {
	return wfapi.WindowState{ReplyWindowID: w.in.ReplyWindowID, State: string(w.state), ExpiresAt: w.in.ExpiresAt,
		SendsLeft: w.maxSends - w.sendsUsed, SessionID: w.sessionID, Offers: w.offers, Verdict: w.verdict}, nil
}

// holdReason is why the window cannot carry req (expired, or its quota or the sends
// kept for the final answer used up: vocab.QuotaRefusal, the store's rule), or "".
func (w *window) holdReason(ctx workflow.Context, req wfapi.SendRequest) vocab.Code {
	if w.state == windowExpired || (w.state == windowOpen && !workflow.Now(ctx).Before(w.in.ExpiresAt)) {
		return vocab.CodeReplyWindowExpired
	}
	if w.state != windowOpen {
		return ""
	}
	return vocab.QuotaRefusal(w.replySends(), w.sendsUsed, w.in.FinalSlots, req.Final)
}

// replySends is the quota the replies see: while the bot's reminder is on, the last send
// is kept for it (the store's rule, mirrored).
func (w *window) replySends() int32 {
	if w.in.RemindBefore > 0 && w.maxSends > 1 {
		return w.maxSends - 1
	}
	return w.maxSends
}

// reminderAt is when the window's reminder is due (zero: none, or done).
func (w *window) reminderAt() time.Time {
	if w.reminded || w.in.RemindBefore <= 0 {
		return time.Time{}
	}
	return w.in.ExpiresAt.Add(-w.in.RemindBefore.D())
}

// remind sends the window's reminder (SendReminder: only when the conversation holds
// replies, once), under the sending lock.
func (w *window) remind(ctx workflow.Context) {
	w.reminded = true
	if err := w.sending.Lock(ctx); err != nil {
		return
	}
	var out wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), actapi.SendReminder,
		actapi.ReminderInput{ReplyWindowID: w.in.ReplyWindowID}).Get(ctx, &out)
	w.sending.Unlock()
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("reminder not sent", "window", w.in.ReplyWindowID, "error", err)
	case out.ClientMessageID != "":
		w.sendsUsed = w.maxSends - out.SendsLeft
	}
}

// holds reports whether req is to be held rather than sent: the window cannot carry it
// and the caller did not ask for the refusal. Only text is held.
func (w *window) holds(ctx workflow.Context, req wfapi.SendRequest) bool {
	return !req.NoHold && req.Type == "text" && w.holdReason(ctx, req) != ""
}

// validate refuses, before anything is written or recorded, what the store would refuse.
// A reply the window cannot carry passes when it is to be held (holds).
func (w *window) validate(ctx workflow.Context, req wfapi.SendRequest) error {
	hold := w.holds(ctx, req)
	switch code := w.holdReason(ctx, req); {
	case hold:
	case code == vocab.CodeReplyWindowExpired:
		return refusal(code, "reply window has expired")
	case w.state != windowOpen:
		return refusal(vocab.CodeReplyWindowInactive, "reply window is %s", w.state)
	case code == vocab.CodeReplySlotsReserved:
		return refusal(code, "the window's sends left are kept for the final answer")
	case code != "":
		return refusal(code, "reply quota of the window is exhausted")
	}
	switch {
	case w.sessionID == "" && req.SessionID == "":
		return refusal(vocab.CodeInvalidAgentSession, "the window has no agent session")
	case w.verdict != "":
		return refusal(vocab.CodeInvalidAgentSession, "the message is already %s", w.verdict)
	case len(req.RequestID) > 256:
		return refusal(vocab.CodeInvalidInput, "request id is too long")
	case req.Type == "image" || req.Type == "file" || req.Type == "video":
		if req.Media == nil || req.Media.MediaID == "" || req.Text != "" || (req.Type == "file" && req.Media.FileName == "") {
			return refusal(vocab.CodeInvalidInput, "a %s reply needs staged media and no text", req.Type)
		}
	case req.Type != "text":
		return refusal(vocab.CodeInvalidInput, "only text, image, file and video items can be sent through the update")
	case req.Media != nil:
		return refusal(vocab.CodeInvalidInput, "a text reply carries no media")
	case vocab.CheckText(req.Text, vocab.MaxTextBytes) != vocab.TextOK:
		return refusal(vocab.CodeInvalidInput, "%s", vocab.CheckText(req.Text, vocab.MaxTextBytes).Describe(len(req.Text), vocab.MaxTextBytes))
	}
	return nil
}

// send runs one reply of the Update; its request id defaults to the update id.
func (w *window) send(ctx workflow.Context, req wfapi.SendRequest) (wfapi.SendResult, error) {
	if req.RequestID == "" {
		req.RequestID = workflow.GetCurrentUpdateInfo(ctx).ID
	}
	return w.sendOne(ctx, req, "")
}

// sendOne runs one reply (of the Update or of a hand-off's answer); sends of a window run
// one at a time. finishKey, when set, is the message the reply finishes as handled once
// it is sent (the last reply of a hand-off's handled answer). The lock is released without defer: a workflow evicted from the cache
// unwinds its coroutines, and a deferred Unlock would then run beside another coroutine's
// Lock (a data race inside the SDK's mutex).
func (w *window) sendOne(ctx workflow.Context, req wfapi.SendRequest, finishKey string) (wfapi.SendResult, error) {
	if err := w.sending.Lock(ctx); err != nil {
		return wfapi.SendResult{}, err
	}
	res, err := w.sendLocked(ctx, req, finishKey)
	w.sending.Unlock()
	return res, err
}

// sendLocked is sendOne's send, run under the window's sending lock.
func (w *window) sendLocked(ctx workflow.Context, req wfapi.SendRequest, finishKey string) (wfapi.SendResult, error) {
	if err := w.validate(ctx, req); err != nil { // the state may have moved while waiting
		return wfapi.SendResult{}, err
	}
	in := actapi.SendInput{SessionID: w.sessionID, RequestID: req.RequestID,
		Content: contentOf(req), Final: req.Final, FinishHandled: finishKey}
	if req.SessionID != "" && req.SessionID != w.sessionID {
		in.SessionID, in.ReplyWindowID = req.SessionID, w.in.ReplyWindowID // checked against this window
	}
	if w.holds(ctx, req) {
		return w.hold(ctx, req, in)
	}
	var ans actapi.SendAnswer
	err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), actapi.Send, in).Get(ctx, &ans)
	if err != nil {
		return wfapi.SendResult{}, err
	}
	out := ans.SendOutput
	if out.Status == vocab.AttemptSent {
		w.confirmed = true
	}
	if ans.MessageStatus != "" {
		w.verdict, w.reofferDue = ans.MessageStatus, false
	}
	switch {
	case out.ErrorCode == string(vocab.CodeReplyQuotaExhausted):
		w.sendsUsed = w.maxSends
	case out.AttemptID != "":
		w.sendsUsed = w.maxSends - out.SendsLeft
	}
	if out.AttemptID == "" && holdable(out.ErrorCode) && !req.NoHold && req.Type == "text" {
		// The store, whose rule this window mirrors, found no room: hold it after all.
		return w.hold(ctx, req, in)
	}
	if out.ErrorCode == string(vocab.CodeAccountNotActive) {
		w.awaitForAccount() // the pause refused it: the message is offered again on resume
	}
	if out.Status == "" && out.ErrorCode != "" {
		// Refused by the store (or the throttle breaker) before anything was sent.
		return out, temporal.NewApplicationError("send refused: "+out.ErrorCode, out.ErrorCode, out)
	}
	return out, nil
}

// deliverHeld sends the conversation's held replies first, in order, through this
// window, under the sending lock (the window's own replies wait for them). It stops at
// the first a store rule refuses (the kept slots or the quota reached, the window ended,
// the account paused, the breaker open): what is left stays held for a later window. A
// held reply past its age limit is dropped unsent and the next one goes.
func (w *window) deliverHeld(ctx workflow.Context) {
	if w.in.HeldWaiting <= 0 {
		return
	}
	if err := w.sending.Lock(ctx); err != nil {
		return
	}
	w.deliverHeldLocked(ctx)
	w.sending.Unlock()
}

func (w *window) deliverHeldLocked(ctx workflow.Context) {
	log := workflow.GetLogger(ctx)
	var ids []string
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), actapi.WaitingHeld,
		actapi.Conversation{AccountKey: w.in.AccountKey, PeerID: w.in.PeerID}).Get(ctx, &ids)
	if err != nil {
		log.Warn("held replies not read; they wait for a later window", "window", w.in.ReplyWindowID, "error", err)
		return
	}
	for _, id := range ids {
		if w.state != windowOpen {
			return
		}
		var out wfapi.SendResult
		err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), actapi.SendHeld,
			actapi.SendHeldInput{ReplyWindowID: w.in.ReplyWindowID, HeldID: id}).Get(ctx, &out)
		if err != nil {
			log.Warn("held reply not sent", "window", w.in.ReplyWindowID, "held_reply", id, "error", err)
			return
		}
		if out.AttemptID != "" && out.ClientMessageID != "" {
			w.sendsUsed = w.maxSends - out.SendsLeft
		}
		switch {
		case out.ErrorCode == string(vocab.CodeHeldReplyExpired):
			continue
		case out.ClientMessageID == "" && out.ErrorCode != "":
			// Refused before any attempt: the rest waits.
			log.Info("held replies wait for a later window", "window", w.in.ReplyWindowID, "held_reply", id, "code", out.ErrorCode)
			if out.ErrorCode == string(vocab.CodeAccountNotActive) {
				w.awaitForAccount()
			}
			return
		}
		log.Info("held reply delivered", "window", w.in.ReplyWindowID, "held_reply", id, "status", out.Status, "code", out.ErrorCode)
	}
}

// hold holds a reply the window cannot carry (HoldReply); a store refusal (limits, a
// removed bot, ...) is answered with its code, nothing held.
func (w *window) hold(ctx workflow.Context, req wfapi.SendRequest, in actapi.SendInput) (wfapi.SendResult, error) {
	var out wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), actapi.HoldReply, actapi.HoldInput{
		SessionID: in.SessionID, ReplyWindowID: w.in.ReplyWindowID, RequestID: req.RequestID,
		Content: in.Content, Final: req.Final}).Get(ctx, &out)
	if err == nil && out.Status != wfapi.SendHeld {
		return out, temporal.NewApplicationError("hold refused: "+out.ErrorCode, out.ErrorCode, out)
	}
	return out, err
}

// holdable reports whether a store refusal is one a held reply answers.
func holdable(code string) bool {
	switch vocab.Code(code) {
	case vocab.CodeReplyQuotaExhausted, vocab.CodeReplySlotsReserved, vocab.CodeReplyWindowExpired:
		return true
	}
	return false
}

// verdictOf is the message status a finish request asks for.
func verdictOf(req wfapi.FinishRequest) string {
	if req.Handled {
		return vocab.MessageHandled
	}
	return vocab.MessageFailed
}

// sameVerdict reports whether a message's status matches the verdict asked for: held is
// handled whose answer waits to be sent.
func sameVerdict(status, verdict string) bool {
	return status == verdict || (status == vocab.MessageHeld && verdict == vocab.MessageHandled)
}

// validateFinish refuses a finish that cannot be recorded, before anything is written.
func (w *window) validateFinish(_ workflow.Context, req wfapi.FinishRequest) error {
	switch {
	case !w.in.Deliverable || w.sessionID == "":
		return refusal(vocab.CodeInvalidAgentSession, "the window's message was not handed to an agent")
	case len(req.Reason) > vocab.MaxReasonBytes || !utf8.ValidString(req.Reason):
		return refusal(vocab.CodeInvalidInput, "reason must be at most %d bytes of UTF-8", vocab.MaxReasonBytes)
	case w.verdict != "" && !sameVerdict(w.verdict, verdictOf(req)):
		return refusal(vocab.CodeAttemptConflict, "message is already %s", w.verdict)
	}
	return nil
}

// finishUpdate records an agent's verdict on the message.
func (w *window) finishUpdate(ctx workflow.Context, req wfapi.FinishRequest) (wfapi.FinishResult, error) {
	return w.finish(ctx, verdictOf(req), req.Reason)
}

// finish marks the message handled or failed (FinishMessage) once the sends in progress
// are done, and ends the re-offers. A store refusal is answered with its code.
// Like sendOne, it releases the lock (and its count) without defer.
func (w *window) finish(ctx workflow.Context, status, reason string) (wfapi.FinishResult, error) {
	w.finishing++
	if err := w.sending.Lock(ctx); err != nil {
		w.finishing--
		return wfapi.FinishResult{}, err
	}
	res, err := w.finishLocked(ctx, status, reason)
	w.sending.Unlock()
	w.finishing--
	return res, err
}

// finishLocked is finish's store call, run under the window's sending lock.
func (w *window) finishLocked(ctx workflow.Context, status, reason string) (wfapi.FinishResult, error) {
	if w.verdict != "" && !sameVerdict(w.verdict, status) { // decided while waiting
		return wfapi.FinishResult{}, refusal(vocab.CodeAttemptConflict, "message is already %s", w.verdict)
	}
	var out actapi.FinishOutput
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), actapi.FinishMessage,
		actapi.FinishInput{MessageKey: w.messageKey, Status: status, Reason: reason}).Get(ctx, &out)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != "" {
			return wfapi.FinishResult{}, temporal.NewApplicationError(app.Error(), app.Type())
		}
		return wfapi.FinishResult{}, err
	}
	w.verdict, w.reofferDue = out.Status, false
	return wfapi.FinishResult{MessageKey: w.messageKey, Status: out.Status}, nil
}

// contentOf is the store content of a send request (media by its staged id only).
func contentOf(req wfapi.SendRequest) vocab.Content {
	c := vocab.Content{Type: req.Type, Text: req.Text}
	if m := req.Media; m != nil {
		c.Media = &vocab.MediaRef{MediaID: m.MediaID, FileName: m.FileName, Size: m.Size, SHA256: m.SHA256}
	}
	return c
}

// refusalType is the type of an application error (a store code for refusals), or "".
func refusalType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// drained empties a signal channel without payload and reports whether it held any.
func drained(ch workflow.ReceiveChannel) bool {
	got := false
	for ch.ReceiveAsync(nil) {
		got = true
	}
	return got
}
