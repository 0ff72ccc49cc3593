package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// sendCase is one situation a predicted send must be reserved in exactly as the send read
// first: the first send is made, then between changes the state, then the second send.
type sendCase struct {
	name string
	// between runs after the first send (first) through the window of the bot's message.
	between func(e *env, s sendSetup, first store.PreparedSend)
	// second is the second send's input (by default the first's with another request id).
	second func(in store.ReplyInput) store.ReplyInput
	pacing store.SendPacing
}

// sendSetup is a bot with a delivered message: its window and its agent session.
type sendSetup struct {
	b      *bot
	window int64
	tok    sealing.Secret
	sessID string
	first  store.PageResult
}

// A send decided on the state the window's last reservation left (ReserveAndStart's one
// round trip) is reserved exactly as the same send read first, whatever changed since
// that reservation: two bots live the same history, and the second one's last send is
// reserved by a store that holds no state of it (so it reads first). Their outcomes, their
// attempts, windows and accounts must match.
func TestAPredictedSendIsReservedAsTheSendReadFirst(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxSends = 3
	e := newEnvWith(t, limits)
	later := t0.Add(time.Second)
	complete := func(e *env, _ sendSetup, first store.PreparedSend) {
		e.t.Helper()
		if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: first.Attempt.AttemptID,
			Status: vocab.AttemptSent, ProviderMessageID: "pm-first"}); err != nil {
			e.t.Fatal(err)
		}
	}
	then := func(steps ...func(e *env, s sendSetup, first store.PreparedSend)) func(*env, sendSetup, store.PreparedSend) {
		return func(e *env, s sendSetup, first store.PreparedSend) {
			for _, step := range steps {
				step(e, s, first)
			}
		}
	}
	for _, c := range []sendCase{
		{name: "nothing changed: the last send completed", between: complete},
		{name: "the last send is still in flight", between: func(*env, sendSetup, store.PreparedSend) {}},
		{name: "the request id was used by the last send", between: complete,
			second: func(in store.ReplyInput) store.ReplyInput { in.RequestID = "activity:first"; return in }},
		{name: "the request id was used for other content", between: complete,
			second: func(in store.ReplyInput) store.ReplyInput {
				in.RequestID, in.Content = "activity:first", text("other content")
				return in
			}},
		{name: "the transmission failed before it left: the send is given back", between: func(e *env, _ sendSetup, first store.PreparedSend) {
			e.t.Helper()
			if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: first.Attempt.AttemptID,
				Status: vocab.AttemptFailed, FailType: vocab.FailTransport, ErrorMessage: "connection refused"}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "the session was closed", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			if _, err := e.store.CloseAgentSession(e.ctx, t0, s.tok); err != nil {
				e.t.Fatal(err)
			}
		})},
		{name: "the message was finished", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			if _, err := e.store.FinishMessage(e.ctx, t0, s.first.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil {
				e.t.Fatal(err)
			}
		})},
		{name: "the bot's sends were blocked", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			if _, err := e.store.BlockSends(e.ctx, t0, s.b.key, later.Add(time.Hour)); err != nil {
				e.t.Fatal(err)
			}
		}), pacing: store.SendPacing{Gap: time.Millisecond}},
		{name: "a poll was recorded on the account", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			if err := e.store.RecordPoll(e.ctx, t0, s.b.key, s.b.generation); err != nil {
				e.t.Fatal(err)
			}
		})},
		{name: "a newer message superseded the window", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			e.commit(s.b, t0, s.b.msg("newer", t0.Add(time.Millisecond)))
		})},
		{name: "the window's quota is used up", between: then(complete, func(e *env, s sendSetup, _ store.PreparedSend) {
			e.t.Helper()
			for i := 0; i < 2; i++ {
				p, err := e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(s.tok),
					Content: text(fmt.Sprintf("by token %d", i))}, store.SendPacing{})
				if err != nil {
					e.t.Fatal(err)
				}
				if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: p.Attempt.AttemptID,
					Status: vocab.AttemptSent, ProviderMessageID: fmt.Sprintf("pm-%d", i)}); err != nil {
					e.t.Fatal(err)
				}
			}
		})},
		{name: "the pacing gap has not passed", between: complete, pacing: store.SendPacing{Gap: time.Hour}},
		{name: "the window expired", between: complete,
			second: func(in store.ReplyInput) store.ReplyInput { return in }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outcomes [2]string
			for i := range outcomes {
				e := &env{t: t, ctx: e.ctx, pool: e.pool, store: e.store}
				outcomes[i] = sendTwice(e, c, i == 1, later)
			}
			if outcomes[0] != outcomes[1] {
				t.Fatalf("predicted:\n%s\nread first:\n%s", outcomes[0], outcomes[1])
			}
		})
	}
}

// sendTwice delivers a message to a new bot, sends through its window, runs c.between and
// sends again, by a store without the bot's state when readFirst; it describes the second
// send's outcome and the bot's attempts, window and account.
func sendTwice(e *env, c sendCase, readFirst bool, later time.Time) string {
	e.t.Helper()
	b := e.register()
	first, tok := e.deliver(b, "hello")
	sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
	if err != nil {
		e.t.Fatal(err)
	}
	s := sendSetup{b: b, window: first.Deliverable.ReplyWindowID, tok: tok, sessID: sess.SessionID, first: first}
	in := store.ReplyInput{Session: store.BySessionID(sess.SessionID), ReplyWindowID: s.window,
		RequestID: "activity:first", Content: text("first reply")}
	prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
	if err != nil || prep.Started == nil {
		e.t.Fatalf("first send: %+v %v", prep, err)
	}
	c.between(e, s, prep)
	if readFirst {
		fresh, err := store.New(e.pool, testKeys, e.store.Limits())
		if err != nil {
			e.t.Fatal(err)
		}
		e.store = fresh
	}
	in.RequestID, in.Content = "activity:second", text("second reply")
	if c.second != nil {
		in = c.second(in)
	}
	when := later
	if strings.HasPrefix(c.name, "the window expired") {
		when = t0.Add(48 * time.Hour)
	}
	got, err := e.store.ReserveAndStart(e.ctx, when, in, c.pacing)
	var out strings.Builder
	fmt.Fprintf(&out, "error %q refused %q started %v in flight %v blocked %v not before %v\n", store.CodeOf(err), got.Refused,
		got.Started != nil, got.InFlight, got.BlockedUntil != nil, got.NotBefore.Sub(t0))
	fmt.Fprintf(&out, "attempt %s index %d/%d sent by %q; window left %d\n", got.Attempt.Status, got.Attempt.SendIndex,
		got.Attempt.WindowSendIndex, got.Attempt.Content.Text, got.Window.SendsLeft())
	if got.Started != nil {
		fmt.Fprintf(&out, "started %s token %v bot token %v\n", got.Started.Attempt.Status, !got.Started.ContextToken.IsZero(),
			!got.Started.Account.BotToken.IsZero())
	}
	out.WriteString(e.lines("attempt ", `SELECT a.send_index || ' ' || a.window_send_index || ' ' || a.status || ' ' || a.fail_type
			|| ' ' || coalesce(a.request_id, '-') || ' ' || (a.payload->>'text')
		FROM send_attempts AS a WHERE a.account_key = $1 ORDER BY a.send_index`, b.key))
	var state string
	if err := e.pool.QueryRow(e.ctx, `SELECT w.state || ' ' || w.next_send_index || ' ' || w.reserved || ' ' || w.transmitted
			|| ' last send ' || coalesce((a.last_send_at - $2::timestamptz)::text, '-')
		FROM reply_windows AS w JOIN accounts AS a USING (account_key) WHERE w.reply_window_id = $1`, s.window, t0).Scan(&state); err != nil {
		e.t.Fatal(err)
	}
	out.WriteString("window " + state + "\n")
	return out.String()
}
