package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Completions that arrive together are each committed as if alone. Every attempt moves on once, each caller learns its
// own attempt's outcome and window, a repeated completion finds its attempt done, and of
// two conflicting completions of one attempt exactly one wins.
func TestCompletionsArrivingTogetherAreEachCommittedAsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const bots = 16
	type sending struct {
		attempt store.Attempt
		left    int32
	}
	started := make([]sending, bots)
	for i := range started {
		b := e.register()
		_, tok := e.deliver(b, "hello")
		prep, err := e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(tok),
			Content: text(fmt.Sprintf("reply %d", i))}, store.SendPacing{})
		if err != nil || prep.Started == nil {
			t.Fatalf("send %d: %+v %v", i, prep, err)
		}
		started[i] = sending{attempt: prep.Attempt, left: prep.Window.SendsLeft()}
	}
	// Every attempt is completed once; the first four twice alike; the last two also by a
	// conflicting completion.
	type call struct {
		bot      int
		provider string
	}
	var calls []call
	for i := range started {
		calls = append(calls, call{i, fmt.Sprintf("pm-%d", i)})
		if i < 4 {
			calls = append(calls, call{i, fmt.Sprintf("pm-%d", i)})
		}
		if i >= bots-2 {
			calls = append(calls, call{i, fmt.Sprintf("pm-%d-other", i)})
		}
	}
	outs := make([]store.SendOutcome, len(calls))
	errs := make([]error, len(calls))
	atOnce(len(calls), func(i int) func() {
		c := calls[i]
		return func() {
			outs[i], errs[i] = e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: started[c.bot].attempt.AttemptID,
				Status: vocab.AttemptSent, ProviderMessageID: c.provider})
		}
	})

	won := map[int]string{}
	for i, c := range calls {
		if errs[i] != nil {
			if c.bot < bots-2 {
				t.Fatalf("completion %d of bot %d: %v", i, c.bot, errs[i])
			}
			wantCode(t, errs[i], vocab.CodeAttemptConflict)
			continue
		}
		got := outs[i]
		if got.Attempt.AttemptID != started[c.bot].attempt.AttemptID || got.Attempt.Status != vocab.AttemptSent ||
			got.Attempt.ProviderMessageID != c.provider {
			t.Fatalf("completion %d of bot %d answered %+v, want its own attempt sent as %s", i, c.bot, got.Attempt, c.provider)
		}
		if got.Window.ReplyWindowID != started[c.bot].attempt.ReplyWindowID || got.Window.SendsLeft() != started[c.bot].left {
			t.Fatalf("completion %d of bot %d answered window %+v, want its own with %d sends left", i, c.bot, got.Window, started[c.bot].left)
		}
		if prev, ok := won[c.bot]; ok && prev != c.provider {
			t.Fatalf("bot %d: both %s and %s won", c.bot, prev, c.provider)
		}
		won[c.bot] = c.provider
	}
	for i, s := range started {
		a, err := e.store.GetAttempt(e.ctx, s.attempt.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != vocab.AttemptSent || a.ProviderMessageID != won[i] {
			t.Fatalf("bot %d: attempt %s as %q, want sent as %q", i, a.Status, a.ProviderMessageID, won[i])
		}
	}
}

// Reservations that arrive together are each reserved as if alone: bots whose account
// changed since their last send (a poll recorded) reserve as the others do; two sends
// racing through one window start one and leave the other pending behind it; every
// window's counters match its attempts.
func TestReservationsArrivingTogetherAreEachCommittedAsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const bots = 12
	type conversation struct {
		b  *bot
		in store.ReplyInput
	}
	convs := make([]conversation, bots)
	for i := range convs {
		b := e.register()
		res, tok := e.deliver(b, "hello")
		sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		in := store.ReplyInput{Session: store.BySessionID(sess.SessionID), ReplyWindowID: res.Deliverable.ReplyWindowID,
			RequestID: "activity:first", Content: text("first")}
		prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
		if err != nil || prep.Started == nil {
			t.Fatalf("first send of bot %d: %+v %v", i, prep, err)
		}
		if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: prep.Attempt.AttemptID,
			Status: vocab.AttemptSent, ProviderMessageID: "pm-first"}); err != nil {
			t.Fatal(err)
		}
		if i < 4 { // the account changes between the sends
			if err := e.store.RecordPoll(e.ctx, t0, b.key, b.generation); err != nil {
				t.Fatal(err)
			}
		}
		convs[i] = conversation{b: b, in: in}
	}
	type call struct {
		bot     int
		request string
	}
	var calls []call
	for i := range convs {
		calls = append(calls, call{i, "second"})
		if i >= 8 { // a second send races through the same window
			calls = append(calls, call{i, "third"})
		}
	}
	outs := make([]store.PreparedSend, len(calls))
	errs := make([]error, len(calls))
	atOnce(len(calls), func(i int) func() {
		c := calls[i]
		in := convs[c.bot].in
		in.RequestID, in.Content = "activity:"+c.request, text(c.request)
		return func() { outs[i], errs[i] = e.store.ReserveAndStart(e.ctx, t0.Add(time.Second), in, store.SendPacing{}) }
	})

	started := map[int]int{}
	for i, c := range calls {
		got := outs[i]
		if errs[i] != nil {
			t.Fatalf("send %q of bot %d: %v", c.request, c.bot, errs[i])
		}
		if got.Attempt.Content.Text != c.request || got.Attempt.ReplyWindowID != convs[c.bot].in.ReplyWindowID {
			t.Fatalf("send %q of bot %d answered %+v", c.request, c.bot, got.Attempt)
		}
		switch {
		case got.Started != nil:
			started[c.bot]++
			if got.Attempt.Status != vocab.AttemptSending || got.Started.ContextToken.IsZero() {
				t.Fatalf("send %q of bot %d started as %+v", c.request, c.bot, got.Started)
			}
		case got.Attempt.Status != vocab.AttemptPending || !got.InFlight:
			t.Fatalf("send %q of bot %d neither started nor pending behind a send in flight: %+v", c.request, c.bot, got)
		}
	}
	for i, c := range convs {
		if started[i] != 1 {
			t.Fatalf("bot %d started %d sends, want 1", i, started[i])
		}
		want := "sent 0 0, sending 1 1"
		if i >= 8 {
			want += ", pending 2 2"
		}
		got := e.lines("", `SELECT string_agg(a.status || ' ' || a.send_index || ' ' || a.window_send_index, ', ' ORDER BY a.send_index)
			|| ' / window ' || w.next_send_index || ' ' || w.reserved || ' ' || w.transmitted
			FROM send_attempts AS a JOIN reply_windows AS w USING (reply_window_id)
			WHERE a.reply_window_id = $1 GROUP BY w.reply_window_id`, c.in.ReplyWindowID)
		reserved := 0
		if i >= 8 {
			reserved = 1
		}
		if wantLine := fmt.Sprintf("%s / window %d %d 2\n", want, 2+reserved, reserved); got != wantLine {
			t.Fatalf("bot %d: %q, want %q", i, got, wantLine)
		}
	}
}

// atOnce runs n calls in goroutines released together: prepare(i) readies call i and
// returns it. It returns once every call returned.
func atOnce(n int, prepare func(i int) func()) {
	var ready, wg sync.WaitGroup
	ready.Add(n)
	wg.Add(n)
	gate := make(chan struct{})
	for i := range n {
		call := prepare(i)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			call()
		}()
	}
	ready.Wait()
	close(gate)
	wg.Wait()
}
