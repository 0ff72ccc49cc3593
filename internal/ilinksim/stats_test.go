package ilinksim

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// waitForStats waits (bounded by control round trips, not by sleeping) until ok holds
// for the simulator's stats.
func waitForStats(t *testing.T, e *env, what string, ok func(Stats) bool) Stats {
	t.Helper()
	var st Stats
	for range 20000 {
		var err error
		if st, err = e.ctl.Stats(e.ctx); err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
	}
	t.Fatalf("stats never showed %s: last %+v", what, st)
	return st
}

func TestStatsCountBotsHeldPollsQueuedMessagesAndSends(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute; c.ThrottleBurst = 0 })
	a, b, c := e.bot(), e.bot(), e.bot()
	if err := e.ctl.KillBot(e.ctx, c.BotID); err != nil {
		t.Fatal(err)
	}
	if st, err := e.ctl.Stats(e.ctx); err != nil || st != (Stats{Bots: 3, LiveBots: 2}) {
		t.Fatalf("stats of three idle bots, one dead: %+v %v", st, err)
	}

	// Two held polls on a, one on b: three held calls, two bots held.
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 3)
	for _, tok := range []string{a.Token, a.Token, b.Token} {
		go func() {
			body := []byte(`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9"}}`)
			_, _, _, err := e.raw(ctx, http.MethodPost, "/ilink/bot/getupdates", tok, body)
			done <- err
		}()
	}
	waitForStats(t, e, "three held polls on two bots", func(s Stats) bool { return s.HeldGetUpdates == 3 && s.BotsHeld == 2 })
	cancel()
	for range 3 {
		if err := <-done; err == nil {
			t.Fatal("a cancelled poll returned no error")
		}
	}
	waitForStats(t, e, "no held poll after the clients left", func(s Stats) bool { return s.HeldGetUpdates == 0 && s.BotsHeld == 0 })

	// Queued messages are counted until handed out; every send is counted, refused too.
	in := e.inject(a.BotID, InjectRequest{Text: "one"})
	e.inject(b.BotID, InjectRequest{Text: "two"})
	if st, _ := e.ctl.Stats(e.ctx); st.Queued != 2 {
		t.Fatalf("queued: %+v, want 2", st)
	}
	e.poll(a.Token, "")
	e.send(a, a.Owner, in.ContextToken, "reply")
	e.send(b, b.Owner, "", "refused: no inbound message handed out yet")
	if st, _ := e.ctl.Stats(e.ctx); st.Queued != 1 || st.Sent != 2 {
		t.Fatalf("after one hand-out and two sends: %+v, want queued 1, sent 2", st)
	}
}

func TestSentAfterReturnsOnlyNewerEntriesWithTheirRealReceiveTime(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ThrottleBurst = 0 })
	a, b := e.bot(), e.bot()
	ina := e.inject(a.BotID, InjectRequest{Text: "a"})
	inb := e.inject(b.BotID, InjectRequest{Text: "b"})
	e.poll(a.Token, "")
	e.poll(b.Token, "")
	before := time.Now()
	e.send(a, a.Owner, ina.ContextToken, "a1")
	e.send(b, b.Owner, inb.ContextToken, "b1")
	e.send(a, a.Owner, ina.ContextToken, "a2")
	after := time.Now()

	all, err := e.ctl.SentAfter(e.ctx, "", 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("SentAfter 0: %d entries, %v", len(all), err)
	}
	for i, m := range all {
		if m.Index != i+1 || m.Received.Before(before) || m.Received.After(after) || !m.At.Equal(e.sim.Now()) {
			t.Fatalf("entry %d: index %d, received %v (want within [%v, %v]), at %v (the sim clock)", i, m.Index, m.Received, before, after, m.At)
		}
	}
	if got, _ := e.ctl.SentAfter(e.ctx, "", 1); len(got) != 2 || got[0].Text != "b1" || got[1].Text != "a2" {
		t.Fatalf("SentAfter 1: %+v", got)
	}
	if got, _ := e.ctl.SentAfter(e.ctx, a.BotID, 1); len(got) != 1 || got[0].Text != "a2" || got[0].Index != 3 {
		t.Fatalf("SentAfter 1 of bot a: %+v", got)
	}
	if got, _ := e.ctl.SentAfter(e.ctx, "", 3); len(got) != 0 {
		t.Fatalf("SentAfter the last index: %+v, want nothing", got)
	}
	if got, _ := e.ctl.SentAfter(e.ctx, "", 99); len(got) != 0 {
		t.Fatalf("SentAfter beyond the log: %+v, want nothing", got)
	}
	if got, _ := e.ctl.Sent(e.ctx, ""); len(got) != 3 {
		t.Fatalf("Sent still lists everything: %d", len(got))
	}
	var ce *ControlError
	status, _, _, err := e.raw(e.ctx, http.MethodGet, "/_sim/sent?after=-1", "", nil)
	if err != nil || status != http.StatusBadRequest {
		t.Fatalf("after=-1: HTTP %d %v, want 400", status, err)
	}
	if _, err := e.ctl.SentAfter(e.ctx, "nobody@im.bot", 0); !errors.As(err, &ce) || !errors.Is(err, ErrControlNotFound) {
		t.Fatalf("SentAfter of an unknown bot: %v, want 404", err)
	}
}
