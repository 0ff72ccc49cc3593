package activity

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// wantQuarantined checks that the harness bot has exactly one quarantined page, of scope
// with n messages, whose error mentions reason.
func (h *harness) wantQuarantined(scope string, n int32, reason string) store.QuarantinedPage {
	h.t.Helper()
	list, err := h.store.ListQuarantinedPages(h.ctx, h.key)
	if err != nil || len(list) != 1 {
		h.t.Fatalf("quarantined pages %+v (%v), want one", list, err)
	}
	q := list[0]
	if q.Scope != scope || q.Messages != n || !strings.Contains(q.ErrorMessage, reason) {
		h.t.Fatalf("quarantined page %+v, want scope %s, %d message(s), an error saying %q", q, scope, n, reason)
	}
	return q
}

func TestAUserMessageWithNULIsStoredAsItCameAndDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.inject(ilinksim.InjectRequest{Text: "a\x00b"})
	h.inject(ilinksim.InjectRequest{Kind: ilinksim.KindFile, FileName: "x\x00../../y.pdf"})
	res, err := h.poll(false)
	if err != nil || len(res.Opened) == 0 {
		t.Fatalf("poll %+v %v", res, err)
	}
	msg, err := h.store.GetMessage(h.ctx, res.Opened[len(res.Opened)-1].MessageKey)
	if err != nil || msg.Payload == nil || !strings.Contains(msg.Payload.Summary, "a\x00b") {
		t.Fatalf("message %+v (%v)", msg.Payload, err)
	}
	names := ""
	for _, a := range msg.Payload.Attachments {
		names += a.Name
	}
	if names != "x\x00../../y.pdf" {
		t.Fatalf("attachments %+v, want the file's name as the user's client sent it", msg.Payload.Attachments)
	}
	if n := h.count("SELECT count(*) FROM quarantined_pages"); n != 0 {
		t.Fatalf("%d pages quarantined", n)
	}
}

func TestAPageTheStoreCannotTakeIsQuarantinedAndTheBotGoesOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dbtest.RefuseInboundText(t, h.pool, "poison")
	h.inject(ilinksim.InjectRequest{Text: "poison"})
	res, err := h.poll(true)
	if err != nil || len(res.Opened) != 0 || res.Pages != 1 {
		t.Fatalf("poll of the poisoned page: %+v %v", res, err)
	}
	q := h.wantQuarantined(store.QuarantineWholePage, 1, "SQLSTATE 22023")
	if !q.CursorMoved || h.account().Cursor == "" {
		t.Fatalf("the cursor did not move past the quarantined page: %+v", q)
	}
	_, content, err := h.store.OpenQuarantinedPage(h.ctx, q.QuarantineID)
	if err != nil || !strings.Contains(content.Reveal(), "poison") || !strings.Contains(content.Reveal(), "context_token") {
		t.Fatalf("the quarantined page does not hold the message as iLink handed it out: %v", err)
	}
	h.inject(ilinksim.InjectRequest{Text: "next"})
	res, err = h.poll(false)
	if err != nil || len(res.Opened) != 1 || !res.Opened[0].Deliverable {
		t.Fatalf("the next message after a quarantined page: %+v %v", res, err)
	}
	var page []struct {
		ContextToken string `json:"context_token"`
	}
	if err := json.Unmarshal([]byte(content.Reveal()), &page); err != nil || len(page) != 1 || page[0].ContextToken == "" {
		t.Fatalf("quarantined content %v", err)
	}
	if strings.Contains(h.logs.String(), page[0].ContextToken) {
		t.Fatal("the quarantined message's context token reached the logs")
	}
}
