package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestHeldRepliesGoOutInTheOrderTheyWereHeld(t *testing.T) {
	t.Parallel()
	waiting := []string{"hr_a", "hr_b", "hr_c"} // in the order they were held
	cases := []struct {
		id, status string
		want       int32
	}{
		{"hr_a", vocab.HeldWaiting, 1},
		{"hr_b", vocab.HeldSending, 2},
		{"hr_c", vocab.HeldWaiting, 3},
		{"hr_b", vocab.HeldSent, 0}, // settled: no place
		{"hr_b", vocab.HeldDropped, 0},
		{"hr_z", vocab.HeldWaiting, 0}, // not among them
	}
	for _, c := range cases {
		if got := rules.HeldPosition(c.id, c.status, waiting); got != c.want {
			t.Errorf("HeldPosition(%s, %s) = %d, want %d", c.id, c.status, got, c.want)
		}
	}
	// A reply held now is the last: behind what the conversation holds.
	if pos, err := rules.AdmitHeld(rules.HeldLoad{Replies: 3, Bytes: 30}, 10, 20, 1000); err != nil || pos != 4 {
		t.Fatalf("AdmitHeld behind 3 replies = %d, %v, want 4", pos, err)
	}
}

func TestAConversationHoldsNoMoreThanItsLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		load rules.HeldLoad
		size int64
		want vocab.Code
	}{
		{"room left", rules.HeldLoad{Replies: 1, Bytes: 10}, 10, ""},
		{"the last reply allowed", rules.HeldLoad{Replies: 4, Bytes: 10}, 10, ""},
		{"one reply too many", rules.HeldLoad{Replies: 5, Bytes: 10}, 10, vocab.CodeHeldLimitReached},
		{"the last byte allowed", rules.HeldLoad{Replies: 1, Bytes: 90}, 10, ""},
		{"one byte too many", rules.HeldLoad{Replies: 1, Bytes: 91}, 10, vocab.CodeHeldLimitReached},
	}
	for _, c := range cases {
		if _, err := rules.AdmitHeld(c.load, c.size, 5, 100); codeOf(err) != c.want {
			t.Errorf("%s: AdmitHeld = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestAReplyIsHeldOnlyWhenItsWindowCannotCarryItAndItsSessionMayHoldIt(t *testing.T) {
	t.Parallel()
	full := func(_ *rules.Session, w *rules.Window, _ *rules.Account) { w.Transmitted = 8 } // 10 of 10 used
	cases := []struct {
		name   string
		edit   func(s *rules.Session, w *rules.Window, a *rules.Account)
		reason vocab.Code
		err    vocab.Code
	}{
		{"quota used up", full, vocab.CodeReplyQuotaExhausted, ""},
		{"the window can carry it", func(*rules.Session, *rules.Window, *rules.Account) {}, "", vocab.CodeReplyNotHoldable},
		{"another window's session", func(s *rules.Session, w *rules.Window, _ *rules.Account) {
			full(s, w, nil)
			s.SourceMessageKey = "m2"
		}, "", vocab.CodeInvalidAgentSession},
		{"the bot was removed", func(s *rules.Session, w *rules.Window, a *rules.Account) {
			full(s, w, a)
			a.Status = vocab.AccountReplaced
		}, "", vocab.CodeAccountNotFound},
		{"a paused bot still holds", func(s *rules.Session, w *rules.Window, a *rules.Account) {
			full(s, w, a)
			a.Status = vocab.AccountPaused
		}, vocab.CodeReplyQuotaExhausted, ""},
		{"the bot was rotated", func(s *rules.Session, w *rules.Window, a *rules.Account) {
			full(s, w, a)
			a.Generation = 2
		}, "", vocab.CodeGenerationConflict},
		{"superseded: answer the newer message", func(_ *rules.Session, w *rules.Window, _ *rules.Account) {
			w.State = vocab.WindowSuperseded
		}, "", vocab.CodeReplyWindowInactive},
		{"never handed to an agent", func(s *rules.Session, w *rules.Window, _ *rules.Account) {
			w.State, s.MessageStatus = vocab.WindowExpired, vocab.MessageReceived
		}, "", vocab.CodeInvalidAgentSession},
		{"a closed session while the window is open", func(s *rules.Session, w *rules.Window, a *rules.Account) {
			full(s, w, a)
			s.ClosedAt = at(-time.Second)
		}, "", vocab.CodeInvalidAgentSession},
		{"a late answer after the window expired", func(s *rules.Session, w *rules.Window, _ *rules.Account) {
			w.State, s.ClosedAt, s.MessageStatus = vocab.WindowExpired, at(-time.Second), vocab.MessageFailed
		}, vocab.CodeReplyWindowExpired, ""},
		{"a message already held holds more", func(s *rules.Session, w *rules.Window, a *rules.Account) {
			full(s, w, a)
			s.MessageStatus = vocab.MessageHeld
		}, vocab.CodeReplyQuotaExhausted, ""},
	}
	for _, c := range cases {
		s, w, a := liveSession(), openWindow(), activeBot()
		c.edit(&s, &w, &a)
		reason, err := rules.CheckHold(t0, s, w, a, 1, false)
		if reason != c.reason || codeOf(err) != c.err {
			t.Errorf("%s: CheckHold = %q, %v; want %q, %q", c.name, reason, err, c.reason, c.err)
		}
	}
}

func TestAnExpiredWindowSettlesItsAnsweredMessageAsHeld(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expired bool
		status  string
		want    bool
	}{
		{true, vocab.MessageFailed, true},
		{true, vocab.MessageHandled, true},
		{true, vocab.MessageProcessing, false},
		{true, vocab.MessageHeld, false},
		{false, vocab.MessageHandled, false},
	}
	for _, c := range cases {
		if got := rules.SettlesHeldMessage(c.expired, c.status); got != c.want {
			t.Errorf("SettlesHeldMessage(%v, %s) = %v, want %v", c.expired, c.status, got, c.want)
		}
	}
}

func TestAHeldReplyIsSentOnceAndDroppedPastItsAge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status  string
		expires time.Time
		want    rules.HeldStep
	}{
		{vocab.HeldWaiting, t0.Add(time.Hour), rules.HeldSend},
		{vocab.HeldWaiting, t0, rules.HeldExpired},
		{vocab.HeldSending, t0.Add(-time.Hour), rules.HeldCarried}, // carried already: not dropped
		{vocab.HeldSent, t0.Add(time.Hour), rules.HeldSettled},
		{vocab.HeldUnknown, t0.Add(time.Hour), rules.HeldSettled},
		{vocab.HeldFailed, t0.Add(time.Hour), rules.HeldSettled},
		{vocab.HeldDropped, t0.Add(time.Hour), rules.HeldSettled},
	}
	for _, c := range cases {
		if got := rules.DecideHeldDelivery(t0, c.status, c.expires); got != c.want {
			t.Errorf("DecideHeldDelivery(%s, %v) = %v, want %v", c.status, c.expires, got, c.want)
		}
	}
}

func TestAHeldReplyNeverUsesTheWindowsFinalSlots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		used int32
		want vocab.Code
	}{{8, ""}, {9, vocab.CodeReplySlotsReserved}, {10, vocab.CodeReplyQuotaExhausted}}
	for _, c := range cases {
		w := openWindow()
		w.Reserved, w.Transmitted = 0, c.used
		if got := codeOf(rules.CheckHeldQuota(w, activeBot(), 1)); got != c.want {
			t.Errorf("CheckHeldQuota(used %d) = %q, want %q", c.used, got, c.want)
		}
	}
}
