package store_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestInboundTextWithNULIsStoredAndReadBackAsItCame(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	m := b.msg("before\x00after", t0)
	m.Payload.Attachments = []store.Attachment{{Kind: "file", Name: "re\x00port.pdf", Size: 3}, {Kind: "voice", Text: "say\x00it"}}
	res := e.commit(b, t0, m)
	if res.Deliverable == nil {
		t.Fatalf("the message was not deliverable: %+v", res)
	}
	got, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.Payload == nil || got.Payload.Summary != "before\x00after" || len(got.Payload.Attachments) != 2 ||
		got.Payload.Attachments[0].Name != "re\x00port.pdf" || got.Payload.Attachments[1].Text != "say\x00it" {
		t.Fatalf("stored payload %+v", got.Payload)
	}
	// A later message merges the unanswered one: the NUL survives the merge too.
	res = e.commit(b, t0, b.msg("next", t0.Add(1)))
	got, err = e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil || !strings.Contains(got.Payload.Summary, "before\x00after") {
		t.Fatalf("merged payload %+v (%v)", got.Payload, err)
	}
}

func TestAQuarantinedPageMovesTheCursorAndKeepsItsMessagesSealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	content := `[{"message_id":7,"context_token":"CKsecret-context"}]`
	q, err := e.store.QuarantinePage(e.ctx, t0, store.QuarantineInput{
		AccountKey: b.key, Generation: b.generation, Scope: store.QuarantineWholePage, Messages: 1,
		Content: sealing.NewSecret(content), ErrorCode: string(vocab.CodeInvalidInput), ErrorMessage: "bad \x00 page",
		MoveCursor: true, ExpectedCursor: "", NextCursor: "Ck-after",
	})
	if err != nil || !q.CursorMoved {
		t.Fatalf("quarantine: %+v %v", q, err)
	}
	if a, err := e.store.GetAccount(e.ctx, b.key); err != nil || a.Cursor != "Ck-after" {
		t.Fatalf("cursor %q (%v), want it moved past the quarantined page", a.Cursor, err)
	}
	list, err := e.store.ListQuarantinedPages(e.ctx, b.key)
	if err != nil || len(list) != 1 || list[0].QuarantineID != q.QuarantineID || list[0].Messages != 1 ||
		list[0].ErrorCode != string(vocab.CodeInvalidInput) || strings.Contains(list[0].ErrorMessage, "\x00") {
		t.Fatalf("listing %+v (%v)", list, err)
	}
	var ciphertext []byte
	if err := e.pool.QueryRow(e.ctx, "SELECT ciphertext FROM quarantined_pages").Scan(&ciphertext); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ciphertext, []byte("CKsecret-context")) {
		t.Fatal("the quarantined page is stored in the clear")
	}
	_, opened, err := e.store.OpenQuarantinedPage(e.ctx, q.QuarantineID)
	if err != nil || opened.Reveal() != content {
		t.Fatalf("opened %q (%v)", opened.Reveal(), err)
	}
	// The sealed content is bound to its row: moved to another row, it does not open.
	q2, err := e.store.QuarantinePage(e.ctx, t0, store.QuarantineInput{
		AccountKey: b.key, Generation: b.generation, Scope: store.QuarantineMessages, Messages: 1,
		Content: sealing.NewSecret("other"), ErrorCode: "left_out",
	})
	if err != nil || q2.CursorMoved {
		t.Fatalf("quarantine of messages: %+v %v", q2, err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE quarantined_pages SET (key_generation, nonce, ciphertext) =
		(SELECT key_generation, nonce, ciphertext FROM quarantined_pages WHERE quarantine_id = $1) WHERE quarantine_id = $2`,
		q.QuarantineID, q2.QuarantineID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.OpenQuarantinedPage(e.ctx, q2.QuarantineID); err == nil {
		t.Fatal("a ciphertext moved to another quarantined page opened")
	}
}

func TestAQuarantineFromAStaleCursorWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	e.commit(b, t0, b.msg("first", t0))
	before := e.digest()
	_, err := e.store.QuarantinePage(e.ctx, t0, store.QuarantineInput{
		AccountKey: b.key, Generation: b.generation, Scope: store.QuarantineWholePage, Messages: 1,
		Content: sealing.NewSecret("[]"), ErrorCode: "x", MoveCursor: true, ExpectedCursor: "", NextCursor: "Ck-other",
	})
	wantCode(t, err, vocab.CodeCursorConflict)
	e.unchanged(before)
	if n := e.count("SELECT count(*) FROM quarantined_pages"); n != 0 {
		t.Fatalf("%d quarantined pages written", n)
	}
}

func TestAPageThePostgreSQLTypesRefuseIsInvalidInputNotAnOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	// A rule the store does not know of, enforced by PostgreSQL alone (as a future column
	// type or an operator's trigger would): its data exception is the input's fault.
	dbtest.RefuseInboundText(t, e.pool, "poison")
	before := e.digest()
	_, err := e.tryCommit(b, t0, b.msg("poison", t0))
	wantCode(t, err, vocab.CodeInvalidInput)
	if !store.IsRuleViolation(err) {
		t.Fatal("a data exception is retried as an outage")
	}
	e.unchanged(before)
}
