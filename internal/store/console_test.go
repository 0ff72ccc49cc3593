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

// converse commits text as the bot's next message at now and opens an agent session on
// its window; it returns the page's result and the session's token.
func (e *env) converse(b *bot, now time.Time, text string) (store.PageResult, sealing.Secret) {
	e.t.Helper()
	res := e.commit(b, now, b.msg(text, now))
	if res.Deliverable == nil {
		e.t.Fatalf("message %q was not deliverable: %+v", text, res)
	}
	tok := sealing.NewSecret(fmt.Sprintf("console-session-%s-%d", b.key, b.nextID))
	if _, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	return res, tok
}

// send reserves, starts and completes one reply of the session at now as c says
// (c.AttemptID is filled in).
func (e *env) send(tok sealing.Secret, now time.Time, text string, c store.Completion) store.Attempt {
	e.t.Helper()
	prep, err := e.store.ReserveAndStart(e.ctx, now, storeReply(tok, text), store.SendPacing{})
	if err != nil || prep.Started == nil {
		e.t.Fatalf("reserve and start: %+v %v", prep, err)
	}
	c.AttemptID = prep.Attempt.AttemptID
	if c.Status == vocab.AttemptSent {
		c.ProviderMessageID = "pm-" + c.AttemptID
	}
	out, err := e.store.CompleteSend(e.ctx, now, c)
	if err != nil {
		e.t.Fatalf("complete send: %v", err)
	}
	return out.Attempt
}

var (
	sent     = store.Completion{Status: vocab.AttemptSent}
	rejected = store.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: "ilink_rejected", ErrorMessage: "ret -14"}
	lost     = store.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailTransport, ErrorCode: "not_sent"}
)

// A bot's activity counts the messages it received and the replies iLink accepted since
// the time asked for (not before), its open windows, and its newest error since then (a
// send iLink refused or a quarantined page, by code); every account is listed, an idle
// one with nothing.
func TestAccountActivityCountsEachBotsMessagesRepliesAndNewestErrorSinceTheTimeAskedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	since := t0.Add(-24 * time.Hour)
	busy, idle, quarantined, stale := e.register(), e.register(), e.register(), e.register()

	// busy: a day and more ago a message and a sent reply (not counted); two hours ago a
	// message answered once, a send lost in transport, then one iLink rejected (its
	// newest error); an hour ago a message that opened the window still open.
	_, tok := e.converse(busy, since.Add(-6*time.Hour), "yesterday's question")
	e.send(tok, since.Add(-6*time.Hour), "yesterday's answer", sent)
	// A message exactly at the start of the day asked for counts (absorbed into the next).
	e.commit(busy, since, busy.msg("the first question of the day", since))
	_, tok = e.converse(busy, t0.Add(-2*time.Hour), "a question")
	e.send(tok, t0.Add(-119*time.Minute), "an answer", sent)
	e.send(tok, t0.Add(-118*time.Minute), "a lost answer", lost)
	e.send(tok, t0.Add(-117*time.Minute), "a rejected answer", rejected)
	e.commit(busy, t0.Add(-time.Hour), busy.msg("another question", t0.Add(-time.Hour)))

	// quarantined: a page the store could not take, three hours ago.
	if _, err := e.store.QuarantinePage(e.ctx, t0.Add(-3*time.Hour), store.QuarantineInput{AccountKey: quarantined.key,
		Generation: quarantined.generation, Scope: store.QuarantineWholePage, Messages: 1,
		Content: sealing.NewSecret(`{"msgs":[]}`), ErrorCode: "invalid_input", ErrorMessage: "a poisoned page"}); err != nil {
		t.Fatal(err)
	}
	// stale: its rejected send is older than the day asked for; its window is still open.
	_, tok = e.converse(stale, since.Add(-time.Minute), "an old question")
	e.send(tok, since.Add(-time.Minute), "an old rejected answer", rejected)

	got, err := e.store.AccountActivity(e.ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.AccountActivity{
		busy.key: {AccountKey: busy.key, Messages: 3, Replies: 1, OpenWindows: 1,
			LastError: &store.ActivityError{Kind: vocab.FailRejected, Code: "ilink_rejected", At: t0.Add(-117 * time.Minute)}},
		idle.key: {AccountKey: idle.key},
		quarantined.key: {AccountKey: quarantined.key,
			LastError: &store.ActivityError{Kind: store.ActivityQuarantined, Code: "invalid_input", At: t0.Add(-3 * time.Hour)}},
		stale.key: {AccountKey: stale.key, OpenWindows: 1},
	}
	if len(got) != len(want) {
		t.Errorf("activity of %d accounts, want %d: %+v", len(got), len(want), got)
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("no activity of %s", key)
			continue
		}
		if g.AccountKey != w.AccountKey || g.Messages != w.Messages || g.Replies != w.Replies || g.OpenWindows != w.OpenWindows {
			t.Errorf("activity of %s: %+v, want %+v", key, g, w)
		}
		switch {
		case (g.LastError == nil) != (w.LastError == nil):
			t.Errorf("last error of %s: %+v, want %+v", key, g.LastError, w.LastError)
		case g.LastError != nil && (g.LastError.Kind != w.LastError.Kind || g.LastError.Code != w.LastError.Code || !g.LastError.At.Equal(w.LastError.At)):
			t.Errorf("last error of %s: %+v, want %+v", key, *g.LastError, *w.LastError)
		}
	}
	// The error's text is not read: only its code.
	if s := fmt.Sprintf("%+v", got[busy.key].LastError); strings.Contains(s, "ret -14") {
		t.Errorf("the activity holds the error's text: %s", s)
	}
	if _, err := e.store.AccountActivity(e.ctx, time.Time{}); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Errorf("activity since the zero time: %v", err)
	}
}

// conversationFixture is a bot with a message answered, one whose reply iLink rejected
// and that the agent gave up, one whose window expired with its reply held, and a page of
// two messages (the older absorbed into the newer); and another bot with a message of its
// own. Every text holds the word "secret".
type conversationFixture struct {
	bot, other                            *bot
	answered, gaveUp, heldFor, absorbed   string // message keys
	newest, othersMessage                 string
	answeredWindow, heldWindow, newWindow int64
	texts                                 []string
}

func newConversationFixture(e *env) *conversationFixture {
	e.t.Helper()
	f := &conversationFixture{bot: e.register(), other: e.register()}
	say := func(s string) string { f.texts = append(f.texts, s); return s }

	res, tok := e.converse(f.bot, t0.Add(-3*time.Hour), say("first secret question"))
	f.answered, f.answeredWindow = res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	e.send(tok, t0.Add(-3*time.Hour), say("first secret answer"), sent)
	if _, err := e.store.FinishMessage(e.ctx, t0.Add(-3*time.Hour), f.answered, vocab.MessageHandled, ""); err != nil {
		e.t.Fatal(err)
	}

	res, tok = e.converse(f.bot, t0.Add(-2*time.Hour), say("second secret question"))
	f.gaveUp = res.Deliverable.MessageKey
	e.send(tok, t0.Add(-2*time.Hour), say("second secret answer"), rejected)
	if _, err := e.store.FinishMessage(e.ctx, t0.Add(-2*time.Hour), f.gaveUp, vocab.MessageFailed, "the agent gave up"); err != nil {
		e.t.Fatal(err)
	}

	// The third message's window expires before its answer: the answer is held.
	res, tok = e.converse(f.bot, t0.Add(-time.Hour), say("third secret question"))
	f.heldFor, f.heldWindow = res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	late := t0.Add(23 * time.Hour)
	if _, err := e.store.ExpireWindow(e.ctx, late, f.heldWindow); err != nil {
		e.t.Fatal(err)
	}
	if h, err := e.store.HoldReply(e.ctx, late.Add(time.Second), store.HoldInput{Session: store.ByToken(tok), RequestID: "late-1",
		Content: text(say("third secret answer, held"))}); err != nil || h.Status != vocab.HeldWaiting {
		e.t.Fatalf("hold: %+v %v", h, err)
	}

	// A page of two messages: the older is absorbed into the newer, which opens a window.
	at := late.Add(time.Minute)
	older, newer := f.bot.msg(say("older secret words"), at.Add(-time.Second)), f.bot.msg(say("newest secret words"), at)
	res = e.commit(f.bot, at, older, newer)
	if res.Deliverable == nil || res.Absorbed != 1 {
		e.t.Fatalf("a page of two: %+v", res)
	}
	f.newest, f.newWindow = res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	f.absorbed = e.messageKeyOf(f.bot, older.ProviderMessageID)

	res = e.commit(f.other, t0, f.other.msg(say("the other bot's secret"), t0))
	f.othersMessage = res.Deliverable.MessageKey
	return f
}

// messageKeyOf finds a bot's message by its iLink message id (the test reads the table:
// the store has no such lookup).
func (e *env) messageKeyOf(b *bot, providerMessageID string) string {
	e.t.Helper()
	var key string
	if err := e.pool.QueryRow(e.ctx, `SELECT message_key FROM inbound_messages WHERE account_key = $1 AND provider_message_id = $2`,
		b.key, providerMessageID).Scan(&key); err != nil {
		e.t.Fatal(err)
	}
	return key
}

// A bot's conversations list its messages, windows, send attempts and held replies,
// newest first, with their states and outcomes and never a message's or a reply's text,
// and nothing of another bot; a limit bounds each list.
func TestConversationsListStatesAndOutcomesOfOneBotAndNoText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := newConversationFixture(e)
	c, err := e.store.Conversations(e.ctx, f.bot.key, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order, statuses []string
	for _, m := range c.Messages {
		order = append(order, m.MessageKey)
		statuses = append(statuses, m.Status)
	}
	wantOrder := []string{f.newest, f.absorbed, f.heldFor, f.gaveUp, f.answered}
	if fmt.Sprint(order) != fmt.Sprint(wantOrder) {
		t.Fatalf("messages %v, want newest first %v", order, wantOrder)
	}
	if want := []string{vocab.MessageReceived, vocab.MessageAbsorbed, statuses[2], vocab.MessageFailed, vocab.MessageHandled}; fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("message statuses %v, want %v", statuses, want)
	}
	if c.Messages[3].FailureReason != "the agent gave up" {
		t.Errorf("the failed message's reason: %q", c.Messages[3].FailureReason)
	}

	// A window for each message but the oldest of the page, which the newest absorbed.
	states := map[int64]string{}
	for _, w := range c.Windows {
		if w.AccountKey != f.bot.key {
			t.Errorf("window %d of %s", w.ReplyWindowID, w.AccountKey)
		}
		states[w.ReplyWindowID] = w.State
	}
	if len(c.Windows) != 5 || states[f.newWindow] != vocab.WindowOpen || states[f.heldWindow] != vocab.WindowExpired ||
		states[f.answeredWindow] != vocab.WindowSuperseded {
		t.Errorf("windows %v (want 5: %d open, %d expired, %d superseded)", states, f.newWindow, f.heldWindow, f.answeredWindow)
	}
	if c.Windows[0].ReplyWindowID != f.newWindow {
		t.Errorf("windows do not start with the newest: %d", c.Windows[0].ReplyWindowID)
	}

	if len(c.Replies) != 2 {
		t.Fatalf("replies %+v, want 2", c.Replies)
	}
	if r := c.Replies[0]; r.SourceMessageKey != f.gaveUp || r.Status != vocab.AttemptFailed || r.FailType != vocab.FailRejected || r.ErrorCode != "ilink_rejected" {
		t.Errorf("newest reply %+v, want the rejected one", r)
	}
	if r := c.Replies[1]; r.SourceMessageKey != f.answered || r.Status != vocab.AttemptSent || r.Source != "agent" || r.ContentType != "text" {
		t.Errorf("older reply %+v, want the sent one", r)
	}
	if len(c.Held) != 1 || c.Held[0].SourceMessageKey != f.heldFor || c.Held[0].Status != vocab.HeldWaiting ||
		c.Held[0].Reason != string(vocab.CodeReplyWindowExpired) {
		t.Errorf("held replies %+v", c.Held)
	}

	all := fmt.Sprintf("%+v", c)
	for _, s := range f.texts {
		if strings.Contains(all, s) {
			t.Errorf("the conversations hold the text %q", s)
		}
	}
	if strings.Contains(all, f.othersMessage) || strings.Contains(all, f.other.key) {
		t.Errorf("the conversations hold the other bot's message")
	}

	c, err = e.store.Conversations(e.ctx, f.bot.key, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 2 || c.Messages[0].MessageKey != f.newest || len(c.Replies) != 2 || len(c.Held) != 1 {
		t.Errorf("limit 2: %d messages, %d replies, %d held", len(c.Messages), len(c.Replies), len(c.Held))
	}
	// The open window, and the windows of the two messages listed.
	for _, w := range c.Windows {
		if w.ReplyWindowID != f.newWindow && w.SourceMessageKey != f.absorbed {
			t.Errorf("limit 2: window %d of message %s, neither open nor of a message listed", w.ReplyWindowID, w.SourceMessageKey)
		}
	}
	if len(c.Windows) != 2 || c.Windows[0].ReplyWindowID != f.newWindow {
		t.Errorf("limit 2: %d windows, want the open one first and the absorbed message's", len(c.Windows))
	}
	if _, err := e.store.Conversations(e.ctx, "ilk_00000000000000000000000000000000", 0); store.CodeOf(err) != vocab.CodeAccountNotFound {
		t.Errorf("an unknown account: %v", err)
	}
}

// MessageText reads the text of one message of one bot: another bot's message, or a key
// no message has, is not found; an absorbed message has no text of its own any more.
func TestMessageTextRevealsOneMessageOfTheBotAndNoOtherBots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := newConversationFixture(e)
	c, found, err := e.store.MessageText(e.ctx, f.bot.key, f.gaveUp)
	if err != nil || !found || c.Payload == nil || c.Payload.Summary != "second secret question" || c.Erased {
		t.Fatalf("the bot's message: %+v %v %v", c, found, err)
	}
	for _, c := range []struct{ account, message string }{
		{f.bot.key, f.othersMessage},
		{f.other.key, f.gaveUp},
		{f.bot.key, "im_00000000000000000000000000000000"},
	} {
		if got, found, err := e.store.MessageText(e.ctx, c.account, c.message); err != nil || found || got.Payload != nil {
			t.Errorf("message %s of %s: %+v %v %v, want not found", c.message, c.account, got, found, err)
		}
	}
	if got, found, err := e.store.MessageText(e.ctx, f.bot.key, f.absorbed); err != nil || !found || got.Payload != nil || got.Erased {
		t.Errorf("an absorbed message: %+v %v %v, want found without text, not erased", got, found, err)
	}
	// Erased content is told apart from an absorbed message's.
	if _, err := e.store.ForgetPeer(e.ctx, t0.Add(48*time.Hour), store.ForgetInput{PeerID: f.bot.owner, AccountKey: f.bot.key, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, found, err := e.store.MessageText(e.ctx, f.bot.key, f.gaveUp); err != nil || !found || got.Payload != nil || !got.Erased {
		t.Errorf("an erased message: %+v %v %v, want found, erased, without text", got, found, err)
	}
	if _, _, err := e.store.MessageText(e.ctx, f.bot.key, "im_not-a-key"); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Errorf("a malformed key: %v", err)
	}
}

// The console's reads of a bot's last day and latest rows use the account and time
// indexes of migration 00017: with a few thousand messages and attempts of twenty bots
// stored, neither the activity of every bot nor one bot's latest messages and attempts
// scans the inbox or the attempts.
func TestTheConsoleReadsABotsRowsThroughItsTimeIndexNotTheWholeTables(t *testing.T) {
	t.Parallel()
	e := newOneConnectionEnv(t)
	var window int64
	var keys []string
	for i := range 20 {
		b := e.register()
		keys = append(keys, b.key)
		if i == 0 {
			res, _ := e.converse(b, t0, "hello")
			window = res.Deliverable.ReplyWindowID
		}
	}
	// A year of traffic, written straight into the tables: 4000 messages, each with an
	// attempt refused at once (no quota used).
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO inbound_messages (message_key, account_key, peer_id, provider_message_id, sent_at, status, payload, created_at, updated_at)
		SELECT ilk_message_key(($1::text[])[1 + i % 20], 'bulk-' || i), ($1::text[])[1 + i % 20], 'o9peer@im.wechat', 'bulk-' || i,
		       $2::timestamptz - make_interval(hours => i * 2), 'handled', '{"summary":"bulk"}',
		       $2::timestamptz - make_interval(hours => i * 2), $2::timestamptz
		FROM generate_series(1, 4000) AS i`, keys, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `
		INSERT INTO send_attempts (attempt_id, client_message_id, source_message_key, account_key, peer_id, reply_window_id,
		    send_index, window_send_index, source, content_type, payload, fingerprint, status, error_code, fail_type, created_at, updated_at)
		SELECT 'sa_' || lpad(to_hex(i), 29, '0'), ilk_client_message_id(ilk_message_key(($1::text[])[1 + i % 20], 'bulk-' || i), 0),
		       ilk_message_key(($1::text[])[1 + i % 20], 'bulk-' || i), ($1::text[])[1 + i % 20],
		       'o9peer@im.wechat', $3, 0, 0, 'agent', 'text', '{"type":"text","text":"bulk"}', repeat('0', 64), 'failed',
		       'invalid_input', 'refused', $2::timestamptz - make_interval(hours => i * 2), $2::timestamptz
		FROM generate_series(1, 4000) AS i`, keys, t0, window); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `ANALYZE accounts, inbound_messages, send_attempts, reply_windows, quarantined_pages`); err != nil {
		t.Fatal(err)
	}
	// The statements as the store prepares them on the one connection.
	if _, err := e.store.AccountActivity(e.ctx, t0.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Conversations(e.ctx, keys[0], 0); err != nil {
		t.Fatal(err)
	}
	day := `('` + t0.Add(-24*time.Hour).Format(time.RFC3339) + `')`
	latest := `('` + keys[0] + `', 100)`
	for query, plan := range genericPlans(t, e, map[string]string{
		"ConsoleAccountActivity": day, "ConsoleMessages": latest, "ConsoleAttempts": latest,
	}) {
		for _, table := range []string{"inbound_messages", "send_attempts"} {
			if strings.Contains(plan, "Seq Scan on "+table) {
				t.Errorf("%s scans %s:\n%s", query, table, plan)
			}
		}
		for _, index := range map[string][]string{
			"ConsoleAccountActivity": {"inbound_messages_by_account_time", "send_attempts_by_account_time"},
			"ConsoleMessages":        {"inbound_messages_by_account_time"},
			"ConsoleAttempts":        {"send_attempts_by_account_time"},
		}[query] {
			if !strings.Contains(plan, index) {
				t.Errorf("%s does not use %s:\n%s", query, index, plan)
			}
		}
	}
}
