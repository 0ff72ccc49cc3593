package rules

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// MaxSendIndex bounds the physical send indexes of one source message: a message whose
// sends reached it refuses more (reply_quota_exhausted).
const MaxSendIndex = 1000

// SendsFor is a window's quota as the replies of an account see it: while the bot's
// reminder is on, the last send is kept for it.
func SendsFor(w Window, a Account) int32 {
	if a.ReminderOn && w.MaxSends > 1 {
		return w.MaxSends - 1
	}
	return w.MaxSends
}

// QuotaRefusal is whether an agent's reply still fits the window's quota: "" when it
// does, reply_quota_exhausted when the sends the replies see (SendsFor) are used up, and
// reply_slots_reserved when the sends left are kept for the final answer (finalSlots of
// them) and the reply is not final (vocab.QuotaRefusal).
func QuotaRefusal(w Window, a Account, finalSlots int32, final bool) vocab.Code {
	return vocab.QuotaRefusal(SendsFor(w, a), w.Used(), finalSlots, final)
}

// HoldReason is the one rule of whether a window can no longer carry a reply, and why:
// it expired (reply_window_expired), its quota is used up, or the sends left are kept for
// the final answer (QuotaRefusal). "" means the window can carry it.
func HoldReason(now time.Time, w Window, a Account, finalSlots int32, final bool) vocab.Code {
	if w.State == vocab.WindowExpired || (w.State == vocab.WindowOpen && !now.Before(w.ExpiresAt)) {
		return vocab.CodeReplyWindowExpired
	}
	return QuotaRefusal(w, a, finalSlots, final)
}

// CheckGatewayQuota is the quota of a send the gateway itself makes (a reminder, a
// system notice): every send of the window, the one kept for the reminder included.
func CheckGatewayQuota(w Window) error {
	if w.Used() >= w.MaxSends {
		return refuse(vocab.CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
	}
	return nil
}

// CheckSendIndex refuses a send whose message has used every send index (MaxSendIndex).
func CheckSendIndex(next int32) error {
	if next >= MaxSendIndex {
		return refuse(vocab.CodeReplyQuotaExhausted, "send indexes of the message are exhausted")
	}
	return nil
}
