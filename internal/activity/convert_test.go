package activity

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func textMessage(from, text string, createMs int64) ilink.Message {
	return ilink.Message{
		FromUserID: from, ToUserID: "bot@im.bot", CreateTimeMs: createMs,
		MessageType: ilink.MessageTypeUser, MessageState: ilink.MessageStateFinish,
		ItemList:     []ilink.Item{ilink.NewTextItem(text)},
		ContextToken: "CKtoken",
	}
}

func TestConversionSkipsBotMessagesAndDropsMessagesWithoutContextToken(t *testing.T) {
	t.Parallel()
	m := textMessage("u@im.wechat", "hi", 1764489600000)
	m.MessageType = ilink.MessageTypeBot
	if _, err := convertMessage(&m, "c", time.Now()); !errors.Is(err, errBotMessage) {
		t.Fatalf("bot message: %v", err)
	}
	m = textMessage("u@im.wechat", "hi", 1764489600000)
	m.ContextToken = ""
	if _, err := convertMessage(&m, "c", time.Now()); !errors.Is(err, errNoContextToken) {
		t.Fatalf("message without token: %v", err)
	}
}

func TestConversionMapsIdentitySequenceTimeAndCursor(t *testing.T) {
	t.Parallel()
	m := textMessage("u@im.wechat", "hi", 1764489600123)
	m.MessageID = 18446744073709551615
	m.Seq = 42
	e, err := convertMessage(&m, "cursor-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e.ProviderMessageID != "18446744073709551615" || e.PeerID != "u@im.wechat" || e.Cursor != "cursor-1" ||
		!e.SentAt.Equal(time.UnixMilli(1764489600123)) || e.ProviderSeq == nil || *e.ProviderSeq != 42 ||
		e.ContextToken.Reveal() != "CKtoken" || e.Payload.Summary != "hi" {
		t.Fatalf("entry %+v", e)
	}
	// Without create_time_ms the message is dated when its page arrived; without seq it
	// has none.
	m.CreateTimeMs, m.Seq = 0, 0
	received := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	e, _ = convertMessage(&m, "c", received)
	if !e.SentAt.Equal(received) || e.ProviderSeq != nil {
		t.Fatalf("entry %+v", e)
	}
	// The first item's msg_id stands in for a missing message_id (the plugin's rule).
	m.MessageID = 0
	m.ItemList[0].MsgID = 7000000000000000001
	e, _ = convertMessage(&m, "c", received)
	if e.ProviderMessageID != "7000000000000000001" {
		t.Fatalf("id %q", e.ProviderMessageID)
	}
}

func TestDerivedMessageIDIsStableAndDependsOnSenderTimeAndContent(t *testing.T) {
	t.Parallel()
	id := func(m ilink.Message) string {
		e, err := convertMessage(&m, "c", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return e.ProviderMessageID
	}
	base := textMessage("u@im.wechat", "same", 1764489600000)
	a, b := id(base), id(base)
	if a != b || !strings.HasPrefix(a, "nomsg:") || len(a) != len("nomsg:")+32 {
		t.Fatalf("ids %q %q", a, b)
	}
	other := []ilink.Message{
		textMessage("v@im.wechat", "same", 1764489600000),
		textMessage("u@im.wechat", "same", 1764489600001),
		textMessage("u@im.wechat", "different", 1764489600000),
	}
	for _, m := range other {
		if id(m) == a {
			t.Fatalf("message %+v got the same derived id", m)
		}
	}
	// A new context token (a redelivery) does not change the identity.
	again := base
	again.ContextToken = "CKother"
	if id(again) != a {
		t.Fatal("the context token changed the derived id")
	}
}

func TestConversionSummarizesEveryItemKindAndQuotes(t *testing.T) {
	t.Parallel()
	m := ilink.Message{FromUserID: "u@im.wechat", CreateTimeMs: 1764489600000, ContextToken: "CK", ItemList: []ilink.Item{
		{Type: ilink.ItemText, TextItem: &ilink.TextItem{Text: "look"},
			RefMsg: &ilink.RefMessage{MessageItem: &ilink.Item{Type: ilink.ItemText, TextItem: &ilink.TextItem{Text: "earlier\nline"}}}},
		{Type: ilink.ItemImage, ImageItem: &ilink.ImageItem{Media: &ilink.CDNMedia{EncryptQueryParam: "eqp", AESKey: "a2V5"}, AESKey: "00112233445566778899aabbccddeeff", MidSize: 99}},
		{Type: ilink.ItemFile, FileItem: &ilink.FileItem{Media: &ilink.CDNMedia{EncryptQueryParam: "f"}, FileName: "name.pdf", Len: "1234"}},
		{Type: ilink.ItemVoice, VoiceItem: &ilink.VoiceItem{Text: "spoken words"}},
		{Type: ilink.ItemVoice, VoiceItem: &ilink.VoiceItem{}},
		{Type: ilink.ItemVideo, VideoItem: &ilink.VideoItem{VideoSize: 5}},
		{Type: ilink.ItemImage, ImageItem: &ilink.ImageItem{}}, // no CDN reference: nothing to download
		{Type: ilink.ItemText, TextItem: &ilink.TextItem{Text: "x"}, RefMsg: &ilink.RefMessage{Title: "a title"}},
	}}
	e, err := convertMessage(&m, "c", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := "> earlier\n> line\nlook\n[image]\n[file name.pdf]\nspoken words\n[voice]\n[video]\n[image]\n> a title\nx"
	if e.Payload.Summary != want {
		t.Fatalf("summary %q\nwant    %q", e.Payload.Summary, want)
	}
	wantAtt := []store.Attachment{
		{Kind: "image", Position: 0, Size: 99},
		{Kind: "file", Name: "name.pdf", Size: 1234, Position: vocab.MediaPositionBase}, // has a CDN locator
		{Kind: "voice", Text: "spoken words"},
		{Kind: "voice"},
		{Kind: "video", Size: 5},
	}
	if len(e.Payload.Attachments) != len(wantAtt) {
		t.Fatalf("attachments %+v", e.Payload.Attachments)
	}
	for i, a := range wantAtt {
		if e.Payload.Attachments[i] != a {
			t.Fatalf("attachment %d: %+v, want %+v", i, e.Payload.Attachments[i], a)
		}
	}
	if len(e.Images) != 1 || e.Images[0].Position != 0 {
		t.Fatalf("images %+v", e.Images)
	}
	item, err := OpenImageLocator(e.Images[0].Locator)
	if err != nil || item.ImageItem.Media.EncryptQueryParam != "eqp" || item.ImageItem.Media.AESKey != "a2V5" ||
		item.ImageItem.AESKey != "00112233445566778899aabbccddeeff" {
		t.Fatalf("locator %+v %v", item, err)
	}
	if len(e.Media) != 1 || e.Media[0].Position != vocab.MediaPositionBase {
		t.Fatalf("media locators %+v", e.Media)
	}
	if item, err := OpenImageLocator(e.Media[0].Locator); err != nil || item.Type != ilink.ItemFile || item.FileItem.Media.EncryptQueryParam != "f" {
		t.Fatalf("file locator %+v %v", item, err)
	}
}

func TestConversionBoundsOversizedContent(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 40*1024) // 80 KiB
	m := textMessage("u@im.wechat", long+"\xff", 1764489600000)
	e, err := convertMessage(&m, "c", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Payload.Summary) > maxSummaryBytes || !strings.HasPrefix(long, e.Payload.Summary) {
		t.Fatalf("summary of %d bytes is not a clean prefix", len(e.Payload.Summary))
	}
}

func TestAMessageWithoutContextTokenIsQuarantinedAndTheCursorStillMoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var logs bytes.Buffer
	p := poller{a: h.acts, in: activities.PollInput{AccountKey: h.key, Generation: 1}, owner: h.bot.Owner,
		log: slog.New(slog.NewTextHandler(&logs, nil)), maxSkew: 5 * time.Minute}
	m := textMessage(h.bot.Owner, "no token", time.Now().UnixMilli())
	m.MessageID = 7000000000000000009
	m.ContextToken = ""
	done, err := p.commit(h.ctx, &ilink.UpdatesPage{Messages: []ilink.Message{m}, Cursor: "Ck-next"})
	if err != nil || done {
		t.Fatalf("commit: %v %v", done, err)
	}
	if c := h.account().Cursor; c != "Ck-next" {
		t.Fatalf("cursor %q, want it moved past the left-out message", c)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages"); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	h.wantQuarantined(store.QuarantineMessages, 1, "no usable context token")
	if !strings.Contains(logs.String(), "quarantined") {
		t.Fatalf("the quarantine was not logged: %s", logs.String())
	}
}

func TestMessagesFromAnotherSenderAreQuarantinedAndTheCursorMoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.inject(ilinksim.InjectRequest{From: "stranger@im.wechat", Text: "hi"})
	res, err := h.poll(true)
	if err != nil || len(res.Opened) != 0 || res.Pages != 1 {
		t.Fatalf("poll %+v %v", res, err)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages"); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	if h.account().Cursor == "" {
		t.Fatal("cursor did not move")
	}
	h.wantQuarantined(store.QuarantineMessages, 1, "not the bot's owner")
}

func TestInboundMediaIsSummarizedAndImagesCanBeDownloadedLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	data := []byte("image bytes: a small png stand-in")
	h.inject(ilinksim.InjectRequest{Kind: ilinksim.KindImage, Data: data})
	res, err := h.poll(false)
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("poll %+v %v", res, err)
	}
	key := res.Opened[0].MessageKey
	msg, err := h.store.GetMessage(h.ctx, key)
	if err != nil || msg.Payload.Summary != "[image]" || len(msg.Payload.Attachments) != 1 || msg.Payload.Attachments[0].Kind != "image" {
		t.Fatalf("message %+v %v", msg.Payload, err)
	}
	// An agent downloads it through its session (the reply API's GetAttachment).
	tok := sealing.NewSecret("image-session-token")
	if _, err := h.store.OpenAgentSession(h.ctx, time.Now(), store.OpenSessionInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	loc, err := h.store.GetAttachment(h.ctx, time.Now(), store.ByToken(tok), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	item, err := OpenImageLocator(loc.Locator)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ilink.New(h.acts.Config.Client, ilink.Secret(h.bot.Token))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.DownloadItem(h.ctx, item)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("download: %q %v", got, err)
	}
	// Each message is handled before the next arrives, so that none is merged.
	handled := func(key string) {
		t.Helper()
		if _, err := h.store.FinishMessage(h.ctx, time.Now(), key, vocab.MessageHandled, ""); err != nil {
			t.Fatal(err)
		}
	}
	handled(key)

	h.inject(ilinksim.InjectRequest{Kind: ilinksim.KindFile, FileName: "report.pdf", Data: []byte("pdf")})
	res, err = h.poll(false)
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("poll %+v %v", res, err)
	}
	msg, _ = h.store.GetMessage(h.ctx, res.Opened[0].MessageKey)
	if msg.Payload.Summary != "[file report.pdf]" || msg.Payload.Attachments[0].Size != 3 {
		t.Fatalf("file message %+v", msg.Payload)
	}
	handled(msg.MessageKey)

	h.inject(ilinksim.InjectRequest{Kind: ilinksim.KindVoice, Text: "call me"})
	res, _ = h.poll(false)
	msg, _ = h.store.GetMessage(h.ctx, res.Opened[0].MessageKey)
	if msg.Payload.Summary != "call me" || msg.Payload.Attachments[0].Text != "call me" {
		t.Fatalf("voice message %+v", msg.Payload)
	}
	handled(msg.MessageKey)

	h.inject(ilinksim.InjectRequest{Text: "about that", Ref: &ilinksim.RefSpec{Text: "the quoted one"}})
	res, _ = h.poll(false)
	msg, _ = h.store.GetMessage(h.ctx, res.Opened[0].MessageKey)
	if msg.Payload.Summary != "> the quoted one\nabout that" {
		t.Fatalf("quote %q", msg.Payload.Summary)
	}
}
