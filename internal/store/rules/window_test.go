package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAWindowAcceptsWorkOnlyOpenUnexpiredAndItsAccountActiveAtItsGeneration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(w *rules.Window, a *rules.Account)
		now  time.Time
		want vocab.Code
	}{
		{"open, live, active", func(*rules.Window, *rules.Account) {}, t0, ""},
		{"expired state", func(w *rules.Window, _ *rules.Account) { w.State = vocab.WindowExpired }, t0, vocab.CodeReplyWindowExpired},
		{"superseded", func(w *rules.Window, _ *rules.Account) { w.State = vocab.WindowSuperseded }, t0, vocab.CodeReplyWindowInactive},
		{"cancelled", func(w *rules.Window, _ *rules.Account) { w.State = vocab.WindowCancelled }, t0, vocab.CodeReplyWindowInactive},
		{"open but past its end", func(*rules.Window, *rules.Account) {}, t0.Add(time.Hour), vocab.CodeReplyWindowExpired},
		{"account paused", func(_ *rules.Window, a *rules.Account) { a.Status = vocab.AccountPaused }, t0, vocab.CodeAccountNotActive},
		{"account rotated", func(_ *rules.Window, a *rules.Account) { a.Generation = 2 }, t0, vocab.CodeGenerationConflict},
		{"expiry is told before the account", func(w *rules.Window, a *rules.Account) {
			w.State, a.Status = vocab.WindowExpired, vocab.AccountPaused
		}, t0, vocab.CodeReplyWindowExpired},
	}
	for _, c := range cases {
		w, a := openWindow(), activeBot()
		c.edit(&w, &a)
		if got := codeOf(rules.CheckWindowUsable(c.now, w, a)); got != c.want {
			t.Errorf("%s: CheckWindowUsable = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestASessionIsCheckedAgainstItsWindowThenTheWindowThenItself(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(s *rules.Session, w *rules.Window)
		want vocab.Code
	}{
		{"live", func(*rules.Session, *rules.Window) {}, ""},
		{"another window's message", func(s *rules.Session, _ *rules.Window) { s.SourceMessageKey = "m2" }, vocab.CodeInvalidAgentSession},
		{"another peer", func(s *rules.Session, _ *rules.Window) { s.PeerID = "p2" }, vocab.CodeInvalidAgentSession},
		{"a late agent hears that its window expired", func(s *rules.Session, w *rules.Window) {
			w.State, s.ClosedAt = vocab.WindowExpired, at(-time.Second)
		}, vocab.CodeReplyWindowExpired},
		{"closed", func(s *rules.Session, _ *rules.Window) { s.ClosedAt = at(-time.Second) }, vocab.CodeInvalidAgentSession},
		{"past its own expiry", func(s *rules.Session, _ *rules.Window) { s.ExpiresAt = t0 }, vocab.CodeInvalidAgentSession},
		{"its message no longer processing", func(s *rules.Session, _ *rules.Window) { s.MessageStatus = vocab.MessageHandled }, vocab.CodeInvalidAgentSession},
	}
	for _, c := range cases {
		s, w := liveSession(), openWindow()
		c.edit(&s, &w)
		if got := codeOf(rules.CheckSession(t0, s, w, activeBot())); got != c.want {
			t.Errorf("%s: CheckSession = %q, want %q", c.name, got, c.want)
		}
	}
}
