package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestHeldHelpShowsListAndDropExamples(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliRun(t, "held", "--help")
	if code != 0 || errOut != "" {
		t.Fatalf("held --help: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"\nexample:\n  starter held list", "starter held drop --account ilk_", "--status", "--by"} {
		if !strings.Contains(out, want) {
			t.Fatalf("held --help lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := cliRun(t, "help"); code != 0 || !strings.Contains(out, "\n  held ") {
		t.Fatalf("starter help does not list held:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"held"}, "held: give list or drop"},
		{[]string{"held", "frobnicate"}, `held: unknown action "frobnicate"`},
		{[]string{"held", "list", "hr_x"}, "held list takes no argument"},
		{[]string{"held", "list", "--limit", "0"}, "--limit 0: must be between 1 and 1000"},
		{[]string{"held", "list", "--status", "held,bogus"}, `invalid_input: --status "bogus": must be one of held, sending, sent, unknown, failed, dropped`},
		{[]string{"held", "drop", "hr_x"}, "held drop: --account is required"},
		{[]string{"held", "drop", "--account", "ilk_x"}, "held drop takes one held reply id"},
		{[]string{"held", "drop", "--account", "ilk_x", "--status", "held", "hr_x"}, "held drop: --status and --limit are list's"},
	} {
		code, out, errOut := cliRun(t, c.args...)
		assertUsageMistake(t, strings.Join(c.args, " "), code, out, errOut, c.want)
	}
}

// heldFixture is a bot whose one conversation holds replies: its message's window
// expired before the agent answered, and the late answers were held.
type heldFixture struct {
	st                   *store.Store
	account, other, peer string
	messageKey           string
	windowID             int64
}

// holdLateReplies registers a bot (and another), commits a message from its owner a day
// and an hour ago, opens an agent session on its window, expires the window and holds
// one late reply per body, in order.
func holdLateReplies(t *testing.T, ctx context.Context, st *store.Store, bodies ...string) (heldFixture, []store.HeldReply) {
	t.Helper()
	base := time.Now().Add(-25 * time.Hour)
	var keys []string
	for _, bot := range []string{"0000000held1", "0000000held2"} {
		a, err := storetest.RegisterAccount(ctx, st, base.Add(-time.Minute), store.ConfirmInput{ProviderAccountID: bot + "@im.bot",
			OwnerPeerID: "o9-" + bot + "@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.AccountKey)
	}
	a, err := st.GetAccount(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	f := heldFixture{st: st, account: keys[0], other: keys[1], peer: "o9-0000000held1@im.wechat"}
	res, err := st.CommitPage(ctx, base, store.PageInput{AccountKey: f.account, Generation: a.Generation, NextCursor: "Ck1",
		Entries: []store.PageEntry{{ProviderMessageID: "7000000000000000001", PeerID: f.peer, SentAt: base,
			ContextToken: sealing.NewSecret("CKctx-held-1"), Payload: store.Payload{Summary: "hello"}}}})
	if err != nil || res.Deliverable == nil {
		t.Fatalf("commit page: %+v %v", res, err)
	}
	f.messageKey, f.windowID = res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	tok := sealing.NewSecret("session-token-held-" + f.account)
	if _, err := st.OpenAgentSession(ctx, base, store.OpenSessionInput{ReplyWindowID: f.windowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	late := time.Now().Add(-30 * time.Minute) // the window expired half an hour before
	if _, err := st.ExpireWindow(ctx, late, f.windowID); err != nil {
		t.Fatal(err)
	}
	var held []store.HeldReply
	for i, body := range bodies {
		h, err := st.HoldReply(ctx, late.Add(time.Duration(i+1)*time.Second), store.HoldInput{Session: store.ByToken(tok),
			RequestID: fmt.Sprintf("req-%d", i+1), Content: vocab.Content{Type: "text", Text: body}})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	return f, held
}

func TestHeldRepliesAreListedNewestFirstWithoutTheirContentAndDroppedOnlyByTheirOwnAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{"the first sealed late answer", "the second sealed late answer"}
	f, held := holdLateReplies(t, ctx, st, bodies...)
	getenv := func(k string) string {
		if k == sealing.EnvKeys {
			return testkit.KeySpec
		}
		return ""
	}
	starter := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--database-url", dbtest.SchemaURL(schema))
		code := runMain(ctx, args, strings.NewReader(""), &out, &errOut, getenv)
		for _, b := range bodies {
			if strings.Contains(out.String()+errOut.String(), b) {
				t.Fatalf("starter %v printed a held reply's content", args)
			}
		}
		return code, out.String(), errOut.String()
	}
	list := func(args ...string) []heldRow {
		t.Helper()
		code, out, errOut := starter(append([]string{"held", "list", "--json"}, args...)...)
		var rows []heldRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("held list %v: exit %d, %q, stderr %q", args, code, out, errOut)
		}
		return rows
	}
	windowHeld := func() int32 {
		t.Helper()
		code, out, errOut := starter("windows", "--json", "--account", f.account)
		var rows []windowRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ReplyWindowID != f.windowID {
			t.Fatalf("windows: exit %d, %q, stderr %q", code, out, errOut)
		}
		return rows[0].Held
	}

	// Listed newest first, with what an operator needs and never the content.
	rows := list()
	if len(rows) != 2 || rows[0].HeldID != held[1].HeldID || rows[1].HeldID != held[0].HeldID {
		t.Fatalf("held list: %+v, want %s then %s", rows, held[1].HeldID, held[0].HeldID)
	}
	for i, r := range rows {
		body := bodies[1-i]
		if r.AccountKey != f.account || r.PeerID != f.peer || r.SourceMessageKey != f.messageKey || r.ReplyWindowID != f.windowID ||
			r.Status != vocab.HeldWaiting || r.Reason != string(vocab.CodeReplyWindowExpired) || r.Final || r.ContentType != "text" ||
			r.SizeBytes != int32(len(body)) || !r.ExpiresAt.After(r.CreatedAt) || r.DropReason != "" || r.DroppedBy != "" {
			t.Errorf("held list row %d: %+v", i, r)
		}
	}
	if rows := list("--account", f.other); len(rows) != 0 {
		t.Fatalf("held list of another account: %+v", rows)
	}
	if rows := list("--status", "sending,sent"); len(rows) != 0 {
		t.Fatalf("held list --status sending,sent: %+v", rows)
	}
	if rows := list("--limit", "1", "--status", "held"); len(rows) != 1 || rows[0].HeldID != held[1].HeldID {
		t.Fatalf("held list --limit 1: %+v", rows)
	}
	code, text, errOut := starter("held", "list", "--account", f.account)
	if code != 0 || !strings.Contains(text, "FOR MESSAGE") || !strings.Contains(text, "REASON") || !strings.Contains(text, held[0].HeldID) ||
		!strings.Contains(text, "reply_window_expired") || !strings.Contains(text, f.peer) {
		t.Fatalf("held list text: exit %d, stderr %q:\n%s", code, errOut, text)
	}

	// windows shows the replies waiting for the window's conversation.
	if n := windowHeld(); n != 2 {
		t.Fatalf("windows shows %d held replies, want 2", n)
	}
	if _, text, _ := starter("windows", "--account", f.account); !strings.Contains(text, "HELD") {
		t.Fatalf("windows text has no HELD column:\n%s", text)
	}

	// Another account's or an unknown id: held_reply_not_found, nothing written.
	for _, c := range [][]string{{f.other, held[0].HeldID}, {f.account, "hr_00000000000000000000000000000000"}, {f.account, "not-an-id"}} {
		code, out, errOut := starter("held", "drop", "--account", c[0], c[1])
		if code != 1 || out != "" || strings.Count(errOut, string(vocab.CodeHeldReplyNotFound)) != 1 || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("held drop --account %s %s: exit %d, stdout %q, stderr %q", c[0], c[1], code, out, errOut)
		}
	}
	if after := list(); len(after) != 2 || after[0] != rows[0] || after[1] != rows[1] {
		t.Fatalf("a refused drop changed the held replies: %+v", after)
	}

	// Dropped by its own account, named by --by; a second drop is attempt_conflict.
	code, out, errOut := starter("held", "drop", "--account", f.account, held[0].HeldID, "--by", "ops@example", "--json")
	var dropped heldRow
	if code != 0 || json.Unmarshal([]byte(out), &dropped) != nil || dropped.HeldID != held[0].HeldID || dropped.Status != vocab.HeldDropped ||
		dropped.DropReason != store.HeldDropOperator || dropped.DroppedBy != "ops@example" {
		t.Fatalf("held drop: exit %d, %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = starter("held", "drop", "--account", f.account, held[0].HeldID)
	if code != 1 || out != "" || strings.Count(errOut, string(vocab.CodeAttemptConflict)) != 1 {
		t.Fatalf("a second drop: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := windowHeld(); n != 1 {
		t.Fatalf("windows shows %d held replies after a drop, want 1", n)
	}
	// Without --by the operator is the OS user, else "operator" (as route and mcp-agent).
	code, out, errOut = starter("held", "drop", "--account", f.account, held[1].HeldID)
	if code != 0 || !strings.Contains(out, held[1].HeldID) || !strings.Contains(out, "dropped by operator") {
		t.Fatalf("held drop without --by: exit %d, %q, stderr %q", code, out, errOut)
	}
	if rows := list("--status", "dropped"); len(rows) != 2 || rows[1].DroppedBy != "ops@example" || rows[0].DroppedBy != "operator" {
		t.Fatalf("held list --status dropped: %+v", rows)
	}
	if rows := list("--status", "held,sending"); len(rows) != 0 {
		t.Fatalf("held replies still waiting after both were dropped: %+v", rows)
	}
	if _, text, _ := starter("held", "list"); !strings.Contains(text, "by ops@example") {
		t.Fatalf("held list text does not say who dropped it:\n%s", text)
	}
	if n := windowHeld(); n != 0 {
		t.Fatalf("windows shows %d held replies after both were dropped, want 0", n)
	}
	// Its only answer dropped, the message failed (the store's rule, seen through the CLI's drop).
	if m, err := st.GetMessage(ctx, f.messageKey); err != nil || m.Status != vocab.MessageFailed {
		t.Fatalf("message after its held answers were dropped: %+v %v", m, err)
	}
}

// A bot's reminder is turned on and off through the CLI, which prints it; a reminder
// not shorter than the window's lifetime is the store's invalid_input, nothing written.
func TestAReminderIsTurnedOnAndOffAndOneAsLongAsTheWindowIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	f, _ := holdLateReplies(t, ctx, st)
	starter := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args, "--database-url", dbtest.SchemaURL(schema))
		code := runMain(ctx, args, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
		return code, out.String(), errOut.String()
	}
	reminder := func() (time.Duration, string) {
		t.Helper()
		a, err := st.GetAccount(ctx, f.account)
		if err != nil {
			t.Fatal(err)
		}
		return a.RemindBefore, a.ReminderText
	}
	code, out, errOut := starter("reminder", "--account", f.account, "--before", "2h", "--text", "write to me again", "--json")
	var row reminderRow
	if code != 0 || json.Unmarshal([]byte(out), &row) != nil || !row.On || row.BeforeSecond != 7200 || row.Text != "write to me again" {
		t.Fatalf("reminder on: exit %d, %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := starter("reminder", "--account", f.account, "--before", "24h", "--text", "too late"); code != 1 ||
		!strings.Contains(errOut, "invalid_input") {
		t.Fatalf("a reminder as long as the window: exit %d, %q", code, errOut)
	}
	if before, text := reminder(); before != 2*time.Hour || text != "write to me again" {
		t.Fatalf("after a refused change the reminder is %s %q", before, text)
	}
	if code, out, errOut := starter("reminder", "--account", f.account, "--off"); code != 0 || !strings.Contains(out, "is off") {
		t.Fatalf("reminder off: exit %d, %q, %q", code, out, errOut)
	}
	if before, text := reminder(); before != 0 || text != "" {
		t.Fatalf("after --off the reminder is %s %q", before, text)
	}
	if code, _, errOut := starter("reminder", "--account", "ilk_00000000000000000000000000000000", "--off"); code != 1 ||
		!strings.Contains(errOut, "account_not_found") {
		t.Fatalf("an unknown account: exit %d, %q", code, errOut)
	}
}
