package workflows

// The ReplyWindow's handlers (window.go holds the state and the main loop): the state
// query, the send and finish Updates with their validators, and the sends they run one at
// a time (the replies of a hand-off's answer, the held replies and the holds among them).

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// query answers the state query (wfapi.QueryWindowState).
func (w *window) query() (wfapi.WindowState, error) {
	return wfapi.WindowState{ReplyWindowID: w.in.ReplyWindowID, State: string(w.state), ExpiresAt: w.in.ExpiresAt,
		SendsLeft: w.in.MaxSends - w.sends.used, SessionID: w.msg.sessionID, Offers: w.offer.made, Verdict: w.msg.verdict}, nil
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
	case w.msg.sessionID == "" && req.SessionID == "":
		return refusal(vocab.CodeInvalidAgentSession, "the window has no agent session")
	case w.msg.verdict != "":
		return refusal(vocab.CodeInvalidAgentSession, "the message is already %s", w.msg.verdict)
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

// holds reports whether req is to be held rather than sent: the window cannot carry it
// and the caller did not ask for the refusal. Only text is held.
func (w *window) holds(ctx workflow.Context, req wfapi.SendRequest) bool {
	return !req.NoHold && req.Type == "text" && w.holdReason(ctx, req) != ""
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
	return vocab.QuotaRefusal(w.replySends(), w.sends.used, w.in.FinalSlots, req.Final)
}

// replySends is the quota the replies see: while the bot's reminder is on, the last send
// is kept for it (the store's rule, mirrored).
func (w *window) replySends() int32 {
	if w.in.RemindBefore > 0 && w.in.MaxSends > 1 {
		return w.in.MaxSends - 1
	}
	return w.in.MaxSends
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
// it is sent (the last reply of a hand-off's handled answer). The lock is released
// without defer: a workflow evicted from the cache unwinds its coroutines, and a deferred
// Unlock would then run beside another coroutine's Lock (a data race inside the SDK's
// mutex).
func (w *window) sendOne(ctx workflow.Context, req wfapi.SendRequest, finishKey string) (wfapi.SendResult, error) {
	if err := w.sends.lock.Lock(ctx); err != nil {
		return wfapi.SendResult{}, err
	}
	res, err := w.sendLocked(ctx, req, finishKey)
	w.sends.lock.Unlock()
	return res, err
}

// sendLocked is sendOne's send, run under the window's sending lock.
func (w *window) sendLocked(ctx workflow.Context, req wfapi.SendRequest, finishKey string) (wfapi.SendResult, error) {
	if err := w.validate(ctx, req); err != nil { // the state may have moved while waiting
		return wfapi.SendResult{}, err
	}
	in := activities.SendInput{SessionID: w.msg.sessionID, RequestID: req.RequestID,
		Content: contentOf(req), Final: req.Final, FinishHandled: finishKey}
	if req.SessionID != "" && req.SessionID != w.msg.sessionID {
		in.SessionID, in.ReplyWindowID = req.SessionID, w.in.ReplyWindowID // checked against this window
	}
	if w.holds(ctx, req) {
		return w.hold(ctx, req, in)
	}
	var ans activities.SendAnswer
	err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), activities.Send, in).Get(ctx, &ans)
	if err != nil {
		return wfapi.SendResult{}, err
	}
	out := ans.SendOutput
	if out.Status == vocab.AttemptSent {
		w.msg.confirmed = true
	}
	if ans.MessageStatus != "" {
		w.msg.verdict, w.offer.due = ans.MessageStatus, false
	}
	switch {
	case out.ErrorCode == string(vocab.CodeReplyQuotaExhausted):
		w.sends.used = w.in.MaxSends
	case out.AttemptID != "":
		w.sends.used = w.in.MaxSends - out.SendsLeft
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

// hold holds a reply the window cannot carry (HoldReply); a store refusal (limits, a
// removed bot, ...) is answered with its code, nothing held.
func (w *window) hold(ctx workflow.Context, req wfapi.SendRequest, in activities.SendInput) (wfapi.SendResult, error) {
	var out wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.HoldReply, activities.HoldInput{
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

// deliverHeld sends the conversation's held replies first, in order, through this
// window, under the sending lock (the window's own replies wait for them). It stops at
// the first a store rule refuses (the kept slots or the quota reached, the window ended,
// the account paused, the breaker open): what is left stays held for a later window. A
// held reply past its age limit is dropped unsent and the next one goes.
func (w *window) deliverHeld(ctx workflow.Context) {
	if w.in.HeldWaiting <= 0 {
		return
	}
	if err := w.sends.lock.Lock(ctx); err != nil {
		return
	}
	w.deliverHeldLocked(ctx)
	w.sends.lock.Unlock()
}

// deliverHeldLocked is deliverHeld's delivery, run under the window's sending lock.
func (w *window) deliverHeldLocked(ctx workflow.Context) {
	log := workflow.GetLogger(ctx)
	var ids []string
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.WaitingHeld,
		activities.Conversation{AccountKey: w.in.AccountKey, PeerID: w.in.PeerID}).Get(ctx, &ids)
	if err != nil {
		log.Warn("held replies not read; they wait for a later window", "window", w.in.ReplyWindowID, "error", err)
		return
	}
	for _, id := range ids {
		if w.state != windowOpen {
			return
		}
		var out wfapi.SendResult
		err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), activities.SendHeld,
			activities.SendHeldInput{ReplyWindowID: w.in.ReplyWindowID, HeldID: id}).Get(ctx, &out)
		if err != nil {
			log.Warn("held reply not sent", "window", w.in.ReplyWindowID, "held_reply", id, "error", err)
			return
		}
		if out.AttemptID != "" && out.ClientMessageID != "" {
			w.sends.used = w.in.MaxSends - out.SendsLeft
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

// validateFinish refuses a finish that cannot be recorded, before anything is written.
func (w *window) validateFinish(_ workflow.Context, req wfapi.FinishRequest) error {
	switch {
	case !w.in.Deliverable || w.msg.sessionID == "":
		return refusal(vocab.CodeInvalidAgentSession, "the window's message was not handed to an agent")
	case len(req.Reason) > vocab.MaxReasonBytes || !utf8.ValidString(req.Reason):
		return refusal(vocab.CodeInvalidInput, "reason must be at most %d bytes of UTF-8", vocab.MaxReasonBytes)
	case w.msg.verdict != "" && !sameVerdict(w.msg.verdict, verdictOf(req)):
		return refusal(vocab.CodeAttemptConflict, "message is already %s", w.msg.verdict)
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
	w.msg.finishing++
	if err := w.sends.lock.Lock(ctx); err != nil {
		w.msg.finishing--
		return wfapi.FinishResult{}, err
	}
	res, err := w.finishLocked(ctx, status, reason)
	w.sends.lock.Unlock()
	w.msg.finishing--
	return res, err
}

// finishLocked is finish's store call, run under the window's sending lock.
func (w *window) finishLocked(ctx workflow.Context, status, reason string) (wfapi.FinishResult, error) {
	if w.msg.verdict != "" && !sameVerdict(w.msg.verdict, status) { // decided while waiting
		return wfapi.FinishResult{}, refusal(vocab.CodeAttemptConflict, "message is already %s", w.msg.verdict)
	}
	var out activities.FinishOutput
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.FinishMessage,
		activities.FinishInput{MessageKey: w.msg.key, Status: status, Reason: reason}).Get(ctx, &out)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != "" {
			return wfapi.FinishResult{}, temporal.NewApplicationError(app.Error(), app.Type())
		}
		return wfapi.FinishResult{}, err
	}
	w.msg.verdict, w.offer.due = out.Status, false
	return wfapi.FinishResult{MessageKey: w.msg.key, Status: out.Status}, nil
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

// contentOf is the store content of a send request (media by its staged id only).
func contentOf(req wfapi.SendRequest) vocab.Content {
	c := vocab.Content{Type: req.Type, Text: req.Text}
	if m := req.Media; m != nil {
		c.Media = &vocab.MediaRef{MediaID: m.MediaID, FileName: m.FileName, Size: m.Size, SHA256: m.SHA256}
	}
	return c
}

// refusal is the typed error an update validator or handler answers with; its type is
// the store code, so agents branch on it.
func refusal(code vocab.Code, format string, args ...any) error {
	return temporal.NewApplicationError(fmt.Sprintf(format, args...), string(code))
}

// refusalType is the type of an application error (a store code for refusals), or "".
func refusalType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}
