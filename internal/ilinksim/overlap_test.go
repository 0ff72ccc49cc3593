package ilinksim

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitForBot waits (bounded by control round trips, not by sleeping) until ok holds for
// the bot's state.
func waitForBot(t *testing.T, e *env, botID, what string, ok func(BotState) bool) BotState {
	t.Helper()
	var st BotState
	for range 20000 {
		var err error
		if st, err = e.ctl.BotState(e.ctx, botID); err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
	}
	t.Fatalf("bot %s never showed %s: last %+v", botID, what, st)
	return st
}

// overlapProblems returns the overlap problems of the recorded getupdates calls, in order
// (one entry per call: "" when it had none).
func overlapProblems(t *testing.T, e *env) []string {
	t.Helper()
	reqs, err := e.ctl.Requests(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range reqs {
		if r.Endpoint != "getupdates" {
			continue
		}
		p := ""
		for _, s := range r.Problems {
			if strings.Contains(s, "outstanding") {
				p = s
			}
		}
		out = append(out, p)
	}
	return out
}

func TestAGetUpdatesArrivingWhileAnotherOfItsBotIsOutstandingIsAnOverlap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute; c.StrictClient = true })
	a, b := e.bot(), e.bot()

	// One poll of a, held; one of b at the same time: different bots, no overlap.
	first := e.pollAsync(a.Token, "")
	waitForBot(t, e, a.BotID, "a held poll", func(s BotState) bool { return s.Pollers == 1 && s.Outstanding == 1 })
	other := e.pollAsync(b.Token, "")
	waitForBot(t, e, b.BotID, "b's held poll", func(s BotState) bool { return s.Pollers == 1 })
	if st := e.sim.Stats(); st.GetUpdatesOverlaps != 0 || !st.LastGetUpdatesOverlap.IsZero() {
		t.Fatalf("two bots polled once each: %+v, want no overlap", st)
	}

	// A second poll of a while the first is held: an overlap, with its instant, in the
	// bot's state, the totals and the request's problems. A strict simulator still serves
	// it (the check records, it does not refuse).
	before := time.Now()
	second := e.pollAsync(a.Token, "")
	st := waitForBot(t, e, a.BotID, "two outstanding polls", func(s BotState) bool { return s.Outstanding == 2 })
	after := time.Now()
	if st.Overlaps != 1 || len(st.OverlapsAt) != 1 || st.OverlapsAt[0].Before(before) || st.OverlapsAt[0].After(after) {
		t.Fatalf("bot a: %d overlaps at %v, want 1 within [%v, %v]", st.Overlaps, st.OverlapsAt, before, after)
	}
	if s := e.sim.Stats(); s.GetUpdatesOverlaps != 1 || !s.LastGetUpdatesOverlap.Equal(st.OverlapsAt[0]) {
		t.Fatalf("stats: %+v, want 1 overlap at %v", s, st.OverlapsAt[0])
	}
	if bs, _ := e.ctl.BotState(e.ctx, b.BotID); bs.Overlaps != 0 {
		t.Fatalf("bot b: %d overlaps, want 0", bs.Overlaps)
	}
	if p := overlapProblems(t, e); len(p) != 3 || p[0] != "" || p[1] != "" || !strings.Contains(p[2], "1 other getupdates of this bot is outstanding") {
		t.Fatalf("recorded problems of the three polls: %q", p)
	}
	in := e.inject(a.BotID, InjectRequest{Text: "to one of them"})
	var answers []map[string]any
	select {
	case m := <-first:
		answers = append(answers, m, nil)
	case m := <-second:
		answers = append(answers, nil, m)
	}
	e.inject(a.BotID, InjectRequest{Text: "to the other"}) // ends the poll still held
	for i, ch := range []<-chan map[string]any{first, second} {
		if answers[i] == nil {
			answers[i] = <-ch
		}
	}
	got := 0
	for _, m := range answers {
		if m["error"] != nil || num(m, "ret") != 0 || len(msgs(m)) != 1 {
			t.Fatalf("an overlapping poll of a strict simulator: %v", m)
		}
		if msgs(m)[0]["context_token"] == in.ContextToken {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("the first message reached %d of the two polls, want exactly one", got)
	}
	e.inject(b.BotID, InjectRequest{Text: "end b's poll"})
	<-other

	// Answered polls are no longer outstanding: the next poll of a, one after the other,
	// is no overlap; neither is one after a poll whose client went away.
	waitForBot(t, e, a.BotID, "no outstanding poll", func(s BotState) bool { return s.Outstanding == 0 })
	e.inject(a.BotID, InjectRequest{Text: "queued"})
	e.poll(a.Token, "")
	ctx, cancel := context.WithCancel(e.ctx)
	gone := make(chan error, 1)
	go func() {
		body := []byte(`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9"}}`)
		_, _, _, err := e.raw(ctx, http.MethodPost, "/ilink/bot/getupdates", a.Token, body)
		gone <- err
	}()
	waitForBot(t, e, a.BotID, "the held poll", func(s BotState) bool { return s.Outstanding == 1 })
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled poll returned no error")
	}
	waitForBot(t, e, a.BotID, "the server to see the client go", func(s BotState) bool { return s.Outstanding == 0 })
	e.inject(a.BotID, InjectRequest{Text: "after"})
	e.poll(a.Token, "")
	if st, _ := e.ctl.BotState(e.ctx, a.BotID); st.Overlaps != 1 || st.Outstanding != 0 {
		t.Fatalf("after sequential polls: %d overlaps, %d outstanding; want still 1, 0", st.Overlaps, st.Outstanding)
	}
	if s := e.sim.Stats(); s.GetUpdatesOverlaps != 1 {
		t.Fatalf("stats after sequential polls: %+v, want still 1 overlap", s)
	}
}

// A getupdates whose client closed its connection is not outstanding any more, even
// before the server noticed the close: a poll of its bot arriving then (a killed
// process's successor) is no overlap. The peek tells a closed peer from an open one
// without consuming data.
func TestAHeldPollWhoseClientClosedItsConnectionIsNoLongerOutstanding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	held := &heldPoll{conn: server}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if held.clientGone() {
		t.Fatal("an open client with unread data counted as gone")
	}
	// The server reads the request (a handler reads its body) before it holds the poll.
	if _, err := io.ReadFull(server, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if held.clientGone() {
		t.Fatal("an open client counted as gone")
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	// The close reaches the socket in the kernel's time, not ours: look until it shows.
	gone := false
	for range 100000 {
		if gone = held.clientGone(); gone {
			break
		}
	}
	if !gone {
		t.Fatal("a closed client still counts as outstanding")
	}
	if (&heldPoll{}).clientGone() {
		t.Fatal("a poll without a known connection counted as gone")
	}

	// In the server: a bot whose only outstanding poll's client is gone takes a new poll
	// without an overlap; one whose client lives does not.
	s := New(DefaultConfig())
	b := &bot{}
	s.tokens = map[string]*bot{"tok": b}
	r, _ := http.NewRequest(http.MethodPost, "/ilink/bot/getupdates", nil)
	r.Header.Set("Authorization", "Bearer tok")
	b.outstanding = []*heldPoll{held}
	if _, _, problem := s.trackPollLocked(r, time.Now()); problem != "" || b.overlaps != 0 {
		t.Fatalf("a poll after a gone client's: %q, %d overlaps", problem, b.overlaps)
	}
	if _, _, problem := s.trackPollLocked(r, time.Now()); problem == "" || b.overlaps != 1 {
		t.Fatalf("a poll beside one of unknown connection: %q, %d overlaps; want one", problem, b.overlaps)
	}
}

// A getupdates whose body never arrived (its client stopped writing after the headers and
// went away) is no poll: it is logged, but it is neither outstanding nor an overlap.
func TestAGetUpdatesWhoseBodyNeverArrivedIsNoPoll(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute })
	a := e.bot()
	first := e.pollAsync(a.Token, "")
	waitForBot(t, e, a.BotID, "its first poll held", func(st BotState) bool { return st.Outstanding == 1 })

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	head := "POST /ilink/bot/getupdates HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n" +
		"AuthorizationType: ilink_bot_token\r\nAuthorization: Bearer " + a.Token + "\r\nContent-Length: 64\r\n\r\n{\"get_updates_buf\":"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	// Wait until the server logged the broken request.
	for range 20000 {
		reqs, err := e.ctl.Requests(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(reqs); n == 2 {
			break
		}
	}
	if got := overlapProblems(t, e); len(got) != 2 || got[1] != "" {
		t.Fatalf("getupdates problems %q: want the broken request logged, with no overlap", got)
	}
	if st := waitForBot(t, e, a.BotID, "its state", func(BotState) bool { return true }); st.Overlaps != 0 || st.Outstanding != 1 {
		t.Fatalf("bot state %+v: a request whose body never came counted as a poll", st)
	}
	e.inject(a.BotID, InjectRequest{Text: "hello"})
	if m := <-first; m["ret"] == nil {
		t.Fatalf("the held poll answered %v", m)
	}
}
