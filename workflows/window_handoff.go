package workflows

// The ReplyWindow's hand-offs (window.go holds the state and the main loop): one made by
// the workflow (handOff), the one made before its start (takeOffer), and what either's
// answer does (took).

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// handOff opens a new agent session and hands the message to the agent (the first offer
// or a re-offer), sends the replies the handler answered with, one at a time through the
// path of the send Update, and marks the message handled when the answer says so. An
// unhandled message is offered again later; a refusal (message finished, window retired)
// or a permanent failure (the activity marked the message failed) ends the offers.
func (w *window) handOff(ctx workflow.Context) {
	w.offer.made++
	attempt := w.offer.made
	var out activities.HandOffOutput
	err := workflow.ExecuteActivity(withOptions(ctx, handOffOptions), activities.HandOff,
		activities.HandOffInput{ReplyWindowID: w.in.ReplyWindowID, Attempt: attempt}).Get(ctx, &out)
	w.offer.at = workflow.Now(ctx)
	w.took(ctx, attempt, out, err)
}

// takeOffer takes the hand-off made before this workflow started (wfclient.LaunchWindow,
// by the poll that opened the window) as the first offer: attempt 1, at no activity.
func (w *window) takeOffer(ctx workflow.Context, o wfapi.Offer) {
	w.offer.made, w.offer.at = 1, workflow.Now(ctx)
	if o.Failed { // the verdict was set before the handlers were registered; no re-offer
		workflow.GetLogger(ctx).Warn("hand-off failed permanently; the message is failed", "window", w.in.ReplyWindowID, "attempt", 1)
		return
	}
	w.took(ctx, 1, activities.HandOffOutput{SessionID: o.SessionID, MessageKey: o.MessageKey,
		Delivered: o.Delivered, Replies: o.Replies, Handled: o.Handled}, nil)
}

// took applies the outcome of a hand-off: on success it sends the replies the handler
// answered with and marks the message handled when the answer says so.
func (w *window) took(ctx workflow.Context, attempt int, out activities.HandOffOutput, err error) {
	log := workflow.GetLogger(ctx)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.NonRetryable() {
			w.offer.due = false
			switch app.Type() {
			case activities.ErrTypeHandOffFailed:
				w.msg.verdict = vocab.MessageFailed
				log.Warn("hand-off failed permanently; the message is failed", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
			case string(vocab.CodeAttemptConflict):
				log.Info("message already finished; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt)
			case string(vocab.CodeAccountNotActive):
				// Paused: the message is offered again when the account resumes (or at
				// the next re-offer, should the resume not be told).
				w.awaitForAccount()
				w.offer.due = true
				log.Info("hand-off refused while the account is not active; offered again when it resumes",
					"window", w.in.ReplyWindowID, "attempt", attempt)
			case string(vocab.CodeReplyWindowInactive), string(vocab.CodeReplyWindowExpired):
				log.Info("the window ended before its hand-off; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt)
			default:
				log.Warn("hand-off refused; no more offers", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
			}
			return
		}
		w.offer.due = true
		log.Warn("hand-off failed; the message is offered again later", "window", w.in.ReplyWindowID, "attempt", attempt, "error", err)
		return
	}
	w.msg.sessionID = out.SessionID
	if w.msg.key == "" {
		w.msg.key = out.MessageKey
	}
	// Without a handler nobody is there to offer it to again.
	w.offer.due = out.Delivered
	attempted, windowEnded, held := 0, false, false
	for i, text := range out.Replies {
		attempted++
		// The handler's answer is its final answer: it may use the slots kept for it.
		req := wfapi.SendRequest{Type: "text", Text: text, RequestID: fmt.Sprintf("handoff-%d-%d", attempt, i+1), Final: true}
		finishKey := ""
		if out.Handled && w.msg.verdict == "" && i == len(out.Replies)-1 {
			// The answer's last reply, once sent, marks the message handled in the same
			// activity (a sent reply is the answer the verdict needs); otherwise the
			// verdict below is recorded on its own.
			finishKey = w.msg.key
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
	if attempted > 0 && !w.msg.confirmed && !held && (windowEnded || w.offer.awaitingAccount) {
		// Nothing reached the user because the window ended (its message is no longer
		// this window's to finish) or the account was paused (offered again on resume):
		// no verdict now.
		return
	}
	if out.Handled && w.msg.verdict == "" {
		// An answer's "handled" stands only if the user got an answer: when it carried
		// replies and none of them (nor any other send of the window) was confirmed sent
		// (refused, failed, or an unknown outcome), the message is failed with the reason,
		// never falsely handled.
		// A held reply is an answer on its way: the store makes the message held until
		// it is sent.
		status, reason := vocab.MessageHandled, ""
		if attempted > 0 && !w.msg.confirmed && !held {
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
