package store_test

import (
	"fmt"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// heldLimits are the default limits keeping no send for the final answer (FinalSlots 0),
// so that ten sends use a window up; change adjusts them further.
func heldLimits(change func(*store.Limits)) store.Limits {
	l := store.DefaultLimits()
	l.FinalSlots = 0
	if change != nil {
		change(&l)
	}
	return l
}

// heldDigest is digest with the held replies: a refused hold or drop must write neither.
func (e *env) heldDigest() string {
	e.t.Helper()
	var d *string
	if err := e.pool.QueryRow(e.ctx, "SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM held_replies t").Scan(&d); err != nil {
		e.t.Fatalf("digest held_replies: %v", err)
	}
	out := e.digest()
	if d != nil {
		out += "held_replies:" + *d + ";"
	}
	return out
}

// heldUnchanged fails the test when the store (held replies included) changed since before.
func (e *env) heldUnchanged(before string) {
	e.t.Helper()
	if after := e.heldDigest(); after != before {
		e.t.Fatalf("a refused operation wrote to the store")
	}
}

// sendAt reserves, starts and completes one reply as sent, at now.
func (e *env) sendAt(tok sealing.Secret, now time.Time, body string, final bool) store.Attempt {
	e.t.Helper()
	a := e.reserveAndStart(now, store.ReplyInput{Session: store.ByToken(tok), Content: text(body), Final: final})
	done, err := e.store.CompleteSend(e.ctx, now, store.Completion{AttemptID: a.AttemptID, Status: vocab.AttemptSent, ProviderMessageID: "18446744073709551615"})
	if err != nil {
		e.t.Fatalf("complete: %v", err)
	}
	return done.Attempt
}

func holdInput(tok sealing.Secret, requestID, body string) store.HoldInput {
	return store.HoldInput{Session: store.ByToken(tok), RequestID: requestID, Content: text(body)}
}

// hold holds a reply, which must be held.
func (e *env) hold(now time.Time, tok sealing.Secret, requestID, body string) store.HeldReply {
	e.t.Helper()
	h, err := e.store.HoldReply(e.ctx, now, holdInput(tok, requestID, body))
	if err != nil {
		e.t.Fatalf("hold %s: %v", requestID, err)
	}
	return h
}

// heldOf reads a held reply of the bot as ListHeldReplies shows it.
func (e *env) heldOf(b *bot, heldID string) store.HeldReply {
	e.t.Helper()
	all, err := e.store.ListHeldReplies(e.ctx, store.HeldFilter{AccountKey: b.key, Limit: 1000})
	if err != nil {
		e.t.Fatalf("list held replies: %v", err)
	}
	for _, h := range all {
		if h.HeldID == heldID {
			return h
		}
	}
	e.t.Fatalf("held reply %s is not listed", heldID)
	return store.HeldReply{}
}

// waiting lists the ids of the bot's conversation's replies still to send.
func (e *env) waiting(b *bot) []string {
	e.t.Helper()
	ids, err := e.store.WaitingHeld(e.ctx, b.key, b.owner)
	if err != nil {
		e.t.Fatalf("waiting held: %v", err)
	}
	return ids
}

// sealedGone reports whether a held reply's sealed content columns are all NULL.
func (e *env) sealedGone(heldID string) bool {
	e.t.Helper()
	return e.count("SELECT count(*) FROM held_replies WHERE held_id = $1 AND ciphertext IS NULL AND nonce IS NULL AND key_generation IS NULL", heldID) == 1
}

// nextWindow commits the user's next message at now (a new window) and opens an agent
// session on it.
func (e *env) nextWindow(b *bot, now time.Time, body string) (store.PageResult, sealing.Secret) {
	e.t.Helper()
	res := e.commit(b, now, b.msg(body, now))
	if res.Deliverable == nil || res.Opened == nil {
		e.t.Fatalf("the next message opened no deliverable window: %+v", res)
	}
	tok := sealing.NewSecret(fmt.Sprintf("session-token-%s-%d", b.key, b.nextID))
	if _, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	return res, tok
}

// startHeld starts the delivery of a held reply through a window; it must start.
func (e *env) startHeld(now time.Time, windowID int64, heldID string) store.HeldDelivery {
	e.t.Helper()
	d, err := e.store.StartHeldDelivery(e.ctx, now, windowID, heldID, store.SendPacing{})
	if err != nil {
		e.t.Fatalf("start held delivery of %s: %v", heldID, err)
	}
	if d.Started == nil || d.Settled {
		e.t.Fatalf("held delivery of %s did not start: %+v", heldID, d)
	}
	return d
}

func (e *env) complete(now time.Time, c store.Completion) {
	e.t.Helper()
	if _, err := e.store.CompleteSend(e.ctx, now, c); err != nil {
		e.t.Fatalf("complete %s as %s/%s: %v", c.AttemptID, c.Status, c.FailType, err)
	}
}

func (e *env) messageStatus(key string) store.Message {
	e.t.Helper()
	m, err := e.store.GetMessage(e.ctx, key)
	if err != nil {
		e.t.Fatalf("get message: %v", err)
	}
	return m
}

// fullWindow delivers a message and uses its whole quota (FinalSlots 0): ten replies sent.
func (e *env) fullWindow(b *bot) (store.PageResult, sealing.Secret) {
	e.t.Helper()
	res, tok := e.deliver(b, "hello")
	for i := 0; i < 10; i++ {
		e.sendAt(tok, t0, fmt.Sprintf("reply %d", i), false)
	}
	return res, tok
}
