package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// conversation is what a user left on a bot, made through the production paths: a
// message with an image and a file, ten replies sent (the window's quota) and one held, a
// second message whose window is open with a staged media reply and a reply in flight,
// and a quarantined page of theirs.
type conversation struct {
	b            *bot
	texts        []string // every text of the user or of a reply to them
	held         store.HeldReply
	open         int64 // the open window
	windows      []int64
	inFlight     store.Attempt
	quarantineID string
}

func (e *env) userConversation(b *bot, tag string) *conversation {
	e.t.Helper()
	c := &conversation{b: b}
	first := mediaEntry(b)
	first.Payload.Summary = "first words of " + tag
	res := e.commit(b, t0, first)
	c.windows = append(c.windows, res.Deliverable.ReplyWindowID)
	tok := sealing.NewSecret("session-token-" + tag + "-first-0123456789")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		e.t.Fatal(err)
	}
	c.texts = append(c.texts, first.Payload.Summary)
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("reply %d to %s", i, tag)
		e.sendAt(tok, t0, body, false)
		c.texts = append(c.texts, body)
	}
	heldBody := "the held answer for " + tag
	c.held = e.hold(t0.Add(time.Minute), tok, "req-held-"+tag, heldBody)
	c.texts = append(c.texts, heldBody)

	later := t0.Add(time.Hour)
	second := b.msg("second words of "+tag, later)
	res2, tok2 := e.nextWindow(b, later, second.Payload.Summary)
	c.texts = append(c.texts, second.Payload.Summary)
	c.open = res2.Deliverable.ReplyWindowID
	c.windows = append(c.windows, c.open)
	if _, err := e.store.StageMedia(e.ctx, later, store.StageMediaInput{Session: store.ByToken(tok2), Kind: "file",
		FileName: "notes-of-" + tag + ".txt", Data: []byte("staged bytes of " + tag)}); err != nil {
		e.t.Fatalf("stage media: %v", err)
	}
	inFlight := "the reply in flight to " + tag
	c.inFlight = e.reserveAndStart(later, store.ReplyInput{Session: store.ByToken(tok2), Content: text(inFlight)})
	c.texts = append(c.texts, inFlight)

	page := fmt.Sprintf(`[{"message_id":99,"from_user_id":%q,"to_user_id":%q,"item_list":[{"type":1,"text_item":{"text":"quarantined words of %s"}}]}]`,
		b.owner, b.provider, tag)
	q, err := e.store.QuarantinePage(e.ctx, later, store.QuarantineInput{AccountKey: b.key, Generation: b.generation,
		Scope: store.QuarantineMessages, Messages: 1, Content: sealing.NewSecret(page), ErrorCode: "left_out"})
	if err != nil {
		e.t.Fatalf("quarantine: %v", err)
	}
	c.quarantineID = q.QuarantineID
	return c
}

// schemaText is every row of every table of the test's schema as text, one table a line.
func (e *env) schemaText() string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		e.t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	var out strings.Builder
	for _, table := range tables {
		var d *string
		if err := e.pool.QueryRow(e.ctx, "SELECT string_agg(t::text, '|' ORDER BY t::text) FROM "+
			pgx.Identifier{table}.Sanitize()+" t").Scan(&d); err != nil {
			e.t.Fatalf("read %s: %v", table, err)
		}
		if d != nil {
			out.WriteString(table + ": " + *d + "\n")
		}
	}
	return out.String()
}

func (e *env) forget(in store.ForgetInput) store.ForgetReport {
	e.t.Helper()
	if in.RequestedBy == "" {
		in.RequestedBy = "dpo@example"
	}
	rep, err := e.store.ForgetPeer(e.ctx, t0.Add(2*time.Hour), in)
	if err != nil {
		e.t.Fatalf("forget: %v", err)
	}
	return rep
}

// accountRows is every row of the tables that hold a conversation, of one account.
func (e *env) accountRows(accountKey string) string {
	e.t.Helper()
	var out strings.Builder
	for _, table := range []string{"inbound_messages", "inbound_images", "reply_windows", "send_attempts",
		"agent_sessions", "held_replies", "quarantined_pages"} {
		out.WriteString(e.lines(table+": ", "SELECT t::text FROM "+table+" t WHERE account_key = $1 ORDER BY t::text", accountKey))
	}
	out.WriteString(e.lines("reply_window_secrets: ", `SELECT t::text FROM reply_window_secrets t
		JOIN reply_windows w USING (reply_window_id) WHERE w.account_key = $1 ORDER BY t::text`, accountKey))
	out.WriteString(e.lines("outbound_media: ", `SELECT t::text FROM outbound_media t
		JOIN reply_windows w USING (reply_window_id) WHERE w.account_key = $1 ORDER BY t::text`, accountKey))
	return out.String()
}

func TestForgettingAPeerErasesItsContentAndLeavesOtherPeersAlone(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	user := e.userConversation(e.register(), "the user")
	other := e.userConversation(e.register(), "another user")
	otherBefore := e.accountRows(other.b.key)

	rep := e.forget(store.ForgetInput{PeerID: user.b.owner})

	want := store.ForgetReport{Accounts: []string{user.b.key}, Messages: 2, Images: 2, ContextTokens: 1, Attempts: 11,
		HeldReplies: 1, StagedMedia: 1, Sessions: 1, QuarantinedPages: 1, OpenWindows: []int64{user.open}, Windows: user.windows}
	if len(rep.MessageKeys) != 2 {
		t.Fatalf("message keys %v, want the user's 2", rep.MessageKeys)
	}
	want.MessageKeys = rep.MessageKeys
	if fmt.Sprint(rep) != fmt.Sprint(want) {
		t.Fatalf("report\n%+v, want\n%+v", rep, want)
	}
	dump := e.schemaText()
	for _, s := range append(slices.Clone(user.texts), "staged bytes of the user", "notes-of-the user") {
		if strings.Contains(dump, s) {
			t.Errorf("the database still holds %q after the erasure", s)
		}
	}
	if n := e.count("SELECT count(*) FROM quarantined_pages WHERE quarantine_id = $1", user.quarantineID); n != 0 {
		t.Errorf("the user's quarantined page is kept")
	}
	if !strings.Contains(dump, "first words of another user") || !strings.Contains(dump, "reply 3 to another user") {
		t.Errorf("the other user's content is gone")
	}
	if after := e.accountRows(other.b.key); after != otherBefore {
		t.Fatalf("the other user's rows changed:\nbefore %s\nafter  %s", otherBefore, after)
	}

	// What stays: every row with its keys, statuses and counters, without content.
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND payload IS NULL AND erased_at IS NOT NULL AND failure_reason = ''", user.b.key); n != 2 {
		t.Errorf("%d erased messages, want 2", n)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND status IN ('received', 'processing', 'held')", user.b.key); n != 0 {
		t.Errorf("%d messages of the user left unsettled", n)
	}
	if n := e.count(`SELECT count(*) FROM send_attempts WHERE account_key = $1 AND payload = 'null'::jsonb AND metadata = '{}'::jsonb
		AND error_message = '' AND fingerprint = repeat('0', 64) AND erased_at IS NOT NULL`, user.b.key); n != 11 {
		t.Errorf("%d erased attempts, want 11", n)
	}
	if n := e.count("SELECT count(*) FROM send_attempts WHERE account_key = $1 AND status = 'sent'", user.b.key); n != 10 {
		t.Errorf("%d attempts of the user still sent, want 10 (statuses stay)", n)
	}
	h := e.heldOf(user.b, user.held.HeldID)
	if h.Status != vocab.HeldDropped || h.DropReason != "forgotten" || h.DroppedBy != "dpo@example" || !e.sealedGone(h.HeldID) {
		t.Errorf("held reply after the erasure: %+v", h)
	}
	w, err := e.store.GetWindow(e.ctx, user.open)
	if err != nil || w.State != vocab.WindowCancelled || w.Reserved != 0 {
		t.Errorf("the open window after the erasure: %+v %v", w, err)
	}
	if n := e.count("SELECT count(*) FROM agent_sessions WHERE account_key = $1 AND closed_at IS NULL", user.b.key); n != 0 {
		t.Errorf("%d sessions of the user still open", n)
	}
	if n := e.count("SELECT count(*) FROM quarantined_pages WHERE quarantine_id = $1", other.quarantineID); n != 1 {
		t.Errorf("the other user's quarantined page is gone")
	}
	// The send in flight completes as iLink answers it, on its erased row.
	done, err := e.store.CompleteSend(e.ctx, t0.Add(3*time.Hour), store.Completion{AttemptID: user.inFlight.AttemptID,
		Status: vocab.AttemptSent, ProviderMessageID: "18446744073709551615"})
	if err != nil || done.Attempt.Status != vocab.AttemptSent || done.Attempt.Content.Text != "" {
		t.Fatalf("completing the send in flight after the erasure: %+v %v", done.Attempt, err)
	}
	// The audit line: who and what, nothing about the person.
	audit := e.lines("", "SELECT t::text FROM forget_audit t")
	if strings.Count(audit, "\n") != 1 || !strings.Contains(audit, "dpo@example") ||
		e.count("SELECT (counts->>'messages')::int FROM forget_audit WHERE account_key IS NULL") != 2 ||
		strings.Contains(audit, user.b.owner) || strings.Contains(audit, "o9cq8") {
		t.Fatalf("forget_audit: %s", audit)
	}
}

func TestADryRunOfForgettingCountsWhatARunErasesAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	user := e.userConversation(e.register(), "the user")
	e.userConversation(e.register(), "another user")
	before := e.schemaText()
	dry := e.forget(store.ForgetInput{PeerID: user.b.owner, DryRun: true})
	if after := e.schemaText(); after != before {
		t.Fatal("a dry run wrote to the store")
	}
	real := e.forget(store.ForgetInput{PeerID: user.b.owner, AccountKey: user.b.key})
	if fmt.Sprint(dry) != fmt.Sprint(real) || !dry.Erased() {
		t.Fatalf("the dry run counted\n%+v, the run erased\n%+v", dry, real)
	}
}

func TestForgettingAgainErasesNothingAndCountsZero(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	user := e.userConversation(e.register(), "the user")
	first := e.forget(store.ForgetInput{PeerID: user.b.owner})
	before := e.schemaText()
	again := e.forget(store.ForgetInput{PeerID: user.b.owner, DryRun: true})
	if again.Erased() || len(again.OpenWindows) != 0 {
		t.Fatalf("a dry run after the erasure finds %+v", again)
	}
	if after := e.schemaText(); after != before {
		t.Fatal("a dry run after the erasure wrote")
	}
	second := e.forget(store.ForgetInput{PeerID: user.b.owner})
	want := store.ForgetReport{Accounts: first.Accounts, Windows: first.Windows, MessageKeys: first.MessageKeys}
	if fmt.Sprint(second) != fmt.Sprint(want) {
		t.Fatalf("the second run: %+v, want nothing erased (%+v)", second, want)
	}
	if n := e.count("SELECT count(*) FROM forget_audit"); n != 2 {
		t.Fatalf("%d audit lines, want one per run", n)
	}
}

func TestAMessageHandedOutAgainAfterItsErasureIsStillDeduplicated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	entry := b.msg("words the user wants forgotten", t0)
	res := e.commit(b, t0, entry)
	if res.Deliverable == nil {
		t.Fatalf("not delivered: %+v", res)
	}
	e.forget(store.ForgetInput{PeerID: b.owner})
	before := e.count("SELECT count(*) FROM inbound_messages")
	again, err := e.tryCommit(b, t0.Add(3*time.Hour), entry)
	if err != nil {
		t.Fatalf("the same message again: %v", err)
	}
	if again.Deliverable != nil || again.Opened != nil || e.count("SELECT count(*) FROM inbound_messages") != before {
		t.Fatalf("the message iLink handed out again was stored again: %+v", again)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE payload IS NOT NULL"); n != 0 {
		t.Fatalf("the redelivered message brought its content back (%d payloads)", n)
	}
	// The next new message of the user is a conversation as any: stored and delivered,
	// with no erased backlog merged into it.
	next := b.msg("a new message", t0.Add(3*time.Hour))
	res2 := e.commit(b, t0.Add(3*time.Hour), next)
	if res2.Deliverable == nil {
		t.Fatalf("the user's next message was not delivered: %+v", res2)
	}
	if m := e.messageStatus(res2.Deliverable.MessageKey); m.Payload == nil || m.Payload.Summary != "a new message" {
		t.Fatalf("the user's next message: %+v", m.Payload)
	}
}

func TestForgettingRefusesBadInputAndUnknownPeersAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	other := e.register()
	e.commit(b, t0, b.msg("hello", t0))
	before := e.schemaText()
	cases := []struct {
		name string
		in   store.ForgetInput
		code vocab.Code
	}{
		{"no peer id", store.ForgetInput{RequestedBy: "dpo"}, vocab.CodeInvalidInput},
		{"a peer id with a control character", store.ForgetInput{PeerID: "o9cq8\nx@im.wechat", RequestedBy: "dpo"}, vocab.CodeInvalidInput},
		{"a peer id too long", store.ForgetInput{PeerID: strings.Repeat("x", 257), RequestedBy: "dpo"}, vocab.CodeInvalidInput},
		{"a malformed account key", store.ForgetInput{PeerID: b.owner, AccountKey: "ilk_XYZ", RequestedBy: "dpo"}, vocab.CodeInvalidInput},
		{"no operator", store.ForgetInput{PeerID: b.owner}, vocab.CodeInvalidInput},
		{"an unknown account", store.ForgetInput{PeerID: b.owner, AccountKey: "ilk_" + strings.Repeat("0", 32), RequestedBy: "dpo"}, vocab.CodeAccountNotFound},
		{"an unknown peer", store.ForgetInput{PeerID: "o9cq8nobody@im.wechat", RequestedBy: "dpo"}, vocab.CodePeerNotFound},
		{"the peer on another account", store.ForgetInput{PeerID: b.owner, AccountKey: other.key, RequestedBy: "dpo"}, vocab.CodePeerNotFound},
	}
	for _, c := range cases {
		for _, dry := range []bool{false, true} {
			c.in.DryRun = dry
			_, err := e.store.ForgetPeer(e.ctx, t0.Add(time.Hour), c.in)
			if store.CodeOf(err) != c.code {
				t.Errorf("%s (dry run %v): %v, want %s", c.name, dry, err, c.code)
			}
		}
	}
	if after := e.schemaText(); after != before {
		t.Fatal("a refused erasure wrote to the store")
	}
	// The bot's owner is found on their bot even before writing anything.
	rep := e.forget(store.ForgetInput{PeerID: other.owner})
	if !slices.Equal(rep.Accounts, []string{other.key}) || rep.Erased() {
		t.Fatalf("the owner of a bot without messages: %+v", rep)
	}
}
