package activity

import (
	"bytes"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// stageImage stages media for the session's window and returns the content that sends it.
func (h *harness) stageImage(sessionID string, data []byte) vocab.Content {
	h.t.Helper()
	m, err := h.store.StageMedia(h.ctx, time.Now(), store.StageMediaInput{Session: store.BySessionID(sessionID), Kind: "image", Data: data})
	if err != nil {
		h.t.Fatal(err)
	}
	return vocab.Content{Type: "image", Media: &vocab.MediaRef{MediaID: m.MediaID, Size: m.Size, SHA256: m.SHA256}}
}

func TestAMediaSendUploadsOnceAndARetryNeverUploadsOrSendsTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("send me a picture")
	data := bytes.Repeat([]byte("\x89PNG-ish"), 200)
	content := h.stageImage(ho.SessionID, data)
	in := activities.SendInput{SessionID: ho.SessionID, RequestID: "pic-1", Content: content}
	first := must[activities.SendOutput](t)(run[activities.SendOutput](h, h.acts.Send, in))
	again := must[activities.SendOutput](t)(run[activities.SendOutput](h, h.acts.Send, in))
	if first.Status != vocab.AttemptSent || again != first {
		t.Fatalf("first %+v, retry %+v", first, again)
	}
	if up, sends := h.requests("c2c/upload"), len(h.sent()); up != 1 || sends != 1 {
		t.Fatalf("%d uploads and %d sends, want one each", up, sends)
	}
	if n := h.count(`SELECT count(*) FROM outbound_media WHERE uploaded_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d recorded uploads, want 1", n)
	}
}

func TestARecordedUploadIsSentAgainWithoutASecondUpload(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("send me a picture")
	content := h.stageImage(ho.SessionID, bytes.Repeat([]byte("img"), 300))
	// The first send's transmission is lost after the upload was recorded: unknown.
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	lost := must[activities.SendOutput](t)(run[activities.SendOutput](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: "pic-1", Content: content}))
	if lost.Status != vocab.AttemptUnknown {
		t.Fatalf("lost send %+v", lost)
	}
	// The agent sends the same media again (a new request): the recorded upload is used.
	second := must[activities.SendOutput](t)(run[activities.SendOutput](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: "pic-2", Content: content}))
	if second.Status != vocab.AttemptSent {
		t.Fatalf("second send %+v", second)
	}
	if up := h.requests("c2c/upload"); up != 1 {
		t.Fatalf("%d uploads of one staged media, want 1", up)
	}
}

func TestAFailedUploadIsNotSentAndGivesTheQuotaBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("send me a picture")
	content := h.stageImage(ho.SessionID, []byte("an image that will not upload"))
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "c2c/upload", Kind: ilinksim.FaultStatus, Status: 400}); err != nil {
		t.Fatal(err)
	}
	out := must[activities.SendOutput](t)(run[activities.SendOutput](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: "pic-1", Content: content}))
	if out.Status != vocab.AttemptFailed || out.ErrorCode != vocab.SendNotSent || out.SendsLeft != 10 {
		t.Fatalf("output %+v, want failed not_sent with the quota back", out)
	}
	if n := len(h.sent()); n != 0 {
		t.Fatalf("the simulator saw %d sends", n)
	}
}
