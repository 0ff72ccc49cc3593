package activity

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/pause"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// HoldReply holds a reply its window cannot carry (store.HoldReply): its answer is the
// held reply (Status held, ErrorCode the reason the window refused it). A store refusal
// (limits, a window retired by a newer message, a removed bot) is an answer with its
// code; only infrastructure failures are errors. Holding again by the same request id
// finds the held reply, so a retry holds nothing twice.
func (a *Activities) HoldReply(ctx context.Context, in activities.HoldInput) (activities.SendOutput, error) {
	h, err := a.Store.HoldReply(ctx, now(), store.HoldInput{Session: store.BySessionID(in.SessionID),
		ReplyWindowID: in.ReplyWindowID, RequestID: in.RequestID, Content: in.Content, Final: in.Final})
	if err != nil {
		return a.refusal("hold reply", err)
	}
	a.Metrics.Send(metrics.SendHeld)
	a.log().Info("reply held", "account", h.AccountKey, "held_reply", h.HeldID, "reason", h.Reason, "position", h.Position)
	return heldOutput(h), nil
}

// heldOutput is the send answer of a held reply.
func heldOutput(h store.HeldReply) activities.SendOutput {
	return activities.SendOutput{Status: wfapi.SendHeld, ErrorCode: h.Reason, HeldID: h.HeldID, HeldPosition: h.Position}
}

// WaitingHeld lists the ids of a conversation's held replies still to send, in order.
func (a *Activities) WaitingHeld(ctx context.Context, in activities.Conversation) ([]string, error) {
	ids, err := a.Store.WaitingHeld(ctx, in.AccountKey, in.PeerID)
	if err != nil {
		return nil, fmt.Errorf("waiting held replies: %w", err)
	}
	return ids, nil
}

// SendHeld sends one held reply through an open window of its conversation, through the
// send path of every reply: its turn waits for the bot's pacing and any send to the peer
// in flight (store.StartHeldDelivery reserves and starts it then, marking the held reply
// sending in the same transaction), it is transmitted once, and its outcome is recorded;
// the held reply follows its attempt (sent, unknown, failed, or back to held when it
// surely never left). A held reply past its age limit is dropped unsent (ErrorCode
// held_reply_expired). A store refusal (the window's kept slots or quota reached, the
// window ended, the account paused) is an answer with its code and leaves the reply held.
// A retry that finds its attempt sending completes it as unknown: never sent twice.
func (a *Activities) SendHeld(ctx context.Context, in activities.SendHeldInput) (activities.SendOutput, error) {
	cfg := a.cfg()
	if activity.IsActivity(ctx) {
		stop := heartbeat(ctx, cfg.HeartbeatEvery, func() any { return nil })
		defer stop()
	}
	pacing := store.SendPacing{Gap: cfg.SendGap}
	for {
		d, err := a.Store.StartHeldDelivery(ctx, now(), in.ReplyWindowID, in.HeldID, pacing)
		if err != nil {
			return a.refusal("start held delivery", err)
		}
		log := a.log().With("account", d.Held.AccountKey, "held_reply", in.HeldID, "reply_window_id", in.ReplyWindowID)
		switch {
		case d.Settled && d.Held.Status == vocab.HeldDropped:
			log.Warn("held reply passed its age limit; dropped unsent", "reason", d.Held.DropReason)
			return activities.SendOutput{Status: vocab.HeldDropped, HeldID: in.HeldID, ErrorCode: string(vocab.CodeHeldReplyExpired)}, nil
		case d.Settled:
			return activities.SendOutput{Status: d.Held.Status, HeldID: in.HeldID, AttemptID: d.Held.AttemptID}, nil
		}
		// The bot's breaker open, the reply stays held for a later window.
		out, done, err := a.gatewaySend(ctx, log, d.PreparedSend)
		if done || err != nil {
			out.HeldID = in.HeldID
			return out, err
		}
	}
}

// gatewaySend takes a send the gateway itself prepared (a held reply, a reminder) one
// step: a started one is transmitted; one found sending (a retry after a crash) is
// completed as unknown, never sent again; one found settled is described; with the bot's
// breaker open it answers throttled. Otherwise (done false) it waited for the send's turn
// (pacing, a send to the peer in flight) and the caller prepares it again.
func (a *Activities) gatewaySend(ctx context.Context, log *slog.Logger, p store.PreparedSend) (out activities.SendOutput, done bool, err error) {
	att := p.Attempt
	switch {
	case p.Started != nil:
		out, err = a.transmit(ctx, log.With("attempt", att.AttemptID), att, p.Started)
		return out, true, err
	case att.AttemptID != "" && att.Status == vocab.AttemptSending:
		log.Warn("the gateway's send was found sending after a retry; outcome unknown", "attempt", att.AttemptID)
		out, err = a.finish(ctx, store.Completion{AttemptID: att.AttemptID, Status: vocab.AttemptUnknown,
			ErrorCode: vocab.SendOutcomeUnknown, ErrorMessage: "send interrupted before its outcome was recorded"})
		return out, true, err
	case att.AttemptID != "":
		return a.output(p.Window, att, nil), true, nil
	case p.BlockedUntil != nil:
		return activities.SendOutput{ErrorCode: vocab.SendThrottled, RetryAfter: *p.BlockedUntil}, true, nil
	}
	wait := max(p.NotBefore.Sub(now()), 0)
	if p.InFlight {
		wait = max(wait, inFlightWait)
	}
	return activities.SendOutput{}, false, pause.For(ctx, wait)
}

// SendReminder sends a window's reminder when it is due (store.StartReminder): nothing
// when the window is no longer open, the bot's reminder is off, the conversation holds
// no reply, or the message had its reminder already (ErrorCode empty, Status empty);
// otherwise once, through the send path, in the send the window kept for it. A retry
// that finds it sending completes it as unknown: never sent twice.
func (a *Activities) SendReminder(ctx context.Context, in activities.ReminderInput) (activities.SendOutput, error) {
	cfg := a.cfg()
	if activity.IsActivity(ctx) {
		stop := heartbeat(ctx, cfg.HeartbeatEvery, func() any { return nil })
		defer stop()
	}
	pacing := store.SendPacing{Gap: cfg.SendGap}
	for {
		r, err := a.Store.StartReminder(ctx, now(), in.ReplyWindowID, pacing)
		if err != nil {
			return a.refusal("start reminder", err)
		}
		log := a.log().With("account", r.Window.AccountKey, "reply_window_id", in.ReplyWindowID)
		if r.Skipped != "" {
			log.Info("no reminder sent", "why", r.Skipped)
			return activities.SendOutput{}, nil
		}
		if r.Started != nil {
			log.Info("reminder going out before the window ends", "attempt", r.Attempt.AttemptID)
		}
		if out, done, err := a.gatewaySend(ctx, log, r.PreparedSend); done || err != nil {
			return out, err
		}
	}
}
