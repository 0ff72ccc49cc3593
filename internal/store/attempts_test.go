package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// startOne reserves and starts one reply.
func (e *env) startOne(tok sealing.Secret, body string) store.Attempt {
	e.t.Helper()
	return e.reserveAndStart(t0, storeReply(tok, body))
}

// sendOne reserves, starts and completes one reply as sent.
func (e *env) sendOne(tok sealing.Secret, body string) store.Attempt {
	e.t.Helper()
	a := e.startOne(tok, body)
	done, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: a.AttemptID, Status: vocab.AttemptSent, ProviderMessageID: "18446744073709551615"})
	if err != nil {
		e.t.Fatalf("complete: %v", err)
	}
	return done.Attempt
}

func TestReplyNeedsLiveAgentSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	before := e.digest()
	_, err := e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(sealing.NewSecret("not-a-session-token")), Content: text("x")}, store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidAgentSession)
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(sealing.Secret{}, "x"), store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidAgentSession)
	e.unchanged(before)

	// A session with a short TTL expires before its window does.
	short := sealing.NewSecret("short-lived-session-token")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: short, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, err = e.store.ReserveAndStart(e.ctx, t0.Add(time.Minute), storeReply(short, "late"), store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidAgentSession)

	// A handled message closes its sessions.
	if _, err := e.store.FinishMessage(e.ctx, t0, res.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "after handled"), store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidAgentSession)
}

func TestSessionNeverOutlivesItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res := e.commit(b, t0, b.msg("hello", t0))
	opened, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID,
		Token: sealing.NewSecret("a-long-session-token"), TTL: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s, m, w := opened.Session, opened.Message, opened.Window
	if !s.ExpiresAt.Equal(w.ExpiresAt) || m.Status != vocab.MessageProcessing {
		t.Fatalf("session expires %v (window %v), message %s", s.ExpiresAt, w.ExpiresAt, m.Status)
	}
	var hash []byte
	if err := e.pool.QueryRow(e.ctx, "SELECT token_hash FROM agent_sessions").Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(hash), "a-long-session-token") || len(hash) != 32 {
		t.Fatal("only the SHA-256 of the session token may be stored")
	}
}

func TestEleventhReservationIsQuotaExhausted(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, rawQuota())
	b := e.register()
	res, tok := e.deliver(b, "hello")
	for i := 0; i < 10; i++ {
		e.sendOne(tok, "reply")
	}
	before := e.digest()
	_, err := e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "eleventh"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyQuotaExhausted)
	e.unchanged(before)
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Transmitted != 10 || w.Reserved != 0 || w.SendsLeft() != 0 {
		t.Fatalf("window counters %+v", w)
	}
}

func TestExpiredWindowRefusesReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	late := t0.Add(24 * time.Hour)
	if _, err := e.reserve(late.Add(-time.Microsecond), storeReply(tok, "just in time")); err != nil {
		t.Fatalf("a reply just before expiry is allowed: %v", err)
	}
	before := e.digest()
	_, err := e.store.ReserveAndStart(e.ctx, late, storeReply(tok, "too late"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowExpired)
	e.unchanged(before)
	// Once the expiry timer retired the window, the agent still hears "expired".
	if _, err := e.store.ExpireWindow(e.ctx, late, res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	_, err = e.store.ReserveAndStart(e.ctx, late, storeReply(tok, "after retirement"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowExpired)
}

func TestReservationDerivesStableIDsFromSendIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	a0, err := e.reserve(t0, storeReply(tok, "zero"))
	if err != nil {
		t.Fatal(err)
	}
	a1, err := e.reserve(t0, storeReply(tok, "one"))
	if err != nil {
		t.Fatal(err)
	}
	key := res.Deliverable.MessageKey
	if a0.SendIndex != 0 || a1.SendIndex != 1 || a0.AttemptID != store.AttemptID(key, 0) ||
		a1.ClientMessageID != store.ClientMessageID(key, 1) || a0.ClientMessageID == a1.ClientMessageID {
		t.Fatalf("attempt ids not derived from (message, send index): %+v %+v", a0, a1)
	}
	// A released index is never reused: the next reservation takes a new physical index.
	if r, err := e.store.ReleaseSend(e.ctx, t0, a1.AttemptID, ""); !r.Released || err != nil {
		t.Fatalf("release: %+v %v", r, err)
	}
	a2, err := e.reserve(t0, storeReply(tok, "two"))
	if err != nil || a2.SendIndex != 2 {
		t.Fatalf("after release: index %d (%v)", a2.SendIndex, err)
	}
}

func TestStartMovesReservationToTransmittedOneSendingPerPeer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	a, _ := e.reserve(t0, storeReply(tok, "a"))
	c, _ := e.reserve(t0, storeReply(tok, "c"))
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Reserved != 2 || w.Transmitted != 0 || w.NextSendIndex != 2 {
		t.Fatalf("after reserve %+v", w)
	}
	started, err := e.start(t0, store.ByToken(tok), a.AttemptID)
	if err != nil || started.Started == nil || started.Started.Attempt.Status != vocab.AttemptSending {
		t.Fatalf("start: %+v %v", started, err)
	}
	before := e.digest()
	// The second send to the peer waits until the first completes: nothing is written.
	waiting, err := e.start(t0, store.ByToken(tok), c.AttemptID)
	if err != nil || waiting.Started != nil || !waiting.InFlight {
		t.Fatalf("second start while one is sending: %+v %v", waiting, err)
	}
	_, err = e.start(t0, store.ByToken(tok), a.AttemptID)
	wantCode(t, err, vocab.CodeAttemptConflict)
	e.unchanged(before)
	w, _ = e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Reserved != 1 || w.Transmitted != 1 {
		t.Fatalf("after start %+v", w)
	}
}

func TestCompletionOutcomesAndUnknownIsNeverResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	start := func() store.Attempt { return e.startOne(tok, "x") }
	unknown := start()
	c := store.Completion{AttemptID: unknown.AttemptID, Status: vocab.AttemptUnknown, ErrorCode: "outcome_unknown"}
	if _, err := e.store.CompleteSend(e.ctx, t0, c); err != nil {
		t.Fatal(err)
	}
	if again, err := e.store.CompleteSend(e.ctx, t0, c); err != nil || again.Attempt.Status != vocab.AttemptUnknown {
		t.Fatalf("retried completion: %+v %v", again, err)
	}
	before := e.digest()
	_, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: unknown.AttemptID, Status: vocab.AttemptSent})
	wantCode(t, err, vocab.CodeAttemptConflict)
	_, err = e.start(t0, store.ByToken(tok), unknown.AttemptID)
	wantCode(t, err, vocab.CodeAttemptConflict)
	_, err = e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: unknown.AttemptID, Status: vocab.AttemptFailed, FailType: "bogus"})
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)

	// A request that surely never left gives its quota back; a rejected one does not.
	never := start()
	if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: never.AttemptID, Status: vocab.AttemptFailed, FailType: vocab.FailTransport}); err != nil {
		t.Fatal(err)
	}
	rejected := start()
	if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: rejected.AttemptID, Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: "ret_-2"}); err != nil {
		t.Fatal(err)
	}
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Transmitted != 2 || w.Reserved != 0 {
		t.Fatalf("counters %+v, want transmitted 2 (unknown + rejected)", w)
	}
}

func TestReleaseAndRecoveryGiveTheQuotaBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	a, _ := e.reserve(t0, storeReply(tok, "a"))
	if r, err := e.store.ReleaseSend(e.ctx, t0, a.AttemptID, "agent_cancelled"); !r.Released || err != nil {
		t.Fatalf("release: %+v %v", r, err)
	}
	if r, err := e.store.ReleaseSend(e.ctx, t0, a.AttemptID, "again"); r.Released || err != nil {
		t.Fatalf("second release must be a no-op: %+v %v", r, err)
	}
	got, _ := e.store.GetAttempt(e.ctx, a.AttemptID)
	if got.Status != vocab.AttemptFailed || got.FailType != vocab.FailReleased || got.ErrorCode != "agent_cancelled" {
		t.Fatalf("released attempt %+v", got)
	}
	for i := 0; i < 3; i++ {
		if _, err := e.reserve(t0, storeReply(tok, "pending")); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.recoverPending(t0)
	if err != nil || n != 3 {
		t.Fatalf("recovered %d (%v), want 3", n, err)
	}
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Reserved != 0 || w.SendsLeft() != 10 {
		t.Fatalf("window after recovery %+v", w)
	}
	// Counters are checked, never assumed: a window that lost its reservation fails recovery whole.
	if _, err := e.reserve(t0, storeReply(tok, "pending")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, "UPDATE reply_windows SET reserved = 0"); err != nil {
		t.Fatal(err)
	}
	before := e.digest()
	_, err = e.recoverPending(t0)
	wantCode(t, err, vocab.CodeAttemptConflict)
	e.unchanged(before)
}

func TestRecoveryOfListedWindowsLeavesTheOthersPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b1, b2 := e.register(), e.register()
	res1, tok1 := e.deliver(b1, "hello")
	res2, tok2 := e.deliver(b2, "hello")
	w1, w2 := res1.Deliverable.ReplyWindowID, res2.Deliverable.ReplyWindowID
	for _, r := range []store.ReplyInput{storeReply(tok1, "a"), storeReply(tok1, "b"), storeReply(tok2, "c")} {
		if _, err := e.reserve(t0, r); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := e.store.ListPendingWindows(e.ctx)
	if err != nil || len(pending) != 2 || pending[0].ReplyWindowID != w1 || pending[0].Pending != 2 ||
		!pending[0].Oldest.Equal(t0) || pending[1].ReplyWindowID != w2 || pending[1].Pending != 1 {
		t.Fatalf("pending windows %+v (%v), want %d with 2 and %d with 1, reserved at %v", pending, err, w1, w2, t0)
	}
	before := e.digest()
	if n, err := e.store.RecoverPendingAttemptsOf(e.ctx, t0, nil); n != 0 || err != nil {
		t.Fatalf("recovering no window: %d %v", n, err)
	}
	e.unchanged(before)
	n, err := e.store.RecoverPendingAttemptsOf(e.ctx, t0.Add(time.Minute), []int64{w2})
	if err != nil || n != 1 {
		t.Fatalf("recovered %d (%v), want 1", n, err)
	}
	if got, _ := e.store.GetWindow(e.ctx, w1); got.Reserved != 2 {
		t.Fatalf("window %d not listed: %d reserved, want its 2 left alone", w1, got.Reserved)
	}
	if got, _ := e.store.GetWindow(e.ctx, w2); got.Reserved != 0 || got.SendsLeft() != 10 {
		t.Fatalf("window %d listed: %+v, want its reservation given back", w2, got)
	}
}

func TestExpiryRetiresTheWindowOnlyAtItsTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	if _, err := e.reserve(t0, storeReply(tok, "pending at expiry")); err != nil {
		t.Fatal(err)
	}
	id := res.Deliverable.ReplyWindowID
	before := e.digest()
	_, err := e.store.ExpireWindow(e.ctx, t0.Add(24*time.Hour-time.Second), id)
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)
	w, err := e.store.ExpireWindow(e.ctx, t0.Add(24*time.Hour), id)
	if err != nil || w.State != vocab.WindowExpired {
		t.Fatalf("expire: %+v %v", w, err)
	}
	assertRetired(t, e, id, vocab.WindowExpired)
	if again, err := e.store.ExpireWindow(e.ctx, t0.Add(48*time.Hour), id); err != nil || again.State != vocab.WindowExpired {
		t.Fatalf("expiring twice must be a no-op: %+v %v", again, err)
	}
}

func TestTextOver16KiBIsRefusedBeforeReservation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	_, tok := e.deliver(b, "hello")
	before := e.digest()
	_, err := e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, strings.Repeat("字", 16*1024/3+1)), store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidInput)
	_, err = e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(tok), Content: vocab.Content{Type: "voice"}}, store.SendPacing{})
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)
	if _, err := e.reserve(t0, storeReply(tok, strings.Repeat("a", 16*1024))); err != nil {
		t.Fatalf("exactly 16 KiB is allowed: %v", err)
	}
}

func TestFinishMessageIsIdempotentPerVerdict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	key := res.Deliverable.MessageKey
	if _, err := e.store.FinishMessage(e.ctx, t0, key, vocab.MessageFailed, "webhook gave up"); err != nil {
		t.Fatal(err)
	}
	if m, err := e.store.FinishMessage(e.ctx, t0, key, vocab.MessageFailed, "webhook gave up"); err != nil || m.FailureReason != "webhook gave up" {
		t.Fatalf("retry: %+v %v", m, err)
	}
	_, err := e.store.FinishMessage(e.ctx, t0, key, vocab.MessageHandled, "")
	wantCode(t, err, vocab.CodeAttemptConflict)
}

func TestSessionByIDServesTheGatewayWithoutTheBearerToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
	if err != nil || sess.ReplyWindowID != res.Deliverable.ReplyWindowID {
		t.Fatalf("validate: %+v %v", sess, err)
	}
	a, err := e.reserve(t0, store.ReplyInput{Session: store.BySessionID(sess.SessionID), Content: text("by id")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.start(t0.Add(time.Second), store.BySessionID(sess.SessionID), a.AttemptID); err != nil {
		t.Fatal(err)
	}
	acct, _ := e.store.GetAccount(e.ctx, b.key)
	if acct.LastSendAt == nil || !acct.LastSendAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("start must record the bot's last send for pacing: %v", acct.LastSendAt)
	}
	for _, ref := range []store.SessionRef{store.BySessionID("not-a-uuid"), store.BySessionID("6f1c1f7e-0000-4000-8000-000000000000"), {}} {
		_, err := e.store.ValidateSession(e.ctx, t0, ref)
		wantCode(t, err, vocab.CodeInvalidAgentSession)
	}
}

func TestBlockSendsRecordsTheThrottlePenalty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	a, err := e.store.BlockSends(e.ctx, t0, b.key, t0.Add(time.Hour))
	if err != nil || a.SendsBlockedUntil == nil || !a.SendsBlockedUntil.Equal(t0.Add(time.Hour)) {
		t.Fatalf("block: %+v %v", a.SendsBlockedUntil, err)
	}
	_, err = e.store.BlockSends(e.ctx, t0, store.AccountKey("nobody@im.bot"), t0.Add(time.Hour))
	wantCode(t, err, vocab.CodeAccountNotFound)
}

func TestReservationWithRequestIDIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	in := store.ReplyInput{Session: store.ByToken(tok), Content: text("once"), RequestID: "update-1"}
	first, err := e.reserve(t0, in)
	if err != nil {
		t.Fatal(err)
	}
	before := e.digest()
	again, err := e.reserve(t0, in)
	if err != nil || again.AttemptID != first.AttemptID {
		t.Fatalf("retry reserved again: %+v %v", again, err)
	}
	e.unchanged(before)
	in.Content = text("other content")
	_, err = e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
	wantCode(t, err, vocab.CodeAttemptConflict)
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if w.Reserved != 1 {
		t.Fatalf("reserved %d, want 1", w.Reserved)
	}
}

// TestSentCountsOnlyTheSendsILinkAccepted: a window whose only reply was refused
// (throttled) has sent nothing, though the refused transmit used its quota; a sent reply
// counts. This is the SENT column of `starter windows`.
func TestSentCountsOnlyTheSendsILinkAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	id := res.Deliverable.ReplyWindowID
	throttled := e.startOne(tok, "refused")
	if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: throttled.AttemptID, Status: vocab.AttemptFailed,
		FailType: vocab.FailThrottled, ErrorCode: "throttle"}); err != nil {
		t.Fatal(err)
	}
	sent, err := e.store.SentCounts(e.ctx, []int64{id})
	if w, _ := e.store.GetWindow(e.ctx, id); err != nil || sent[id] != 0 || w.Transmitted != 1 {
		t.Fatalf("after a refused reply: sent %v (%v), transmitted %d; want sent 0 of a quota use of 1", sent, err, w.Transmitted)
	}
	e.sendOne(tok, "accepted")
	if sent, err = e.store.SentCounts(e.ctx, []int64{id, id + 1000}); err != nil || sent[id] != 1 || len(sent) != 1 {
		t.Fatalf("after an accepted reply: %v %v, want window %d: 1", sent, err, id)
	}
}

// A send that names its window (the Send activity's path, where the session is read in
// the round trip of the window's locks) keeps every session rule: a session of another
// window, an unknown or malformed session id and a closed session are refused with
// nothing written, a retry by request id finds its attempt, and an invalid token never
// reaches a window it names.
func TestASendNamingItsWindowKeepsTheSessionRulesAndWritesNothingWhenRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first, tok := e.deliver(b, "hello")
	sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	other := e.register()
	otherRes, _ := e.deliver(other, "another bot's message")
	before := e.digest()
	for name, in := range map[string]store.ReplyInput{
		"a session of another window": {Session: store.BySessionID(sess.SessionID), ReplyWindowID: otherRes.Deliverable.ReplyWindowID},
		"an unknown session id":       {Session: store.BySessionID("6f1c1f7e-0000-4000-8000-000000000000"), ReplyWindowID: first.Deliverable.ReplyWindowID},
		"a malformed session id":      {Session: store.BySessionID("not-a-uuid"), ReplyWindowID: first.Deliverable.ReplyWindowID},
		"no session":                  {ReplyWindowID: first.Deliverable.ReplyWindowID},
		"a wrong token":               {Session: store.ByToken(sealing.NewSecret("not-a-session-token")), ReplyWindowID: first.Deliverable.ReplyWindowID},
	} {
		in.Content = text("refused: " + name)
		if _, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{}); store.CodeOf(err) != vocab.CodeInvalidAgentSession {
			t.Errorf("%s: %v, want %s", name, err, vocab.CodeInvalidAgentSession)
		}
	}
	e.unchanged(before)

	in := store.ReplyInput{Session: store.BySessionID(sess.SessionID), ReplyWindowID: first.Deliverable.ReplyWindowID,
		Content: text("once"), RequestID: "activity:run/7"}
	prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
	if err != nil || prep.Started == nil {
		t.Fatalf("send naming its window: %+v %v", prep, err)
	}
	again, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
	if err != nil || again.Attempt.AttemptID != prep.Attempt.AttemptID || again.Started != nil {
		t.Fatalf("retry by request id: %+v %v, want the attempt %s found, not started again", again, err, prep.Attempt.AttemptID)
	}
	if _, err := e.store.FinishMessage(e.ctx, t0, first.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil {
		t.Fatal(err)
	}
	in.RequestID, in.Content = "activity:run/8", text("after handled")
	if _, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{}); store.CodeOf(err) != vocab.CodeInvalidAgentSession {
		t.Fatalf("closed session: %v, want %s", err, vocab.CodeInvalidAgentSession)
	}
}
