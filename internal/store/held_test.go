package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAReplyPastTheQuotaIsHeldInOrderAndSentByTheNextWindowOfTheConversation(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	res, tok := e.fullWindow(b)
	w1 := res.Deliverable.ReplyWindowID
	now := t0.Add(time.Minute)
	bodies := []string{"first held answer", "second held answer", "third held answer"}
	var held []store.HeldReply
	var bytes int64
	for i, body := range bodies {
		h := e.hold(now, tok, fmt.Sprintf("req-%d", i), body)
		if h.Reason != string(vocab.CodeReplyQuotaExhausted) || h.Position != int32(i+1) || h.Status != vocab.HeldWaiting ||
			h.AttemptID != "" || h.SourceMessageKey != res.Deliverable.MessageKey || h.ReplyWindowID != w1 ||
			h.AccountKey != b.key || h.PeerID != b.owner || h.SizeBytes != int32(len(body)) || h.ContentType != "text" ||
			!strings.HasPrefix(h.HeldID, "hr_") || !h.ExpiresAt.Equal(now.Add(vocab.DefaultMaxHeldAge)) {
			t.Fatalf("held reply %d: %+v", i, h)
		}
		if i > 0 && h.Seq <= held[i-1].Seq {
			t.Fatalf("held reply %d is not after the one before: seq %d <= %d", i, h.Seq, held[i-1].Seq)
		}
		held = append(held, h)
		bytes += int64(len(body))
	}
	if n := e.count("SELECT count(*) FROM held_replies WHERE ciphertext IS NOT NULL AND position($1 in encode(ciphertext, 'escape')) = 0", bodies[0]); n != 3 {
		t.Fatalf("%d held replies sealed, want 3 (the content is never stored in the clear)", n)
	}
	// Holding wrote no send and used no quota.
	if n := e.count("SELECT count(*) FROM send_attempts WHERE reply_window_id = $1", w1); n != 10 {
		t.Fatalf("%d attempts in the full window, want the 10 sends only", n)
	}
	if w, _ := e.store.GetWindow(e.ctx, w1); w.Transmitted != 10 || w.Reserved != 0 {
		t.Fatalf("full window after holding: %+v", w)
	}
	counts, err := e.store.WaitingHeldCounts(e.ctx)
	if err != nil || len(counts) != 1 || counts[0] != (store.HeldCount{AccountKey: b.key, PeerID: b.owner, Replies: 3, Bytes: bytes}) {
		t.Fatalf("waiting counts %+v (%v), want 3 replies of %d bytes", counts, err, bytes)
	}
	if found, ok, err := e.store.FindHeldReply(e.ctx, store.ByToken(tok), "req-1"); err != nil || !ok || found.HeldID != held[1].HeldID || found.Position != 2 {
		t.Fatalf("find held reply: %+v %v %v", found, ok, err)
	}

	later := t0.Add(time.Hour)
	res2 := e.commit(b, later, b.msg("are you there?", later))
	if res2.Opened == nil || res2.Opened.HeldWaiting != 3 {
		t.Fatalf("the next window must know the 3 replies it sends first: %+v", res2.Opened)
	}
	w2 := res2.OpenedWindowID
	ids := e.waiting(b)
	if !slices.Equal(ids, []string{held[0].HeldID, held[1].HeldID, held[2].HeldID}) {
		t.Fatalf("waiting %v, want the held replies in the order they were held", ids)
	}
	for i, id := range ids {
		at := later.Add(time.Duration(i+1) * time.Second)
		d := e.startHeld(at, w2, id)
		a := d.Attempt
		if a.Source != "held" || a.Status != vocab.AttemptSending || a.Content.Text != bodies[i] || !strings.HasPrefix(a.RequestID, "held/"+id+"/") ||
			a.ReplyWindowID != w2 || a.SourceMessageKey != res2.Opened.MessageKey || d.Held.Status != vocab.HeldSending ||
			d.Held.AttemptID != a.AttemptID || d.Started.ContextToken.IsZero() || d.Started.Attempt.AttemptID != a.AttemptID {
			t.Fatalf("held delivery %d: %+v", i, d)
		}
		if i == 0 {
			// While it is in flight the next one waits, and asking again for the one in
			// flight finds its attempt: neither writes anything.
			before := e.heldDigest()
			next, err := e.store.StartHeldDelivery(e.ctx, at, w2, ids[1], store.SendPacing{})
			if err != nil || next.Started != nil || !next.InFlight || next.Settled {
				t.Fatalf("the next held reply while one is in flight: %+v %v", next, err)
			}
			again, err := e.store.StartHeldDelivery(e.ctx, at, w2, id, store.SendPacing{})
			if err != nil || again.Started != nil || again.Attempt.AttemptID != a.AttemptID {
				t.Fatalf("the held reply in flight again: %+v %v", again, err)
			}
			e.heldUnchanged(before)
		}
		e.complete(at, store.Completion{AttemptID: a.AttemptID, Status: vocab.AttemptSent, ProviderMessageID: "18446744073709551615"})
		if got := e.heldOf(b, id); got.Status != vocab.HeldSent || got.AttemptID != a.AttemptID {
			t.Fatalf("held reply %d after its send: %+v", i, got)
		}
		if !e.sealedGone(id) {
			t.Fatalf("held reply %d is sent but its sealed content is kept", i)
		}
	}
	all, err := e.store.ListHeldReplies(e.ctx, store.HeldFilter{AccountKey: b.key, Statuses: []string{vocab.HeldSent}})
	if err != nil || len(all) != 3 || all[0].HeldID != held[2].HeldID || all[2].HeldID != held[0].HeldID {
		t.Fatalf("sent held replies %+v (%v), want the 3, newest first", all, err)
	}
	if n := e.count("SELECT count(*) FROM send_attempts WHERE source = 'held' AND reply_window_id = $1 AND status = 'sent'", w2); n != 3 {
		t.Fatalf("%d sent held attempts in the next window, want 3", n)
	}
	if w, _ := e.store.GetWindow(e.ctx, w2); w.Transmitted != 3 || w.Reserved != 0 {
		t.Fatalf("next window after the held sends: %+v", w)
	}
	if ids := e.waiting(b); len(ids) != 0 {
		t.Fatalf("still waiting %v after every held reply was sent", ids)
	}
	if counts, err := e.store.WaitingHeldCounts(e.ctx); err != nil || len(counts) != 0 {
		t.Fatalf("waiting counts %+v (%v), want none", counts, err)
	}
}

func TestHoldingIsIdempotentByRequestID(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	_, tok := e.fullWindow(b)
	h := e.hold(t0.Add(time.Minute), tok, "req-same", "the answer")
	again, err := e.store.HoldReply(e.ctx, t0.Add(2*time.Minute), holdInput(tok, "req-same", "the answer"))
	if err != nil || again.HeldID != h.HeldID || again.Position != 1 || !again.CreatedAt.Equal(h.CreatedAt) {
		t.Fatalf("holding again: %+v %v, want %s", again, err, h.HeldID)
	}
	found, ok, err := e.store.FindHeldReply(e.ctx, store.ByToken(tok), "req-same")
	if err != nil || !ok || found.HeldID != h.HeldID || found.Position != 1 {
		t.Fatalf("find: %+v %v %v", found, ok, err)
	}
	if _, ok, err := e.store.FindHeldReply(e.ctx, store.ByToken(tok), "req-other"); ok || err != nil {
		t.Fatalf("a request that held nothing is found: %v %v", ok, err)
	}
	before := e.heldDigest()
	_, err = e.store.HoldReply(e.ctx, t0.Add(3*time.Minute), holdInput(tok, "req-same", "another answer"))
	wantCode(t, err, vocab.CodeAttemptConflict)
	e.heldUnchanged(before)
	if n := e.count("SELECT count(*) FROM held_replies"); n != 1 {
		t.Fatalf("%d held replies, want 1", n)
	}
}

func TestOnlyAReplyTheLiveWindowCannotCarryIsHeld(t *testing.T) {
	t.Parallel()
	t.Run("the window can carry it", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		b := e.register()
		_, tok := e.deliver(b, "hello")
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, t0, holdInput(tok, "req", "fits"))
		wantCode(t, err, vocab.CodeReplyNotHoldable)
		e.heldUnchanged(before)
		for i := 0; i < 9; i++ {
			e.sendAt(tok, t0, "reply", false)
		}
		// Nine used: a final answer still fits the kept slot, so it is not held.
		before = e.heldDigest()
		in := holdInput(tok, "req-final", "final")
		in.Final = true
		_, err = e.store.HoldReply(e.ctx, t0, in)
		wantCode(t, err, vocab.CodeReplyNotHoldable)
		// Media is never held; a request id is required.
		_, err = e.store.HoldReply(e.ctx, t0, store.HoldInput{Session: store.ByToken(tok), RequestID: "req-media",
			Content: vocab.Content{Type: "image", Media: &vocab.MediaRef{MediaID: "9b2a8f64-3c1e-4d5f-8a7b-1c2d3e4f5a6b"}}})
		wantCode(t, err, vocab.CodeReplyNotHoldable)
		_, err = e.store.HoldReply(e.ctx, t0, holdInput(tok, "", "no id"))
		wantCode(t, err, vocab.CodeInvalidInput)
		e.heldUnchanged(before)
	})
	t.Run("the window was superseded", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, heldLimits(nil))
		b := e.register()
		_, tok := e.fullWindow(b)
		later := t0.Add(time.Hour)
		e.commit(b, later, b.msg("newer", later))
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, later, holdInput(tok, "req", "to the old message"))
		wantCode(t, err, vocab.CodeReplyWindowInactive)
		e.heldUnchanged(before)
	})
	t.Run("the bot was disabled", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, heldLimits(nil))
		b := e.register()
		_, tok := e.fullWindow(b)
		if _, err := e.store.DisableAccount(e.ctx, t0.Add(time.Minute), b.key, b.generation, "removed by operator"); err != nil {
			t.Fatal(err)
		}
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, t0.Add(2*time.Minute), holdInput(tok, "req", "to a removed bot"))
		wantCode(t, err, vocab.CodeAccountNotFound)
		e.heldUnchanged(before)
	})
	t.Run("the bot was replaced", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, heldLimits(nil))
		b := e.register()
		_, tok := e.fullWindow(b)
		e.offer("qo_heldreplace")
		if _, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_heldreplace", "a0000000000f@im.bot", b.owner, 1)); err != nil {
			t.Fatal(err)
		}
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, t0.Add(time.Minute), holdInput(tok, "req", "to a replaced bot"))
		wantCode(t, err, vocab.CodeAccountNotFound)
		e.heldUnchanged(before)
	})
}

func TestAConversationHoldsAtMostItsLimitOfRepliesAndBytesStillToSend(t *testing.T) {
	t.Parallel()
	t.Run("replies", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, heldLimits(func(l *store.Limits) { l.MaxHeldReplies = 2 }))
		b := e.register()
		_, tok := e.fullWindow(b)
		now := t0.Add(time.Minute)
		h1 := e.hold(now, tok, "r1", "one")
		e.hold(now, tok, "r2", "two")
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, now, holdInput(tok, "r3", "three"))
		wantCode(t, err, vocab.CodeHeldLimitReached)
		e.heldUnchanged(before)
		// A dropped reply is no longer to send: it frees its place.
		if _, err := e.store.DropHeldReply(e.ctx, now, b.key, h1.HeldID, "ops"); err != nil {
			t.Fatal(err)
		}
		if h := e.hold(now, tok, "r3", "three"); h.Position != 2 {
			t.Fatalf("held after a drop at position %d, want 2", h.Position)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, heldLimits(func(l *store.Limits) { l.MaxHeldBytes = 10 }))
		b := e.register()
		_, tok := e.fullWindow(b)
		now := t0.Add(time.Minute)
		e.hold(now, tok, "r1", "12345")
		before := e.heldDigest()
		_, err := e.store.HoldReply(e.ctx, now, holdInput(tok, "r2", "123456"))
		wantCode(t, err, vocab.CodeHeldLimitReached)
		e.heldUnchanged(before)
		e.hold(now, tok, "r3", "abcde") // exactly the limit
		before = e.heldDigest()
		_, err = e.store.HoldReply(e.ctx, now, holdInput(tok, "r4", "x"))
		wantCode(t, err, vocab.CodeHeldLimitReached)
		e.heldUnchanged(before)
	})
}

func TestTheLastSlotOfAWindowIsKeptForTheFinalAnswerAndNeverUsedByAHeldReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // FinalSlots 1
	b := e.register()
	res, tok := e.deliver(b, "hello")
	for i := 0; i < 9; i++ {
		e.sendAt(tok, t0, "reply", false)
	}
	before := e.heldDigest()
	_, err := e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "tenth, not final"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplySlotsReserved)
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "tenth, not final"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplySlotsReserved)
	e.heldUnchanged(before)
	// The replies the window cannot carry are held, for the slot's reason.
	now := t0.Add(time.Minute)
	h1 := e.hold(now, tok, "r1", "held one")
	h2 := e.hold(now, tok, "r2", "held two")
	if h1.Reason != string(vocab.CodeReplySlotsReserved) || h2.Reason != string(vocab.CodeReplySlotsReserved) {
		t.Fatalf("hold reasons %s %s, want reply_slots_reserved", h1.Reason, h2.Reason)
	}
	// The final answer still fits; then nothing does.
	e.sendAt(tok, now, "the final answer", true)
	if w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID); w.Transmitted != 10 {
		t.Fatalf("window after the final answer: %+v", w)
	}
	before = e.heldDigest()
	_, err = e.store.ReserveAndStart(e.ctx, now, store.ReplyInput{Session: store.ByToken(tok), Content: text("another final"), Final: true}, store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyQuotaExhausted)
	e.heldUnchanged(before)

	// The next window carries a held reply in its ninth send, never in its tenth.
	later := t0.Add(time.Hour)
	res2, tok2 := e.nextWindow(b, later, "again")
	w2 := res2.Deliverable.ReplyWindowID
	for i := 0; i < 8; i++ {
		e.sendAt(tok2, later, "reply", false)
	}
	d := e.startHeld(later.Add(time.Second), w2, h1.HeldID)
	e.complete(later.Add(time.Second), store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptSent})
	at := later.Add(2 * time.Second)
	before = e.heldDigest()
	_, err = e.store.StartHeldDelivery(e.ctx, at, w2, h2.HeldID, store.SendPacing{})
	wantCode(t, err, vocab.CodeReplySlotsReserved)
	e.heldUnchanged(before)
	e.sendAt(tok2, at, "the final answer", true)
	before = e.heldDigest()
	_, err = e.store.StartHeldDelivery(e.ctx, at, w2, h2.HeldID, store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyQuotaExhausted)
	e.heldUnchanged(before)
	if got := e.heldOf(b, h2.HeldID); got.Status != vocab.HeldWaiting || got.AttemptID != "" {
		t.Fatalf("the refused held reply: %+v, want it still held", got)
	}
}

func TestAReplyAfterTheWindowExpiredIsHeldAndItsMessageIsHandledOnceItIsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	key, w1 := res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	late := t0.Add(24 * time.Hour)
	if _, err := e.store.ExpireWindow(e.ctx, late, w1); err != nil {
		t.Fatal(err)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageFailed {
		t.Fatalf("message after expiry: %s, want failed", m.Status)
	}
	if n := e.count("SELECT count(*) FROM agent_sessions WHERE reply_window_id = $1 AND closed_at IS NULL", w1); n != 0 {
		t.Fatalf("%d sessions of the expired window still open", n)
	}
	_, err := e.store.ReserveAndStart(e.ctx, late, storeReply(tok, "late"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowExpired)

	h := e.hold(late.Add(time.Minute), tok, "req-late", "the late answer")
	if h.Reason != string(vocab.CodeReplyWindowExpired) || h.Status != vocab.HeldWaiting || h.Position != 1 {
		t.Fatalf("late held reply: %+v", h)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld || m.FailureReason != "" {
		t.Fatalf("message with its answer held: %s (%q), want held", m.Status, m.FailureReason)
	}
	if again := e.hold(late.Add(2*time.Minute), tok, "req-late", "the late answer"); again.HeldID != h.HeldID {
		t.Fatalf("holding again held %s, want %s", again.HeldID, h.HeldID)
	}

	next := late.Add(time.Hour)
	res2 := e.commit(b, next, b.msg("hello again", next))
	if res2.Opened == nil || res2.Opened.HeldWaiting != 1 {
		t.Fatalf("opened %+v, want one held reply waiting", res2.Opened)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("a newer message changed the held message to %s", m.Status)
	}
	at := next.Add(time.Second)
	d := e.startHeld(at, res2.OpenedWindowID, h.HeldID)
	if d.Attempt.Content.Text != "the late answer" {
		t.Fatalf("held delivery sends %q", d.Attempt.Content.Text)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message while its answer is sending: %s, want held", m.Status)
	}
	e.complete(at, store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptSent})
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled || m.FailureReason != "" {
		t.Fatalf("message after its held answer was sent: %s (%q), want handled", m.Status, m.FailureReason)
	}
}

func TestAWindowExpiringWithItsAnswerHeldLeavesItsMessageHeldAndDroppingItFailsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	key, w1 := res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	late := t0.Add(24 * time.Hour)
	// Past its expiry, before the expiry timer retired it.
	h := e.hold(late, tok, "req", "just too late")
	if h.Reason != string(vocab.CodeReplyWindowExpired) {
		t.Fatalf("reason %s, want reply_window_expired", h.Reason)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageProcessing {
		t.Fatalf("message before the expiry timer: %s, want processing", m.Status)
	}
	if _, err := e.store.ExpireWindow(e.ctx, late.Add(time.Second), w1); err != nil {
		t.Fatal(err)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message expired with its answer held: %s, want held", m.Status)
	}
	if _, err := e.store.DropHeldReply(e.ctx, late.Add(time.Minute), b.key, h.HeldID, "ops"); err != nil {
		t.Fatal(err)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageFailed || m.FailureReason == "" {
		t.Fatalf("message whose only held answer was dropped: %s (%q), want failed with a reason", m.Status, m.FailureReason)
	}
}

func TestAHeldReplyPastItsAgeLimitIsDroppedUnsent(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(func(l *store.Limits) { l.MaxHeldAge = 48 * time.Hour }))
	b := e.register()
	res, tok := e.fullWindow(b)
	key := res.Deliverable.MessageKey
	old := e.hold(t0.Add(time.Minute), tok, "r-old", "an old answer")
	young := e.hold(t0.Add(2*time.Hour), tok, "r-young", "a younger answer")
	if !old.ExpiresAt.Equal(t0.Add(time.Minute + 48*time.Hour)) {
		t.Fatalf("expires at %v, want 48h after holding", old.ExpiresAt)
	}
	if m, err := e.store.FinishMessage(e.ctx, t0.Add(3*time.Hour), key, vocab.MessageHandled, ""); err != nil || m.Status != vocab.MessageHeld {
		t.Fatalf("finish: %+v %v", m, err)
	}
	next := t0.Add(48 * time.Hour)
	res2 := e.commit(b, next, b.msg("two days later", next))
	w2 := res2.OpenedWindowID
	at := old.ExpiresAt
	d, err := e.store.StartHeldDelivery(e.ctx, at, w2, old.HeldID, store.SendPacing{})
	if err != nil || !d.Settled || d.Started != nil || d.Attempt.AttemptID != "" || d.Held.Status != vocab.HeldDropped ||
		d.Held.DropReason != store.HeldDropExpired {
		t.Fatalf("delivery of a held reply past its age: %+v %v", d, err)
	}
	if got := e.heldOf(b, old.HeldID); got.Status != vocab.HeldDropped || got.DropReason != store.HeldDropExpired || got.AttemptID != "" {
		t.Fatalf("the aged held reply: %+v", got)
	}
	if !e.sealedGone(old.HeldID) {
		t.Fatal("a dropped held reply keeps its sealed content")
	}
	if n := e.count("SELECT count(*) FROM send_attempts WHERE reply_window_id = $1", w2); n != 0 {
		t.Fatalf("%d attempts made for a dropped held reply", n)
	}
	if w, _ := e.store.GetWindow(e.ctx, w2); w.Reserved != 0 || w.Transmitted != 0 {
		t.Fatalf("window after the drop: %+v", w)
	}
	if ids := e.waiting(b); !slices.Equal(ids, []string{young.HeldID}) {
		t.Fatalf("waiting %v, want only the younger one", ids)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message with one answer still held: %s", m.Status)
	}
	// Asking again finds it settled and writes nothing.
	before := e.heldDigest()
	if again, err := e.store.StartHeldDelivery(e.ctx, at, w2, old.HeldID, store.SendPacing{}); err != nil || !again.Settled || again.Started != nil {
		t.Fatalf("delivery of a dropped held reply: %+v %v", again, err)
	}
	e.heldUnchanged(before)
	// The younger one is still in time: it is sent, and the message is answered.
	y := e.startHeld(at, w2, young.HeldID)
	e.complete(at, store.Completion{AttemptID: y.Attempt.AttemptID, Status: vocab.AttemptSent})
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled {
		t.Fatalf("message with one answer sent and one dropped: %s, want handled", m.Status)
	}
}

// heldInNextWindow fills a window, holds n replies, finishes the message (held) and
// commits the user's next message: the held ids, the message's key and the next window.
func (e *env) heldInNextWindow(b *bot, n int) (ids []string, key string, w2 int64) {
	e.t.Helper()
	res, tok := e.fullWindow(b)
	key = res.Deliverable.MessageKey
	now := t0.Add(time.Minute)
	for i := 0; i < n; i++ {
		ids = append(ids, e.hold(now, tok, fmt.Sprintf("r%d", i), fmt.Sprintf("held %d", i)).HeldID)
	}
	if m, err := e.store.FinishMessage(e.ctx, now, key, vocab.MessageHandled, ""); err != nil || m.Status != vocab.MessageHeld {
		e.t.Fatalf("finish: %+v %v", m, err)
	}
	later := t0.Add(time.Hour)
	return ids, key, e.commit(b, later, b.msg("next", later)).OpenedWindowID
}

func TestAHeldDeliveryThatNeverLeftGivesTheReplyBackToHeld(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	ids, key, w2 := e.heldInNextWindow(b, 3)
	at := t0.Add(time.Hour)
	// Transport and throttled failures surely never left: the reply is held again,
	// without an attempt, its content kept.
	for i, ft := range []string{vocab.FailTransport, vocab.FailThrottled} {
		at = at.Add(time.Second)
		d := e.startHeld(at, w2, ids[i])
		e.complete(at, store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptFailed, FailType: ft, ErrorCode: "x"})
		got := e.heldOf(b, ids[i])
		if got.Status != vocab.HeldWaiting || got.AttemptID != "" || e.sealedGone(ids[i]) {
			t.Fatalf("held reply after a %s failure: %+v", ft, got)
		}
		if n := e.count("SELECT count(*) FROM held_replies WHERE held_id = $1 AND attempt_id IS NULL", ids[i]); n != 1 {
			t.Fatalf("held reply after a %s failure keeps an attempt", ft)
		}
	}
	if w := e.waiting(b); !slices.Equal(w, ids) {
		t.Fatalf("waiting %v, want %v", w, ids)
	}
	if w, _ := e.store.GetWindow(e.ctx, w2); w.Transmitted != 1 || w.Reserved != 0 {
		t.Fatalf("window after a transport and a throttled failure: %+v (transport gives the send back)", w)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message whose answer is held again: %s, want held", m.Status)
	}
	// Only a pending attempt is released: a held delivery starts at once, so a release
	// of it changes nothing.
	d := e.startHeld(at.Add(time.Second), w2, ids[2])
	if r, err := e.store.ReleaseSend(e.ctx, at.Add(time.Second), d.Attempt.AttemptID, ""); err != nil || r.Released {
		t.Fatalf("release of a started held delivery: %+v %v", r, err)
	}
	if got := e.heldOf(b, ids[2]); got.Status != vocab.HeldSending || got.AttemptID != d.Attempt.AttemptID {
		t.Fatalf("held reply after a refused release: %+v", got)
	}
}

func TestAHeldReplyGivenBackIsSentAgainByTheSameWindow(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	ids, key, w2 := e.heldInNextWindow(b, 1)
	at := t0.Add(time.Hour + time.Second)
	first := e.startHeld(at, w2, ids[0])
	e.complete(at, store.Completion{AttemptID: first.Attempt.AttemptID, Status: vocab.AttemptFailed, FailType: vocab.FailTransport})
	at = at.Add(time.Second)
	again := e.startHeld(at, w2, ids[0])
	if again.Attempt.AttemptID == first.Attempt.AttemptID {
		t.Fatalf("the new delivery reused attempt %s", first.Attempt.AttemptID)
	}
	e.complete(at, store.Completion{AttemptID: again.Attempt.AttemptID, Status: vocab.AttemptSent})
	if got := e.heldOf(b, ids[0]); got.Status != vocab.HeldSent || got.AttemptID != again.Attempt.AttemptID {
		t.Fatalf("held reply after its second delivery: %+v", got)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled {
		t.Fatalf("message after its held answer was sent: %s, want handled", m.Status)
	}
}

func TestARejectedHeldDeliveryFailsTheReplyAndAnUnknownOneIsNeverOfferedAgain(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	ids, key, w2 := e.heldInNextWindow(b, 3)
	at := t0.Add(time.Hour + time.Second)
	d := e.startHeld(at, w2, ids[0])
	e.complete(at, store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: "ret_-2"})
	if got := e.heldOf(b, ids[0]); got.Status != vocab.HeldFailed || got.AttemptID != d.Attempt.AttemptID || !e.sealedGone(ids[0]) {
		t.Fatalf("held reply after a rejection: %+v", got)
	}
	at = at.Add(time.Second)
	d = e.startHeld(at, w2, ids[1])
	e.complete(at, store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptUnknown, ErrorCode: "outcome_unknown"})
	if got := e.heldOf(b, ids[1]); got.Status != vocab.HeldUnknown || got.AttemptID != d.Attempt.AttemptID || !e.sealedGone(ids[1]) {
		t.Fatalf("held reply after an unknown outcome: %+v", got)
	}
	if w := e.waiting(b); !slices.Equal(w, ids[2:]) {
		t.Fatalf("waiting %v, want only %v", w, ids[2:])
	}
	before := e.heldDigest()
	for _, id := range ids[:2] {
		again, err := e.store.StartHeldDelivery(e.ctx, at.Add(time.Second), w2, id, store.SendPacing{})
		if err != nil || !again.Settled || again.Started != nil {
			t.Fatalf("delivery of a settled held reply: %+v %v", again, err)
		}
	}
	e.heldUnchanged(before)
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message with a held reply still waiting: %s, want held", m.Status)
	}
	// The last one is dropped: one of them may have gone out (unknown), so the message
	// counts as answered.
	if _, err := e.store.DropHeldReply(e.ctx, at, b.key, ids[2], "ops"); err != nil {
		t.Fatal(err)
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled {
		t.Fatalf("message with an unknown held reply: %s, want handled", m.Status)
	}
}

func TestAHeldReplyInFlightWhenItsWindowRetiresIsGivenBackAndSentByTheNewerWindow(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	ids, key, w2 := e.heldInNextWindow(b, 1)
	at := t0.Add(time.Hour + time.Second)
	d := e.startHeld(at, w2, ids[0])
	newest := at.Add(time.Second)
	res3 := e.commit(b, newest, b.msg("newest", newest))
	if res3.Opened == nil || res3.Opened.HeldWaiting != 1 {
		t.Fatalf("opened %+v, want the reply in flight counted", res3.Opened)
	}
	if got := e.heldOf(b, ids[0]); got.Status != vocab.HeldSending {
		t.Fatalf("held reply in flight after its window retired: %+v", got)
	}
	at = newest.Add(time.Second)
	e.complete(at, store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptFailed, FailType: vocab.FailTransport})
	if got := e.heldOf(b, ids[0]); got.Status != vocab.HeldWaiting || got.AttemptID != "" {
		t.Fatalf("held reply whose window retired in flight: %+v", got)
	}
	before := e.heldDigest()
	_, err := e.store.StartHeldDelivery(e.ctx, at, w2, ids[0], store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowInactive)
	e.heldUnchanged(before)
	d = e.startHeld(at.Add(time.Second), res3.OpenedWindowID, ids[0])
	e.complete(at.Add(time.Second), store.Completion{AttemptID: d.Attempt.AttemptID, Status: vocab.AttemptSent})
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled {
		t.Fatalf("message after its held answer was sent: %s, want handled", m.Status)
	}
}

func TestAHeldReplyIsDroppedOnlyByItsOwnAccountAndTheLastDropSettlesAHeldMessageAsAnswered(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b, other := e.register(), e.register()
	res, tok := e.fullWindow(b)
	key := res.Deliverable.MessageKey
	now := t0.Add(time.Minute)
	h1 := e.hold(now, tok, "r1", "one")
	h2 := e.hold(now, tok, "r2", "two")
	if m, err := e.store.FinishMessage(e.ctx, now, key, vocab.MessageHandled, ""); err != nil || m.Status != vocab.MessageHeld {
		t.Fatalf("finish: %+v %v", m, err)
	}
	before := e.heldDigest()
	_, err := e.store.DropHeldReply(e.ctx, now, other.key, h1.HeldID, "ops")
	wantCode(t, err, vocab.CodeHeldReplyNotFound)
	_, err = e.store.DropHeldReply(e.ctx, now, b.key, "hr_00000000000000000000000000000000", "ops")
	wantCode(t, err, vocab.CodeHeldReplyNotFound)
	_, err = e.store.DropHeldReply(e.ctx, now, b.key, h1.HeldID, "")
	wantCode(t, err, vocab.CodeInvalidInput)
	e.heldUnchanged(before)

	at := now.Add(time.Minute)
	d, err := e.store.DropHeldReply(e.ctx, at, b.key, h1.HeldID, "ops@example")
	if err != nil || d.Status != vocab.HeldDropped || d.DropReason != store.HeldDropOperator || d.DroppedBy != "ops@example" || !d.UpdatedAt.Equal(at) {
		t.Fatalf("drop: %+v %v", d, err)
	}
	if !e.sealedGone(h1.HeldID) {
		t.Fatal("a dropped held reply keeps its sealed content")
	}
	if m := e.messageStatus(key); m.Status != vocab.MessageHeld {
		t.Fatalf("message with a held reply still waiting: %s, want held", m.Status)
	}
	before = e.heldDigest()
	_, err = e.store.DropHeldReply(e.ctx, at, b.key, h1.HeldID, "ops@example")
	wantCode(t, err, vocab.CodeAttemptConflict)
	e.heldUnchanged(before)
	if _, err := e.store.DropHeldReply(e.ctx, at, b.key, h2.HeldID, "ops@example"); err != nil {
		t.Fatal(err)
	}
	// Ten replies of the full window were sent: dropping the rest leaves it answered.
	if m := e.messageStatus(key); m.Status != vocab.MessageHandled {
		t.Fatalf("message answered by its window, whose held replies were all dropped: %s (%q), want handled", m.Status, m.FailureReason)
	}
}

func TestHandledWhileAHeldReplyWaitsMakesTheMessageHeld(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	b := e.register()
	res, tok := e.fullWindow(b)
	key := res.Deliverable.MessageKey
	now := t0.Add(time.Minute)
	e.hold(now, tok, "r1", "held")
	m, err := e.store.FinishMessage(e.ctx, now, key, vocab.MessageHandled, "")
	if err != nil || m.Status != vocab.MessageHeld {
		t.Fatalf("finish handled with a held reply waiting: %+v %v, want held", m, err)
	}
	// Its sessions are closed: the agent holds nothing more for it.
	_, err = e.store.HoldReply(e.ctx, now, holdInput(tok, "r2", "after the verdict"))
	wantCode(t, err, vocab.CodeInvalidAgentSession)
	before := e.heldDigest()
	again, err := e.store.FinishMessage(e.ctx, now.Add(time.Minute), key, vocab.MessageHandled, "")
	if err != nil || again.Status != vocab.MessageHeld {
		t.Fatalf("finish handled again: %+v %v, want a no-op", again, err)
	}
	e.heldUnchanged(before)

	// A held reply no longer waiting (dropped) does not hold the message.
	o := e.register()
	ores, otok := e.fullWindow(o)
	h := e.hold(now, otok, "r1", "held")
	if _, err := e.store.DropHeldReply(e.ctx, now, o.key, h.HeldID, "ops"); err != nil {
		t.Fatal(err)
	}
	if m, err := e.store.FinishMessage(e.ctx, now, ores.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil || m.Status != vocab.MessageHandled {
		t.Fatalf("finish handled with its held reply dropped: %+v %v, want handled", m, err)
	}
}
