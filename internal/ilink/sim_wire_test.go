package ilink_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// TestSimAuthenticatedEndpointsCarryPluginHeadersAndBaseInfo calls every
// authenticated endpoint and checks each recorded request field by field.
func TestSimAuthenticatedEndpointsCarryPluginHeadersAndBaseInfo(t *testing.T) {
	e := newSim(t, nil, func(c *ilink.Config) { c.RouteTag = "rt-7" })
	c := e.client
	if err := c.NotifyStart(e.ctx); err != nil {
		t.Fatal(err)
	}
	m := e.converse("hello")
	cfg, err := c.GetConfig(e.ctx, m.FromUserID, m.ContextToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendTyping(e.ctx, m.FromUserID, cfg.TypingTicket, ilink.TypingStart); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendText(e.ctx, replyOpts(m), "reply"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: []byte("png")}); err != nil {
		t.Fatal(err)
	}
	if err := c.NotifyStop(e.ctx); err != nil {
		t.Fatal(err)
	}

	for _, ep := range []string{"msg/notifystart", "getupdates", "getconfig", "sendtyping", "sendmessage", "getuploadurl", "msg/notifystop"} {
		reqs := e.requests(ep)
		if len(reqs) == 0 {
			t.Fatalf("%s: no request recorded", ep)
		}
		for _, r := range reqs {
			if len(r.Problems) != 0 {
				t.Errorf("%s: simulator found problems %v", ep, r.Problems)
			}
			if r.Method != http.MethodPost {
				t.Errorf("%s: method %s", ep, r.Method)
			}
			want := map[string]string{
				"Content-Type":            "application/json",
				"AuthorizationType":       "ilink_bot_token",
				"Authorization":           "Bearer " + e.bot.Token,
				"iLink-App-Id":            "bot",
				"iLink-App-ClientVersion": "132105",
				"SKRouteTag":              "rt-7",
			}
			for k, v := range want {
				if got := header(t, r, k); got != v {
					t.Errorf("%s: %s = %q, want %q", ep, k, got, v)
				}
			}
			checkUIN(t, r)
			body := jsonBody(t, r)
			bi, ok := body["base_info"].(map[string]any)
			if !ok || bi["channel_version"] != "2.4.9" || bi["bot_agent"] != ilink.DefaultBotAgent || len(bi) != 2 {
				t.Errorf("%s: base_info = %v", ep, body["base_info"])
			}
		}
	}
	gc := jsonBody(t, e.requests("getconfig")[0])
	if gc["ilink_user_id"] != m.FromUserID || gc["context_token"] != m.ContextToken.Reveal() {
		t.Errorf("getconfig body %v", gc)
	}
	st := jsonBody(t, e.requests("sendtyping")[0])
	if st["ilink_user_id"] != m.FromUserID || st["typing_ticket"] != cfg.TypingTicket.Reveal() || st["status"] != json.Number("1") {
		t.Errorf("sendtyping body %v", st)
	}
	gu := jsonBody(t, e.requests("getupdates")[0])
	if v, ok := gu["get_updates_buf"]; !ok || v != "" {
		t.Errorf("getupdates must always send get_updates_buf: %v", gu)
	}
	up := e.requests("c2c/upload")
	if len(up) != 1 || up[0].Method != http.MethodPost || header(t, up[0], "Content-Type") != "application/octet-stream" ||
		header(t, up[0], "Authorization") != "" {
		t.Errorf("CDN upload request %+v", up)
	}
}

// TestSimSendMessageCarriesExactlyOneItemPerRequest sends a captioned image
// and a text and checks every recorded sendmessage body.
func TestSimSendMessageCarriesExactlyOneItemPerRequest(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("hi")
	up, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: []byte("image bytes")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.client.SendWithCaption(e.ctx, replyOpts(m), "the caption", up.ImageItem())
	if err != nil || len(res) != 2 {
		t.Fatalf("%v %v", res, err)
	}
	sent := e.sent()
	if len(sent) != 2 {
		t.Fatalf("%d sends", len(sent))
	}
	if sent[0].Outcome != ilinksim.OutcomeAccepted || sent[1].Outcome != ilinksim.OutcomeAccepted {
		t.Fatalf("outcomes %s/%s (%s %s)", sent[0].Outcome, sent[1].Outcome, sent[0].Reason, sent[1].Reason)
	}
	if len(sent[0].ItemTypes) != 1 || sent[0].ItemTypes[0] != 1 || sent[0].Text != "the caption" {
		t.Errorf("caption send %+v", sent[0])
	}
	if len(sent[1].ItemTypes) != 1 || sent[1].ItemTypes[0] != 2 {
		t.Errorf("image send %+v", sent[1])
	}
	for i, r := range e.requests("sendmessage") {
		body := jsonBody(t, r)
		msg := body["msg"].(map[string]any)
		items := msg["item_list"].([]any)
		if len(items) != 1 {
			t.Errorf("request %d: %d items", i, len(items))
		}
		if msg["from_user_id"] != "" || msg["to_user_id"] != m.FromUserID || msg["message_type"] != json.Number("2") ||
			msg["message_state"] != json.Number("2") || msg["context_token"] != m.ContextToken.Reveal() || msg["client_id"] == "" {
			t.Errorf("request %d: msg %v", i, msg)
		}
	}
	if res[0].MessageID == 0 || uint64(res[1].MessageID) != sent[1].MessageID {
		t.Errorf("message ids %d/%d vs %d", res[0].MessageID, res[1].MessageID, sent[1].MessageID)
	}
}

// TestSimOutboundMediaUsesBase64OfHexKeyAndDecimalStringLen checks the
// outbound media shapes the simulator recorded.
func TestSimOutboundMediaUsesBase64OfHexKeyAndDecimalStringLen(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("send me files")
	data := []byte("0123456789abcdef") // 16 bytes: a full padding block is added
	img, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SendImage(e.ctx, replyOpts(m), img); err != nil {
		t.Fatal(err)
	}
	e.advance(5 * time.Second)
	file, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaFile, Data: []byte("report body, 25 bytes....")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SendFile(e.ctx, replyOpts(m), file, "report.txt"); err != nil {
		t.Fatal(err)
	}
	e.advance(5 * time.Second)
	vid, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaVideo, Data: []byte("mp4")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SendVideo(e.ctx, replyOpts(m), vid); err != nil {
		t.Fatal(err)
	}

	// getuploadurl bodies.
	for i, r := range e.requests("getuploadurl") {
		b := jsonBody(t, r)
		up := []*ilink.UploadedMedia{img, file, vid}[i]
		wantType := []string{"1", "3", "2"}[i]
		if b["filekey"] != up.FileKey || len(up.FileKey) != 32 || b["media_type"] != json.Number(wantType) ||
			b["to_user_id"] != m.FromUserID || b["rawfilemd5"] != up.RawMD5 || b["aeskey"] != up.AESKey.Reveal() ||
			b["no_need_thumb"] != true {
			t.Errorf("getuploadurl %d body %v", i, b)
		}
		raw, _ := b["rawsize"].(json.Number).Int64()
		size, _ := b["filesize"].(json.Number).Int64()
		if raw != up.RawSize || size != (raw/16+1)*16 {
			t.Errorf("getuploadurl %d sizes raw=%d filesize=%d", i, raw, size)
		}
	}

	sent := e.sent()
	if len(sent) != 3 {
		t.Fatalf("%d sends", len(sent))
	}
	for i, s := range sent {
		if s.Outcome != ilinksim.OutcomeAccepted {
			t.Fatalf("send %d: %s %s", i, s.Outcome, s.Reason)
		}
		up := []*ilink.UploadedMedia{img, file, vid}[i]
		it := sentItem(t, s)
		payload := it[[]string{"image_item", "file_item", "video_item"}[i]].(map[string]any)
		media := payload["media"].(map[string]any)
		key, _ := media["aes_key"].(string)
		obj, err := e.ctl.CDNObject(e.ctx, up.EncryptQueryParam)
		if err != nil {
			t.Fatal(err)
		}
		if len(key) != 44 || key != b64(obj.AESKeyHex) {
			t.Errorf("send %d: aes_key %q is not base64 of the hex key %q", i, key, obj.AESKeyHex)
		}
		if media["encrypt_query_param"] != up.EncryptQueryParam || media["encrypt_type"] != json.Number("1") || len(media) != 3 {
			t.Errorf("send %d: media %v", i, media)
		}
	}
	img0 := sentItem(t, sent[0])["image_item"].(map[string]any)
	if img0["mid_size"] != json.Number("32") {
		t.Errorf("image mid_size %v, want ciphertext size 32", img0["mid_size"])
	}
	f := sentItem(t, sent[1])["file_item"].(map[string]any)
	if f["len"] != "25" || f["file_name"] != "report.txt" {
		t.Errorf("file item %v (len must be the decimal string \"25\")", f)
	}
	v := sentItem(t, sent[2])["video_item"].(map[string]any)
	if v["video_size"] != json.Number("16") {
		t.Errorf("video item %v", v)
	}
}
