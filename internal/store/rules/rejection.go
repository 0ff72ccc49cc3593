package rules

import "time"

// Rejection is what an iLink "ret -2" answer to a send means for the gateway.
type Rejection string

// The meanings of a ret -2.
const (
	// RejectionWindow: the window's own bookkeeping explains it (quota used up or window
	// past): the window refuses further sends, the bot is fine.
	RejectionWindow Rejection = "window"
	// RejectionThrottle: nothing in our bookkeeping explains it, so it is treated as a
	// bot-wide throttle: no sends for that bot for the penalty, then one probe.
	RejectionThrottle Rejection = "throttle"
)

// ClassifyRejection classifies a ret -2 for a send from window w at now. iLink's text does
// not tell quota, window, throttle and validation apart, so the gateway's own counters
// decide (docs/architecture.md#rejected-sends). The send that was rejected is counted
// in w.Transmitted.
func ClassifyRejection(w Window, now time.Time) Rejection {
	if w.Transmitted >= w.MaxSends || !now.Before(w.ExpiresAt) {
		return RejectionWindow
	}
	return RejectionThrottle
}
