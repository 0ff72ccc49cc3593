package store

import (
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
)

// Rejection is what an iLink "ret -2" answer to a send means for the gateway
// (rules.Rejection).
type Rejection = rules.Rejection

// The meanings of a ret -2.
const (
	// RejectionWindow: the window's own bookkeeping explains it (quota used up or window
	// past): the window refuses further sends, the bot is fine.
	RejectionWindow = rules.RejectionWindow
	// RejectionThrottle: nothing in our bookkeeping explains it, so it is treated as a
	// bot-wide throttle: no sends for that bot for the penalty, then one probe.
	RejectionThrottle = rules.RejectionThrottle
)

// ClassifyRejection classifies a ret -2 for a send from window w at now: the gateway's
// own counters decide (rules.ClassifyRejection). The send that was rejected is counted in
// w.Transmitted.
func ClassifyRejection(w Window, now time.Time) Rejection {
	return rules.ClassifyRejection(rules.Window{State: w.State, ExpiresAt: w.ExpiresAt,
		MaxSends: w.MaxSends, Reserved: w.Reserved, Transmitted: w.Transmitted}, now)
}
