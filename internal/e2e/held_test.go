package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// replyAs posts a text reply with the final mark and the hold choice (nil: the default,
// hold).
func (a *apiSystem) replyAs(token, text, key string, final bool, hold *bool) answer {
	a.t.Helper()
	body, _ := json.Marshal(replyapi.ReplyRequest{Type: "text", Text: text, Final: final, Hold: hold})
	return a.do(http.MethodPost, "/v1/reply", body, "Authorization", "Bearer "+token, "Idempotency-Key", key)
}

// held asserts a 202 held answer and returns it.
func held(t *testing.T, got answer, reason string, position int32) replyapi.ReplyResponse {
	t.Helper()
	var r replyapi.ReplyResponse
	got.json(t, &r)
	if got.status != http.StatusAccepted || r.Status != vocab.HeldWaiting || r.HeldID == "" || r.Reason != reason || r.Position != position {
		t.Fatalf("answered %d %s, want 202 held (%s, position %d)", got.status, got.body, reason, position)
	}
	return r
}

// sent asserts a 200 sent answer.
func sent(t *testing.T, got answer) replyapi.ReplyResponse {
	t.Helper()
	var r replyapi.ReplyResponse
	got.json(t, &r)
	if got.status != http.StatusOK || r.Status != vocab.AttemptSent {
		t.Fatalf("answered %d %s, want 200 sent", got.status, got.body)
	}
	return r
}

func (a *apiSystem) messageStatus(key string) string {
	a.t.Helper()
	m, err := a.store.GetMessage(a.ctx, key)
	if err != nil {
		a.t.Fatal(err)
	}
	return m.Status
}

func (a *apiSystem) heldOf(account string) map[string]store.HeldReply {
	a.t.Helper()
	hs, err := a.store.ListHeldReplies(a.ctx, store.HeldFilter{AccountKey: account})
	if err != nil {
		a.t.Fatal(err)
	}
	out := map[string]store.HeldReply{}
	for _, h := range hs {
		out[h.HeldID] = h
	}
	return out
}

// With the simulator enforcing iLink's quota of ten sends per user message: an agent
// that replies thirteen times to one message gets ten replies to the user (nine progress
// replies and its final answer in the slot kept for it) and three held; its "handled"
// leaves the message held. When the user writes again, the three held replies reach the
// user first, in order, then the agent's answer to the new message, all within the new
// window's quota and with the kept slot left for that answer; the first message is then
// handled.
func TestThirteenRepliesSendTenAndHoldThreeThatGoFirstWhenTheUserWritesAgain(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	const owner = "o9cq8heldquota00000000001@im.wechat"
	acct := a.enroll("qo_held_quota", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "question one"); err != nil {
		t.Fatal(err)
	}
	w1, _ := a.openWindow(acct.AccountKey, 0)
	tok1 := a.tokenOf(w1.ReplyWindowID)

	var want []string
	var heldIDs []string
	for i := 1; i <= 13; i++ {
		text := fmt.Sprintf("reply %d to question one", i)
		got := a.replyAs(tok1, text, fmt.Sprintf("q1-%d", i), i == 10, nil)
		switch {
		case i <= 10:
			sent(t, got)
			want = append(want, text)
		default:
			heldIDs = append(heldIDs, held(t, got, string(vocab.CodeReplyQuotaExhausted), int32(i-10)).HeldID)
		}
	}
	if got := a.sentTexts(bot.BotID); !slices.Equal(got, want) {
		t.Fatalf("the user got %q, want the first ten replies", got)
	}
	if got := a.do(http.MethodPost, "/v1/done", []byte(`{"status":"handled"}`), "Authorization", "Bearer "+tok1); got.status != http.StatusOK {
		t.Fatalf("done: %d %s", got.status, got.body)
	}
	if st := a.messageStatus(w1.SourceMessageKey); st != vocab.MessageHeld {
		t.Fatalf("a message whose answer is partly held is %s, want held", st)
	}

	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "question two"); err != nil {
		t.Fatal(err)
	}
	for i := 11; i <= 13; i++ {
		want = append(want, fmt.Sprintf("reply %d to question one", i))
	}
	a.eventually("the held replies reach the user", 2*time.Minute, func() (bool, error) {
		return len(a.sentTexts(bot.BotID)) >= len(want), nil
	})
	w2, _ := a.openWindow(acct.AccountKey, w1.ReplyWindowID)
	got, err := a.store.GetWindow(a.ctx, w2.ReplyWindowID)
	if err != nil {
		t.Fatal(err)
	}
	if got.SendsLeft() != 7 {
		t.Fatalf("the new window has %d sends left after the three held replies, want 7", got.SendsLeft())
	}
	// The agent's answer to the new message: six progress replies fit beside the held
	// ones, the seventh progress reply meets only the kept slot and is held, the final
	// answer takes the kept slot.
	tok2 := a.tokenOf(w2.ReplyWindowID)
	for i := 1; i <= 6; i++ {
		text := fmt.Sprintf("progress %d on question two", i)
		sent(t, a.replyAs(tok2, text, fmt.Sprintf("q2-%d", i), false, nil))
		want = append(want, text)
	}
	held(t, a.replyAs(tok2, "progress 7 on question two", "q2-7", false, nil), string(vocab.CodeReplySlotsReserved), 1)
	sent(t, a.replyAs(tok2, "the answer to question two", "q2-final", true, nil))
	want = append(want, "the answer to question two")
	if got := a.sentTexts(bot.BotID); !slices.Equal(got, want) {
		t.Fatalf("the user got\n%q\nwant\n%q", got, want)
	}
	if st := a.messageStatus(w1.SourceMessageKey); st != vocab.MessageHandled {
		t.Fatalf("the first message, its held answer sent, is %s, want handled", st)
	}
	hs := a.heldOf(acct.AccountKey)
	for _, id := range heldIDs {
		if h := hs[id]; h.Status != vocab.HeldSent || h.AttemptID == "" {
			t.Fatalf("held reply %s: %+v, want sent", id, h)
		}
	}
	// A request repeated with its key learns the held reply's fate, sending nothing.
	again := a.replyAs(tok1, "reply 11 to question one", "q1-11", false, nil)
	var r replyapi.ReplyResponse
	again.json(t, &r)
	if again.status != http.StatusAccepted || r.HeldID != heldIDs[0] || len(a.sentTexts(bot.BotID)) != len(want) {
		t.Fatalf("a repeated held request answered %d %s, want its held reply %s", again.status, again.body, heldIDs[0])
	}
}

// Progress replies never use the slot kept for the final answer: an agent that sends
// twelve progress replies and then its final answer reaches the user with nine progress
// replies and the final answer in the same window; the three progress replies that met
// only the kept slot are held.
func TestTheFinalAnswerAfterTwelveProgressRepliesReachesTheUserInTheSameWindow(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	const owner = "o9cq8heldfinal00000000001@im.wechat"
	acct := a.enroll("qo_held_final", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "a long task"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	for i := 1; i <= 12; i++ {
		got := a.replyAs(tok, fmt.Sprintf("working %d", i), fmt.Sprintf("p-%d", i), false, nil)
		if i <= 9 {
			sent(t, got)
		} else {
			held(t, got, string(vocab.CodeReplySlotsReserved), int32(i-9))
		}
	}
	sent(t, a.replyAs(tok, "done: here is the result", "final", true, nil))
	texts := a.sentTexts(bot.BotID)
	if len(texts) != 10 || texts[9] != "done: here is the result" {
		t.Fatalf("the user got %q, want nine progress replies and the final answer", texts)
	}
	// Asked not to hold, a progress reply meeting the kept slot (here: the full quota)
	// is refused and writes nothing.
	no := false
	a.refused("a reply past the quota that may not be held", http.StatusConflict, replyapi.CodeQuotaExhausted, bot.BotID, func() answer {
		return a.replyAs(tok, "one more", "p-no-hold", false, &no)
	})
}

// A reply after the window expired (the agent took longer than the window) is held and
// reaches the user when the user writes again days later (the simulator's clock moved
// past iLink's 24 hours); a held reply past its age limit is dropped, audited and never
// sent; past the conversation's limit of held replies a reply is refused, writing
// nothing; and an agent that asks for the refusal gets 410.
func TestAReplyAfterTheWindowExpiredIsHeldAndSentWhenTheUserWritesDaysLater(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = 15 * time.Second // as TestReplyAPIExpiredWindowIsGone, for a busy machine
	limits.MaxHeldReplies = 2
	a := startAPI(t, limits, nil)
	const owner = "o9cq8heldexpire0000000001@im.wechat"
	acct := a.enroll("qo_held_expire", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "think about it"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	a.eventually("window expired", time.Minute, func() (bool, error) {
		got, err := a.store.GetWindow(a.ctx, w.ReplyWindowID)
		return got.State == vocab.WindowExpired, err
	})
	no := false
	a.refused("an expired window's reply that may not be held", http.StatusGone, replyapi.CodeWindowExpired, bot.BotID, func() answer {
		return a.replyAs(tok, "refuse me", "late-0", false, &no)
	})
	late := held(t, a.replyAs(tok, "the late answer", "late-1", true, nil), string(vocab.CodeReplyWindowExpired), 1)
	old := held(t, a.replyAs(tok, "an answer held too long", "late-2", false, nil), string(vocab.CodeReplyWindowExpired), 2)
	a.refused("a reply past the conversation's limit", http.StatusConflict, replyapi.CodeHeldLimitReached, bot.BotID, func() answer {
		return a.replyAs(tok, "one too many", "late-3", false, nil)
	})
	if st := a.messageStatus(w.SourceMessageKey); st != vocab.MessageHeld {
		t.Fatalf("the expired message with a held answer is %s, want held", st)
	}
	// The second held reply passes its age limit: its clock is moved, not waited for.
	if _, err := a.pool.Exec(a.ctx, `UPDATE held_replies SET expires_at = created_at + interval '1 millisecond' WHERE held_id = $1`, old.HeldID); err != nil {
		t.Fatal(err)
	}

	if _, err := a.ctl.Advance(a.ctx, 72*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "hello again, days later"); err != nil {
		t.Fatal(err)
	}
	a.eventually("the held answer reaches the user", 2*time.Minute, func() (bool, error) {
		return slices.Contains(a.sentTexts(bot.BotID), "the late answer"), nil
	})
	a.eventually("the aged reply dropped", time.Minute, func() (bool, error) {
		return a.heldOf(acct.AccountKey)[old.HeldID].Status == vocab.HeldDropped, nil
	})
	hs := a.heldOf(acct.AccountKey)
	if h := hs[late.HeldID]; h.Status != vocab.HeldSent {
		t.Fatalf("the late answer: %+v, want sent", h)
	}
	if h := hs[old.HeldID]; h.DropReason != store.HeldDropExpired || h.AttemptID != "" {
		t.Fatalf("the aged reply: %+v, want dropped by the age limit, never attempted", h)
	}
	if slices.Contains(a.sentTexts(bot.BotID), "an answer held too long") {
		t.Fatal("a held reply past its age limit was sent")
	}
	if st := a.messageStatus(w.SourceMessageKey); st != vocab.MessageHandled {
		t.Fatalf("the message whose held answer was sent is %s, want handled", st)
	}
}

// With a bot's reminder on, a conversation with a held reply gets exactly one reminder,
// the set time before its window ends, in the send the window kept for it; a
// conversation whose user wrote again meanwhile (its held reply went with the new
// window) gets none; one whose agent asked for it (POST /v1/remind) gets it with nothing
// held, and one whose agent did not, none.
func TestAReminderGoesOnceBeforeTheWindowEndsOnlyWhileAReplyIsHeld(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Minute
	const before = 20 * time.Second // the replies below have 40 s, on a busy machine
	const reminder = "I have more for you: write to me again to get it."
	a := startAPI(t, limits, nil)

	type conv struct {
		owner, offer string
		bot          string
		acct         string
		w            store.Window
		tok          string
	}
	start := func(owner, offer string, replies int) *conv {
		c := &conv{owner: owner, offer: offer}
		c.acct = a.enroll(offer, owner).AccountKey
		c.bot = a.botOf(owner).BotID
		if _, err := a.store.SetReminder(a.ctx, time.Now(), c.acct, before, reminder); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ctl.InjectText(a.ctx, c.bot, "", "tell me everything"); err != nil {
			t.Fatal(err)
		}
		c.w, _ = a.openWindow(c.acct, 0)
		c.tok = a.tokenOf(c.w.ReplyWindowID)
		// The reminder keeps the last send: eight progress replies and the final answer
		// fit; the next reply is held.
		for i := 1; i <= min(replies, 9); i++ {
			sent(t, a.replyAs(c.tok, fmt.Sprintf("part %d", i), fmt.Sprintf("part-%d", i), i == 9, nil))
		}
		if replies > 9 {
			held(t, a.replyAs(c.tok, "part 10", "part-10", false, nil), string(vocab.CodeReplyQuotaExhausted), 1)
		}
		return c
	}
	reminded := func(c *conv) int {
		n := 0
		for _, text := range a.sentTexts(c.bot) {
			if text == reminder {
				n++
			}
		}
		return n
	}
	quiet := start("o9cq8heldremind000000001@im.wechat", "qo_held_remind_quiet", 10)
	busy := start("o9cq8heldremind000000002@im.wechat", "qo_held_remind_busy", 10)
	// An agent may ask for the reminder with nothing held; one that did not gets none.
	asked := start("o9cq8heldremind000000003@im.wechat", "qo_held_remind_asked", 1)
	unasked := start("o9cq8heldremind000000004@im.wechat", "qo_held_remind_unasked", 1)
	var ask struct {
		Status   string    `json:"status"`
		RemindAt time.Time `json:"remind_at"`
	}
	got := a.do(http.MethodPost, "/v1/remind", nil, "Authorization", "Bearer "+asked.tok)
	got.json(t, &ask)
	if got.status != http.StatusOK || ask.Status != "requested" || !ask.RemindAt.Equal(asked.w.ExpiresAt.Add(-before)) {
		t.Fatalf("remind: %d %s", got.status, got.body)
	}

	// The busy user writes again before the reminder is due: the held reply goes first
	// in the new window, and no reminder is needed.
	if _, err := a.ctl.InjectText(a.ctx, busy.bot, "", "go on"); err != nil {
		t.Fatal(err)
	}
	a.eventually("the busy conversation's held reply delivered", 2*time.Minute, func() (bool, error) {
		return slices.Contains(a.sentTexts(busy.bot), "part 10"), nil
	})
	busyNext, _ := a.openWindow(busy.acct, busy.w.ReplyWindowID)

	a.eventually("the quiet conversation's window expired", 3*time.Minute, func() (bool, error) {
		w, err := a.store.GetWindow(a.ctx, quiet.w.ReplyWindowID)
		return w.State == vocab.WindowExpired, err
	})
	if n := reminded(quiet); n != 1 {
		t.Fatalf("the quiet conversation got %d reminders, want exactly one", n)
	}
	var at time.Time
	if err := a.pool.QueryRow(a.ctx, `SELECT created_at FROM send_attempts WHERE source_message_key = $1 AND request_id = 'reminder'`,
		quiet.w.SourceMessageKey).Scan(&at); err != nil {
		t.Fatalf("the quiet conversation's reminder attempt: %v", err)
	}
	if due := quiet.w.ExpiresAt.Add(-before); at.Before(due) || !at.Before(quiet.w.ExpiresAt) {
		t.Fatalf("the reminder went at %s, want between %s and the window's end %s", at, due, quiet.w.ExpiresAt)
	}
	if texts := a.sentTexts(quiet.bot); len(texts) != 10 || slices.Contains(texts, "part 10") {
		t.Fatalf("the quiet conversation got %q: want nine replies and the reminder, the held reply still held", texts)
	}
	a.eventually("the busy conversation's new window expired", 3*time.Minute, func() (bool, error) {
		w, err := a.store.GetWindow(a.ctx, busyNext.ReplyWindowID)
		return w.State == vocab.WindowExpired, err
	})
	if n := reminded(busy); n != 0 {
		t.Fatalf("the conversation whose user wrote again got %d reminders, want none", n)
	}
	for _, c := range []*conv{asked, unasked} {
		a.eventually("the window expired", 3*time.Minute, func() (bool, error) {
			w, err := a.store.GetWindow(a.ctx, c.w.ReplyWindowID)
			return w.State == vocab.WindowExpired, err
		})
	}
	if n, m := reminded(asked), reminded(unasked); n != 1 || m != 0 {
		t.Fatalf("the agent that asked got %d reminders (want 1), the one that did not %d (want 0)", n, m)
	}
}
