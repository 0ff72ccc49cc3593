package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestABotsSendWaitsForItsGapAndItsOpenBreaker(t *testing.T) {
	t.Parallel()
	gap := &rules.Pacing{Gap: 2 * time.Second}
	cases := []struct {
		name          string
		pacing        *rules.Pacing
		last, blocked *time.Time
		notBefore     time.Time
		wantBlocked   *time.Time
	}{
		{name: "not paced: nothing waits", pacing: nil, last: at(-time.Second), blocked: at(time.Hour)},
		{name: "never sent", pacing: gap},
		{name: "the gap after its last send", pacing: gap, last: at(-time.Second), notBefore: t0.Add(time.Second)},
		{name: "breaker open", pacing: gap, blocked: at(time.Minute), wantBlocked: at(time.Minute)},
		{name: "breaker closed at its end", pacing: gap, blocked: at(0)},
	}
	for _, c := range cases {
		bot := activeBot()
		bot.LastSendAt, bot.SendsBlockedUntil = c.last, c.blocked
		nb, blocked := rules.PacedStart(t0, bot, c.pacing)
		if !nb.Equal(c.notBefore) || (blocked == nil) != (c.wantBlocked == nil) || (blocked != nil && !blocked.Equal(*c.wantBlocked)) {
			t.Errorf("%s: PacedStart = %v, %v, want %v, %v", c.name, nb, blocked, c.notBefore, c.wantBlocked)
		}
	}
}

func TestASendStartsOnlyWhenItsTurnIsReady(t *testing.T) {
	t.Parallel()
	gap := &rules.Pacing{Gap: 2 * time.Second}
	cases := []struct {
		name          string
		pacing        *rules.Pacing
		last, blocked *time.Time
		peerSending   bool
		start         bool
		want          vocab.Code
	}{
		{name: "paced, nothing to wait for", pacing: gap, last: at(-2 * time.Second), start: true},
		{name: "paced, the gap has not passed", pacing: gap, last: at(-time.Second)},
		{name: "paced, the breaker is open", pacing: gap, blocked: at(time.Second)},
		{name: "paced, another send to the peer in flight", pacing: gap, peerSending: true},
		{name: "not paced", last: at(0), blocked: at(time.Hour), start: true},
		{name: "not paced, another send in flight", peerSending: true, want: vocab.CodeSendInProgress},
	}
	for _, c := range cases {
		bot := activeBot()
		bot.LastSendAt, bot.SendsBlockedUntil = c.last, c.blocked
		turn, start, err := rules.DecideStart(t0, bot, c.pacing, c.peerSending)
		if start != c.start || codeOf(err) != c.want {
			t.Errorf("%s: DecideStart = %v, %v, want %v, %q", c.name, start, err, c.start, c.want)
		}
		if c.pacing != nil && turn.Ready(t0) != c.start {
			t.Errorf("%s: the turn %+v is ready %v, want %v", c.name, turn, turn.Ready(t0), c.start)
		}
		if c.pacing != nil && turn.InFlight != c.peerSending {
			t.Errorf("%s: the turn says in flight %v, want %v", c.name, turn.InFlight, c.peerSending)
		}
	}
}
