package rules

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// ReserveInput is what reserving an agent's reply is decided on, read under the locks of
// the window's account and of the window.
type ReserveInput struct {
	Now    time.Time
	Window Window
	Bot    Account
	// LockRefusal is the session or window rule the locks broke (CheckSession), nil when
	// none was.
	LockRefusal *Refusal
	// Final marks the agent's final answer, which may use the FinalSlots kept for it.
	Final      bool
	FinalSlots int32
	// NextIndex is the source message's next physical send index.
	NextIndex int32
	// Pacing, when set, asks whether the attempt starts at once; PeerSending is whether
	// another send to the peer is in flight.
	Pacing      *Pacing
	PeerSending bool
}

// ReserveDecision is what DecideReservation decides of a reply it reserves.
type ReserveDecision struct {
	// Turn is the send's turn (with pacing only); StartNow that it starts in the
	// reserving transaction.
	Turn     Turn
	StartNow bool
}

// DecideReservation decides a reservation under the locks: a broken lock rule is raised,
// a reply past the quota (QuotaRefusal) is refused, a message whose send indexes are used
// up is refused (CheckSendIndex); and, with pacing, the attempt starts at once when its
// turn is ready. The error is a *Refusal.
func DecideReservation(in ReserveInput) (ReserveDecision, error) {
	var d ReserveDecision
	if in.LockRefusal != nil {
		return d, in.LockRefusal
	}
	if code := QuotaRefusal(in.Window, in.Bot, in.FinalSlots, in.Final); code != "" {
		if code == vocab.CodeReplySlotsReserved {
			return d, refuse(code, "the window's sends left are kept for the final answer")
		}
		return d, refuse(code, "reply quota of the window is exhausted")
	}
	if err := CheckSendIndex(in.NextIndex); err != nil {
		return d, err
	}
	if in.Pacing != nil {
		d.Turn = StartTurn(in.Now, in.Bot, in.Pacing, in.PeerSending)
		d.StartNow = d.Turn.Ready(in.Now)
	}
	return d, nil
}

// EarlierAttempt is what the rules read of the attempt a request id already made.
type EarlierAttempt struct {
	Fingerprint string
	FailType    string
	ErrorCode   string
}

// MatchEarlierAttempt decides a request repeated with the request id of an earlier
// attempt: other content is attempt_conflict; the same content finds the earlier attempt,
// and refused is its refusal's code when it was refused before transmission.
func MatchEarlierAttempt(fingerprint string, earlier EarlierAttempt) (refused vocab.Code, err error) {
	if earlier.Fingerprint != fingerprint {
		return "", refuse(vocab.CodeAttemptConflict, "request id was used for other content")
	}
	if earlier.FailType == vocab.FailRefused {
		return vocab.Code(earlier.ErrorCode), nil
	}
	return "", nil
}
