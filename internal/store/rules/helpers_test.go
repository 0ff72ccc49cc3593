package rules_test

import (
	"errors"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// t0 is the tests' "now".
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func seq(n int64) *int64 { return &n }

func at(d time.Duration) *time.Time {
	t := t0.Add(d)
	return &t
}

// codeOf is the code of a rule's refusal ("" for nil; "not a refusal" for another error).
func codeOf(err error) vocab.Code {
	if err == nil {
		return ""
	}
	var r *rules.Refusal
	if !errors.As(err, &r) {
		return "not a refusal"
	}
	return r.Code
}

// openWindow is an open window of 10 sends, 5 used, an hour left, at generation 1.
func openWindow() rules.Window {
	return rules.Window{SourceMessageKey: "m1", AccountKey: "a1", PeerID: "p1", AccountGeneration: 1,
		State: vocab.WindowOpen, ExpiresAt: t0.Add(time.Hour), MaxSends: 10, Reserved: 2, Transmitted: 3}
}

// activeBot is an active account at generation 1, its reminder off, never paced.
func activeBot() rules.Account {
	return rules.Account{Status: vocab.AccountActive, Generation: 1}
}

// liveSession is a live session of openWindow's message.
func liveSession() rules.Session {
	return rules.Session{SourceMessageKey: "m1", AccountKey: "a1", PeerID: "p1", ExpiresAt: t0.Add(time.Minute),
		MessageStatus: vocab.MessageProcessing}
}
