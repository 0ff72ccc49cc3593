package store_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// mediaEntry is a page entry with an image, a file with a locator and a voice without.
func mediaEntry(b *bot) store.PageEntry {
	e := b.msg("[image]\n[file a.pdf]\n[voice]", t0)
	e.Payload.Attachments = []store.Attachment{
		{Kind: "image", Position: 0},
		{Kind: "file", Name: "a.pdf", Size: 3, Position: vocab.MediaPositionBase},
		{Kind: "voice"},
	}
	e.Images = []store.ImageLocator{{Position: 0, Locator: sealing.NewSecret(`{"media":{"encrypt_query_param":"img"}}`)}}
	e.Media = []store.ImageLocator{{Position: vocab.MediaPositionBase, Locator: sealing.NewSecret(`{"media":{"encrypt_query_param":"pdf"},"item_type":4}`)}}
	return e
}

func TestAttachmentIsFetchedOnlyWithItsOwnMessagesLiveSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res := e.commit(b, t0, mediaEntry(b))
	tok := sealing.NewSecret("session-token-media-0123456789")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	key := res.Deliverable.MessageKey
	m, err := e.store.GetMessage(e.ctx, key)
	if err != nil || len(m.Payload.Attachments) != 3 {
		t.Fatalf("message: %+v %v", m.Payload, err)
	}
	other, tok2 := e.deliver(e.register(), "other")
	before := e.digest()
	for i, a := range m.Payload.Attachments { // the payload lists other media before images
		got, err := e.store.GetAttachment(e.ctx, t0, store.ByToken(tok), key, i)
		want := map[string]string{"image": "img", "file": "pdf"}[a.Kind]
		switch {
		case want == "":
			wantCode(t, err, vocab.CodeAttachmentNotFound) // the voice has no media
		case err != nil:
			t.Fatalf("attachment %d: %v", i, err)
		case got.Attachment.Kind != a.Kind || !strings.Contains(got.Locator.Reveal(), `"`+want+`"`):
			t.Fatalf("attachment %d: wrong locator", i)
		}
	}
	_, err = e.store.GetAttachment(e.ctx, t0, store.ByToken(tok), key, 3)
	wantCode(t, err, vocab.CodeAttachmentNotFound)

	// Another message's session: wrong_message; an unknown token: invalid session.
	_, err = e.store.GetAttachment(e.ctx, t0, store.ByToken(tok2), key, 0)
	wantCode(t, err, vocab.CodeWrongMessage)
	_, err = e.store.GetAttachment(e.ctx, t0, store.ByToken(tok2), other.Deliverable.MessageKey, 0)
	wantCode(t, err, vocab.CodeAttachmentNotFound)
	_, err = e.store.GetAttachment(e.ctx, t0, store.ByToken(sealing.NewSecret("no-such-token-000000")), key, 0)
	wantCode(t, err, vocab.CodeInvalidAgentSession)
	e.unchanged(before)

	// The page holds exactly the image's and the file's locators.
	if n := e.count(`SELECT count(*) FROM inbound_images WHERE message_key = $1`, key); n != 2 {
		t.Fatalf("%d locator rows, want 2", n)
	}
}

func TestAbsorbedMessageLosesItsMediaLocatorsAndMergesOnlyImages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first := e.commit(b, t0, mediaEntry(b))
	second := e.commit(b, t0.Add(time.Second), b.msg("later", t0.Add(time.Second)))
	if second.Deliverable == nil {
		t.Fatalf("no deliverable: %+v", second)
	}
	if n := e.count(`SELECT count(*) FROM inbound_images WHERE message_key = $1`, first.Deliverable.MessageKey); n != 0 {
		t.Fatalf("the absorbed message keeps %d locator rows", n)
	}
	m, err := e.store.GetMessage(e.ctx, second.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Payload.Attachments {
		if a.Kind != "image" || a.Position >= vocab.MediaPositionBase {
			t.Fatalf("merged attachments %+v: only images move", m.Payload.Attachments)
		}
	}
	if n := e.count(`SELECT count(*) FROM inbound_images WHERE message_key = $1 AND position < $2`, second.Deliverable.MessageKey, vocab.MediaPositionBase); n != 1 {
		t.Fatalf("the merged message holds %d image rows, want 1", n)
	}
}

func TestPageRefusesMediaLocatorsInconsistentWithAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	before := e.digest()
	for name, edit := range map[string]func(*store.PageEntry){
		"locator without attachment": func(p *store.PageEntry) {
			p.Media = append(p.Media, store.ImageLocator{Position: 501, Locator: sealing.NewSecret("x")})
		},
		"attachment without locator": func(p *store.PageEntry) { p.Media = nil },
		"media below the base":       func(p *store.PageEntry) { p.Payload.Attachments[1].Position = 7; p.Media[0].Position = 7 },
		"image above the base":       func(p *store.PageEntry) { p.Payload.Attachments[0].Position = 600; p.Images[0].Position = 600 },
	} {
		_, err := e.tryCommit(b, t0, func() store.PageEntry { p := mediaEntry(b); edit(&p); return p }())
		if store.CodeOf(err) != vocab.CodeInvalidInput {
			t.Fatalf("%s: %v", name, err)
		}
	}
	e.unchanged(before)
}

func TestStagedMediaIsSealedNeedsQuotaKeepsTheFirstUploadAndIsSweptAfterItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "send me a picture")
	data := bytes.Repeat([]byte("png-bytes-"), 100)

	before := e.digest()
	for name, in := range map[string]store.StageMediaInput{
		"unknown token": {Session: store.ByToken(sealing.NewSecret("no-such-token-000000")), Kind: "image", Data: data},
		"empty":         {Session: store.ByToken(tok), Kind: "image"},
		"bad kind":      {Session: store.ByToken(tok), Kind: "voice", Data: data},
		"nameless file": {Session: store.ByToken(tok), Kind: "file", Data: data},
		"over the cap":  {Session: store.ByToken(tok), Kind: "file", FileName: "a", Data: make([]byte, store.DefaultMaxMediaBytes+1)},
	} {
		if _, err := e.store.StageMedia(e.ctx, t0, in); !store.IsRuleViolation(err) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	e.unchanged(before)

	staged, err := e.store.StageMedia(e.ctx, t0, store.StageMediaInput{Session: store.ByToken(tok), Kind: "image", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if staged.ReplyWindowID != res.Deliverable.ReplyWindowID || staged.Size != int64(len(data)) || len(staged.SHA256) != 64 {
		t.Fatalf("staged %+v", staged)
	}
	if n := e.count(`SELECT count(*) FROM outbound_media WHERE position($1::bytea in ciphertext) > 0`, data[:20]); n != 0 {
		t.Fatal("media bytes are stored in the clear")
	}
	got, err := e.store.GetStagedMedia(e.ctx, staged.MediaID)
	if err != nil || got.Data.Reveal() != string(data) || !got.Upload.IsZero() {
		t.Fatalf("staged media reads back wrong: %v", err)
	}
	first, err := e.store.RecordMediaUpload(e.ctx, t0, staged.MediaID, sealing.NewSecret("upload-1"))
	if err != nil || first.Reveal() != "upload-1" {
		t.Fatalf("record: %v", err)
	}
	second, err := e.store.RecordMediaUpload(e.ctx, t0, staged.MediaID, sealing.NewSecret("upload-2"))
	if err != nil || second.Reveal() != "upload-1" {
		t.Fatalf("a second upload record replaced the first: %v", err)
	}
	if got, err := e.store.GetStagedMedia(e.ctx, staged.MediaID); err != nil || got.Upload.Reveal() != "upload-1" {
		t.Fatalf("upload reads back wrong: %v", err)
	}

	// A window without quota left stages nothing.
	if _, err := e.pool.Exec(e.ctx, `UPDATE reply_windows SET transmitted = max_sends, next_send_index = max_sends WHERE reply_window_id = $1`,
		res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	before = e.digest()
	_, err = e.store.StageMedia(e.ctx, t0, store.StageMediaInput{Session: store.ByToken(tok), Kind: "image", Data: data})
	wantCode(t, err, vocab.CodeReplyQuotaExhausted)
	e.unchanged(before)

	if n, err := e.store.SweepMedia(e.ctx, staged.ExpiresAt.Add(-time.Second)); err != nil || n != 0 {
		t.Fatalf("swept %d before the retention ended: %v", n, err)
	}
	if n, err := e.store.SweepMedia(e.ctx, staged.ExpiresAt); err != nil || n != 1 {
		t.Fatalf("swept %d at the end of the retention: %v", n, err)
	}
	_, err = e.store.GetStagedMedia(e.ctx, staged.MediaID)
	wantCode(t, err, vocab.CodeMediaNotFound)
}
