package rules

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// CheckHold decides whether a reply its window cannot carry may be held, and why the
// window cannot carry it (HoldReason: reply_window_expired, reply_quota_exhausted or
// reply_slots_reserved). In order, it refuses: a session not bound to its window
// (invalid_agent_session); a bot that was removed (account_not_found); an account whose
// generation changed (generation_conflict); a window retired by a newer message or
// cancelled (reply_window_inactive: answer the newer message); a reply the window can
// carry now (reply_not_holdable: send it); a message never handed to an agent; and,
// while the window has not expired, a session that is not live (invalid_agent_session).
// A session closed or past its own expiry is accepted when its window expired: a late
// answer is what holding is for.
func CheckHold(now time.Time, s Session, w Window, a Account, finalSlots int32, final bool) (vocab.Code, error) {
	if err := CheckSessionWindow(s, w); err != nil {
		return "", err
	}
	switch {
	case a.Status == vocab.AccountReplaced || a.Status == vocab.AccountDisabled:
		return "", refuse(vocab.CodeAccountNotFound, "the bot was removed (%s); nothing is held for it", a.Status)
	case a.Generation != w.AccountGeneration:
		return "", refuse(vocab.CodeGenerationConflict, "account generation changed")
	case w.State == vocab.WindowSuperseded || w.State == vocab.WindowCancelled:
		return "", refuse(vocab.CodeReplyWindowInactive, "reply window is %s: answer the newer message", w.State)
	}
	reason := HoldReason(now, w, a, finalSlots, final)
	expired := reason == vocab.CodeReplyWindowExpired
	status := s.MessageStatus
	switch {
	case reason == "":
		return "", refuse(vocab.CodeReplyNotHoldable, "the window can carry this reply now: send it")
	case status == vocab.MessageReceived || status == vocab.MessageAbsorbed:
		return "", refuse(vocab.CodeInvalidAgentSession, "the message was not handed to an agent")
	case !expired && (s.ClosedAt != nil || !now.Before(s.ExpiresAt) ||
		(status != vocab.MessageProcessing && status != vocab.MessageHeld)):
		return "", refuse(vocab.CodeInvalidAgentSession, "agent session is not active")
	}
	return reason, nil
}

// HeldLoad is what a conversation holds still to send: its held replies and their bytes.
type HeldLoad struct {
	Replies int32
	Bytes   int64
}

// AdmitHeld decides whether a conversation holding load may hold one more reply of size
// bytes within its limits (held_limit_reached otherwise), and the new reply's position:
// held replies go out in the order they were held, so it is the last, behind load.
func AdmitHeld(load HeldLoad, size int64, maxReplies int32, maxBytes int64) (position int32, err error) {
	if load.Replies+1 > maxReplies || load.Bytes+size > maxBytes {
		return 0, refuse(vocab.CodeHeldLimitReached, "the conversation holds %d replies (%d bytes); the limits are %d replies and %d bytes",
			load.Replies, load.Bytes, maxReplies, maxBytes)
	}
	return load.Replies + 1, nil
}

// SettlesHeldMessage reports whether holding a reply settles its message as held: the
// window expired before its agent answered, and the message was settled by the expiry
// (failed, or handled) — its answer is held now.
func SettlesHeldMessage(expired bool, messageStatus string) bool {
	return expired && (messageStatus == vocab.MessageFailed || messageStatus == vocab.MessageHandled)
}

// HeldToSend reports whether a held reply of status is still to send: held, or being
// sent (a failure that surely never left gives it back to held).
func HeldToSend(status string) bool {
	return status == vocab.HeldWaiting || status == vocab.HeldSending
}

// HeldPosition is a held reply's place among its conversation's replies still to send
// (1: the next), waiting being their ids in the order they go out (the order they were
// held); 0 once it is settled (status neither held nor sending) or not among them.
func HeldPosition(heldID, status string, waiting []string) int32 {
	if !HeldToSend(status) {
		return 0
	}
	for i, id := range waiting {
		if id == heldID {
			return int32(i + 1)
		}
	}
	return 0
}

// HeldStep is what delivering a held reply does (DecideHeldDelivery).
type HeldStep int

// The steps of a held reply's delivery.
const (
	// HeldSend: the reply waits; a window's send may carry it.
	HeldSend HeldStep = iota
	// HeldCarried: a send already carries it (its attempt is the outcome).
	HeldCarried
	// HeldSettled: it was sent, unknown, failed or dropped: nothing is sent.
	HeldSettled
	// HeldExpired: it passed its age limit; it is dropped, unsent.
	HeldExpired
)

// DecideHeldDelivery decides a held reply's delivery at now from its status and its
// age limit (expiresAt).
func DecideHeldDelivery(now time.Time, status string, expiresAt time.Time) HeldStep {
	switch status {
	case vocab.HeldWaiting:
	case vocab.HeldSending:
		return HeldCarried
	default:
		return HeldSettled
	}
	if !now.Before(expiresAt) {
		return HeldExpired
	}
	return HeldSend
}

// CheckHeldQuota is the quota a held reply is sent in: the window's own answer keeps its
// final slots, so a held reply is never final there (reply_slots_reserved, or
// reply_quota_exhausted when no send is left).
func CheckHeldQuota(w Window, a Account, finalSlots int32) error {
	if code := QuotaRefusal(w, a, finalSlots, false); code != "" {
		return refuse(code, "the window keeps its sends left for its own answer")
	}
	return nil
}
