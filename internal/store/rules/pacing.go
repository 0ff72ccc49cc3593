package rules

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Pacing is how a bot's sends are spaced: not before Gap has passed since its last send.
type Pacing struct {
	Gap time.Duration
}

// PacedStart is the one pacing rule: when a bot's next send may start (its last send
// plus the gap) and, while its throttle breaker is open, until when it is blocked.
// Without pacing (nil) nothing waits.
func PacedStart(now time.Time, bot Account, pacing *Pacing) (notBefore time.Time, blocked *time.Time) {
	if pacing == nil {
		return time.Time{}, nil
	}
	if bot.LastSendAt != nil {
		notBefore = bot.LastSendAt.Add(pacing.Gap)
	}
	if until := bot.SendsBlockedUntil; until != nil && now.Before(*until) {
		blocked = until
	}
	return notBefore, blocked
}

// Turn is whether a paced send may start now, and if not why: the bot's breaker is open
// (BlockedUntil), its gap has not passed (NotBefore), or another send to the peer has not
// completed (InFlight).
type Turn struct {
	NotBefore    time.Time
	BlockedUntil *time.Time
	InFlight     bool
}

// StartTurn is a paced send's turn at now (PacedStart and the peer's send in flight).
func StartTurn(now time.Time, bot Account, pacing *Pacing, peerSending bool) Turn {
	t := Turn{InFlight: peerSending}
	t.NotBefore, t.BlockedUntil = PacedStart(now, bot, pacing)
	return t
}

// Ready reports whether the send may start at now: nothing of its turn makes it wait.
func (t Turn) Ready(now time.Time) bool {
	return t.BlockedUntil == nil && !now.Before(t.NotBefore) && !t.InFlight
}

// DecideStart decides starting a pending attempt. With pacing it starts when its turn is
// ready, and otherwise waits, nothing changed, its turn saying why. Without pacing it
// starts unless another send to the peer is in flight (send_in_progress: at most one
// send per account and peer is sending).
func DecideStart(now time.Time, bot Account, pacing *Pacing, peerSending bool) (turn Turn, start bool, err error) {
	if pacing == nil {
		if peerSending {
			return Turn{}, false, refuse(vocab.CodeSendInProgress, "another send to this peer is in progress")
		}
		return Turn{}, true, nil
	}
	turn = StartTurn(now, bot, pacing, peerSending)
	return turn, turn.Ready(now), nil
}
