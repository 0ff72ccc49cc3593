package store

import (
	"errors"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
)

// The store decides nothing itself: package rules holds the decisions, values in and
// values out, and the store reads what they need under its locks, calls them and
// executes what they decide (docs/architecture.md, "The store"). This file converts
// between the two: rows to the values the rules read, refusals to store errors.

// ruled turns a rule's refusal into the store's typed error (same code, same message);
// nil and other errors pass unchanged.
func ruled(err error) error {
	var r *rules.Refusal
	if errors.As(err, &r) {
		return &Error{Code: r.Code, Msg: r.Msg}
	}
	return err
}

// refusalOf is a store rule error as the rules read it (nil when err is nil or not a
// store error).
func refusalOf(err error) *rules.Refusal {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	return &rules.Refusal{Code: e.Code, Msg: e.Msg}
}

// ruleWindow is what the rules read of a window row.
func ruleWindow(w dbq.ReplyWindow) rules.Window {
	return rules.Window{SourceMessageKey: w.SourceMessageKey, AccountKey: w.AccountKey, PeerID: w.PeerID,
		AccountGeneration: w.AccountGeneration, State: w.State, ExpiresAt: w.ExpiresAt,
		MaxSends: w.MaxSends, Reserved: w.Reserved, Transmitted: w.Transmitted}
}

// ruleAccount is what the rules read of an account row.
func ruleAccount(a dbq.Account) rules.Account {
	before, _ := reminderOf(a)
	return rules.Account{Status: a.Status, Generation: a.Generation, ReminderOn: before > 0,
		LastSendAt: a.LastSendAt, SendsBlockedUntil: a.SendsBlockedUntil}
}

// ruleSession is what the rules read of a session row with its message's status.
func ruleSession(row dbq.SessionByTokenHashRow) rules.Session {
	s := row.AgentSession
	return rules.Session{SourceMessageKey: s.SourceMessageKey, AccountKey: s.AccountKey, PeerID: s.PeerID,
		ClosedAt: s.ClosedAt, ExpiresAt: s.ExpiresAt, MessageStatus: row.MessageStatus}
}

// rulePacing is a send's pacing as the rules read it (nil: not paced).
func rulePacing(p *SendPacing) *rules.Pacing {
	if p == nil {
		return nil
	}
	return &rules.Pacing{Gap: p.Gap}
}
