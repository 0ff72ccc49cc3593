package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAReservationIsDecidedUnderTheLocks(t *testing.T) {
	t.Parallel()
	expired := &rules.Refusal{Code: vocab.CodeReplyWindowExpired, Msg: "reply window has expired"}
	invalid := &rules.Refusal{Code: vocab.CodeInvalidAgentSession, Msg: "agent session is not active"}
	cases := []struct {
		name  string
		edit  func(in *rules.ReserveInput)
		start bool
		err   vocab.Code
	}{
		{name: "sends left: reserved", edit: func(*rules.ReserveInput) {}},
		{name: "a broken session rule is raised", edit: func(in *rules.ReserveInput) { in.LockRefusal = invalid },
			err: vocab.CodeInvalidAgentSession},
		{name: "an expired window is raised", edit: func(in *rules.ReserveInput) { in.LockRefusal = expired },
			err: vocab.CodeReplyWindowExpired},
		{name: "quota used up is raised", edit: func(in *rules.ReserveInput) { in.Window.Transmitted = 8 },
			err: vocab.CodeReplyQuotaExhausted},
		{name: "the final answer's slot refuses another reply", edit: func(in *rules.ReserveInput) { in.Window.Transmitted = 7 },
			err: vocab.CodeReplySlotsReserved},
		{name: "the final answer takes its slot", edit: func(in *rules.ReserveInput) { in.Window.Transmitted, in.Final = 7, true }},
		{name: "send indexes used up", edit: func(in *rules.ReserveInput) { in.NextIndex = rules.MaxSendIndex },
			err: vocab.CodeReplyQuotaExhausted},
		{name: "paced and free: starts at once", edit: func(in *rules.ReserveInput) { in.Pacing = &rules.Pacing{Gap: time.Second} },
			start: true},
		{name: "paced, another send in flight: waits", edit: func(in *rules.ReserveInput) {
			in.Pacing, in.PeerSending = &rules.Pacing{Gap: time.Second}, true
		}},
		{name: "paced, within the gap: waits", edit: func(in *rules.ReserveInput) {
			in.Pacing, in.Bot.LastSendAt = &rules.Pacing{Gap: time.Second}, at(-time.Millisecond)
		}},
		{name: "not paced: left pending", edit: func(in *rules.ReserveInput) { in.PeerSending = false }},
	}
	for _, c := range cases {
		in := rules.ReserveInput{Now: t0, Window: openWindow(), Bot: activeBot(), FinalSlots: 1, NextIndex: 5}
		c.edit(&in)
		d, err := rules.DecideReservation(in)
		if codeOf(err) != c.err || (err == nil && d.StartNow != c.start) {
			t.Errorf("%s: DecideReservation = %+v, %v; want start %v, error %q", c.name, d, err, c.start, c.err)
		}
	}
}

func TestARepeatedRequestFindsItsEarlierAttempt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		fingerprint string
		earlier     rules.EarlierAttempt
		refused     vocab.Code
		err         vocab.Code
	}{
		{"the same content", "f1", rules.EarlierAttempt{Fingerprint: "f1"}, "", ""},
		{"other content", "f2", rules.EarlierAttempt{Fingerprint: "f1"}, "", vocab.CodeAttemptConflict},
		{"refused before transmission", "f1", rules.EarlierAttempt{Fingerprint: "f1", FailType: vocab.FailRefused,
			ErrorCode: string(vocab.CodeReplyQuotaExhausted)}, vocab.CodeReplyQuotaExhausted, ""},
		{"failed in transmission is no refusal", "f1", rules.EarlierAttempt{Fingerprint: "f1", FailType: vocab.FailRejected,
			ErrorCode: "ret_-2"}, "", ""},
	}
	for _, c := range cases {
		refused, err := rules.MatchEarlierAttempt(c.fingerprint, c.earlier)
		if refused != c.refused || codeOf(err) != c.err {
			t.Errorf("%s: MatchEarlierAttempt = %q, %v; want %q, %q", c.name, refused, err, c.refused, c.err)
		}
	}
}
