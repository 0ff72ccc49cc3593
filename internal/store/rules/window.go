package rules

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Window is what the rules read of a reply window.
type Window struct {
	SourceMessageKey  string
	AccountKey        string
	PeerID            string
	AccountGeneration int32
	// State is open, superseded, cancelled or expired (vocab.Window*).
	State     string
	ExpiresAt time.Time
	// MaxSends is the window's quota; Reserved and Transmitted the sends it holds and made.
	MaxSends, Reserved, Transmitted int32
}

// Used is how many of the window's sends are taken: reserved or transmitted.
func (w Window) Used() int32 { return w.Reserved + w.Transmitted }

// Account is what the rules read of a bot account.
type Account struct {
	// Status is active, paused, ... (vocab.Account*); Generation its token generation.
	Status     string
	Generation int32
	// ReminderOn: the bot's reminder before a window closes is on (it keeps a send).
	ReminderOn bool
	// LastSendAt is when the bot last started a send; SendsBlockedUntil the end of its
	// throttle penalty (the circuit breaker).
	LastSendAt        *time.Time
	SendsBlockedUntil *time.Time
}

// Session is what the rules read of an agent session.
type Session struct {
	SourceMessageKey string
	AccountKey       string
	PeerID           string
	ClosedAt         *time.Time
	ExpiresAt        time.Time
	// MessageStatus is the status of the session's message.
	MessageStatus string
}

// CheckWindowUsable is the one rule for whether a window accepts work: it is open and not
// expired, and its account (a is the window's account) is active at the window's
// generation.
func CheckWindowUsable(now time.Time, w Window, a Account) error {
	switch {
	case w.State == vocab.WindowExpired:
		return refuse(vocab.CodeReplyWindowExpired, "reply window has expired")
	case w.State != vocab.WindowOpen:
		return refuse(vocab.CodeReplyWindowInactive, "reply window is %s", w.State)
	case !now.Before(w.ExpiresAt):
		return refuse(vocab.CodeReplyWindowExpired, "reply window has expired")
	case a.Status != vocab.AccountActive:
		return refuse(vocab.CodeAccountNotActive, "account is %s", a.Status)
	case a.Generation != w.AccountGeneration:
		return refuse(vocab.CodeGenerationConflict, "account generation changed")
	}
	return nil
}

// CheckSessionWindow checks that a session is bound to the window it names.
func CheckSessionWindow(s Session, w Window) error {
	if w.SourceMessageKey != s.SourceMessageKey || w.AccountKey != s.AccountKey || w.PeerID != s.PeerID {
		return refuse(vocab.CodeInvalidAgentSession, "agent session does not match its window")
	}
	return nil
}

// CheckSession checks, in this order: the session is bound to the window; the window
// accepts work (CheckWindowUsable, so a late agent hears "expired" rather than "invalid
// session"); the session itself is live (not closed, not past its own expiry, its
// message processing).
func CheckSession(now time.Time, s Session, w Window, a Account) error {
	if err := CheckSessionWindow(s, w); err != nil {
		return err
	}
	if err := CheckWindowUsable(now, w, a); err != nil {
		return err
	}
	if s.ClosedAt != nil || !now.Before(s.ExpiresAt) || s.MessageStatus != vocab.MessageProcessing {
		return refuse(vocab.CodeInvalidAgentSession, "agent session is not active")
	}
	return nil
}
