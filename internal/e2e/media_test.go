package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// pngBytes is a small PNG image whose pixels depend on seed.
func pngBytes(t *testing.T, seed byte) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = seed + byte(i)
	}
	img.Set(0, 0, color.RGBA{R: seed, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mp4Bytes is the start of an MP4 file (an ftyp box) followed by filler.
func mp4Bytes(n int) []byte {
	b := []byte("\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00isommp42")
	for len(b) < n {
		b = append(b, byte(len(b)*7))
	}
	return b
}

// multipartReply builds a multipart/form-data media reply body.
func multipartReply(t *testing.T, kind, fileName string, data []byte) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if kind != "" {
		if err := w.WriteField("type", kind); err != nil {
			t.Fatal(err)
		}
	}
	if data != nil {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
		h.Set("Content-Type", "application/octet-stream")
		part, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = part.Write(data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), b.Bytes()
}

// sentItem is the one item of a message the simulator recorded.
type sentItem struct {
	Type      int `json:"type"`
	ImageItem *struct {
		Media struct {
			EncryptQueryParam string `json:"encrypt_query_param"`
			AESKey            string `json:"aes_key"`
		} `json:"media"`
	} `json:"image_item"`
	FileItem *struct {
		Media struct {
			EncryptQueryParam string `json:"encrypt_query_param"`
			AESKey            string `json:"aes_key"`
		} `json:"media"`
		FileName string `json:"file_name"`
	} `json:"file_item"`
}

func TestMediaWebhookAgentFetchesEveryAttachmentAndRepliesWithImageAndFile(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxSends = 5
	limits.MaxMediaBytes = 256 << 10
	rcv, url := newReceiver(t, func(int, webhook.Delivery) (int, string) { return http.StatusOK, `{}` })
	a := startAPI(t, limits, func(_ *ilinksim.Config, cfg *gateway.Config) { useWebhook(cfg, url, 0) })
	const owner = "o9cq8mediaowner00000000001@im.wechat"
	a.enroll("qo_e2e_media", owner)
	bot := a.botOf(owner)
	var secrets []string // media bytes, AES keys and CDN parameters: never in history

	inbound := []struct {
		kind, name, wantType string
		data                 []byte
	}{
		{"image", "", "image/png", pngBytes(t, 1)},
		{"file", "report.pdf", "application/pdf", []byte("%PDF-1.4 the report of the e2e media test")},
		{"voice", "", "audio/silk", append([]byte("#!SILK_V3"), bytes.Repeat([]byte{0x5a, 0x11}, 300)...)},
		{"video", "", "video/mp4", mp4Bytes(3000)},
	}
	var deliveries []webhook.Delivery
	for i, in := range inbound {
		req := ilinksim.InjectRequest{Kind: in.kind, Data: in.data, FileName: in.name}
		if in.kind == "voice" {
			req.Text = "voice transcript"
		}
		inj, err := a.ctl.Inject(a.ctx, bot.BotID, req)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, string(in.data), inj.Media.EncryptQueryParam, inj.Media.AESKeyHex, inj.Media.AESKey)
		d := rcv.next(i+1, time.Minute)
		deliveries = append(deliveries, d)
		if len(d.Message.Attachments) != 1 || d.Message.Attachments[0].Kind != in.kind || d.Message.Attachments[0].FetchPath == "" {
			t.Fatalf("%s: delivery attachments %+v", in.kind, d.Message.Attachments)
		}
		path := d.Message.Attachments[0].FetchPath
		if want := "/v1/messages/" + d.Message.MessageKey + "/attachments/0"; path != want {
			t.Fatalf("%s: fetch path %q, want %q", in.kind, path, want)
		}
		got, err := agent.FetchAttachment(a.ctx, a.http, a.base, d.SessionToken, path)
		if err != nil {
			t.Fatalf("%s: fetch: %v", in.kind, err)
		}
		if !bytes.Equal(got.Data, in.data) {
			t.Fatalf("%s: fetched %d bytes that differ from the %d the simulator encrypted", in.kind, len(got.Data), len(in.data))
		}
		if got.ContentType != in.wantType {
			t.Fatalf("%s: content type %q, want %q", in.kind, got.ContentType, in.wantType)
		}
		if in.kind == "voice" && d.Message.Attachments[0].Text != "voice transcript" {
			t.Fatalf("voice transcript %q", d.Message.Attachments[0].Text)
		}
		if i < len(inbound)-1 {
			a.done(d.SessionToken) // handled: the next message is not merged with it
		}
	}

	// Fetch refusals: documented 4xx, nothing written, nothing sent.
	last := deliveries[len(deliveries)-1]
	auth := []string{"Authorization", "Bearer " + last.SessionToken}
	get := func(path string, h ...string) func() answer {
		return func() answer { return a.do(http.MethodGet, path, nil, h...) }
	}
	a.refused("another message's attachment", http.StatusForbidden, replyapi.CodeWrongMessage, bot.BotID,
		get(deliveries[0].Message.Attachments[0].FetchPath, auth...))
	a.refused("a position that does not exist", http.StatusNotFound, replyapi.CodeAttachmentNotFound, bot.BotID,
		get("/v1/messages/"+last.Message.MessageKey+"/attachments/1", auth...))
	a.refused("a position that is not a number", http.StatusNotFound, replyapi.CodeAttachmentNotFound, bot.BotID,
		get("/v1/messages/"+last.Message.MessageKey+"/attachments/x", auth...))
	a.refused("a superseded message's token", http.StatusConflict, replyapi.CodeWindowInactive, bot.BotID,
		get(deliveries[0].Message.Attachments[0].FetchPath, "Authorization", "Bearer "+deliveries[0].SessionToken))
	a.refused("no token", http.StatusUnauthorized, replyapi.CodeInvalidSession, bot.BotID, get(last.Message.Attachments[0].FetchPath))

	a.done(last.SessionToken)

	// An attachment the CDN no longer serves: 410.
	img := pngBytes(t, 9)
	inj, err := a.ctl.Inject(a.ctx, bot.BotID, ilinksim.InjectRequest{Kind: "image", Data: img})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, string(img), inj.Media.EncryptQueryParam, inj.Media.AESKeyHex, inj.Media.AESKey)
	d := rcv.next(len(inbound)+1, time.Minute)
	if err := a.ctl.ExpireCDNObject(a.ctx, inj.Media.EncryptQueryParam); err != nil {
		t.Fatalf("expire the injected image on the simulator's CDN: %v", err)
	}
	auth = []string{"Authorization", "Bearer " + d.SessionToken}
	a.refused("an attachment expired on the CDN", http.StatusGone, replyapi.CodeMediaExpired, bot.BotID,
		get(d.Message.Attachments[0].FetchPath, auth...))

	// Media reply refusals: documented 4xx, nothing written (no staged media), nothing sent.
	post := func(ctype string, body []byte) func() answer {
		return func() answer {
			return a.do(http.MethodPost, "/v1/reply", body, append([]string{"Content-Type", ctype}, auth...)...)
		}
	}
	ct, body := multipartReply(t, "file", "big.bin", bytes.Repeat([]byte{1}, int(limits.MaxMediaBytes)+1))
	a.refused("a file over the media cap", http.StatusRequestEntityTooLarge, replyapi.CodeMediaTooLarge, bot.BotID, post(ct, body))
	ct, body = multipartReply(t, "image", "cat.png", []byte("this is not an image at all"))
	a.refused("an image that is not an image", http.StatusUnsupportedMediaType, replyapi.CodeUnsupportedContentType, bot.BotID, post(ct, body))
	ct, body = multipartReply(t, "video", "clip.mp4", pngBytes(t, 3))
	a.refused("a video that is not a video", http.StatusUnsupportedMediaType, replyapi.CodeUnsupportedContentType, bot.BotID, post(ct, body))
	a.refused("a body that is neither JSON nor multipart", http.StatusUnsupportedMediaType, replyapi.CodeUnsupportedContentType, bot.BotID,
		post("text/plain", []byte("hello")))
	ct, body = multipartReply(t, "image", "cat.png", pngBytes(t, 4))
	a.refused("a truncated multipart body", http.StatusBadRequest, replyapi.CodeInvalidMultipart, bot.BotID, post(ct, body[:len(body)-20]))
	ct, body = multipartReply(t, "sticker", "cat.png", pngBytes(t, 4))
	a.refused("an unknown media type", http.StatusBadRequest, replyapi.CodeUnsupportedType, bot.BotID, post(ct, body))
	ct, body = multipartReply(t, "image", "", nil)
	a.refused("no file part", http.StatusBadRequest, replyapi.CodeInvalidMedia, bot.BotID, post(ct, body))
	ct, body = multipartReply(t, "file", "", []byte("nameless"))
	a.refused("a file without a name", http.StatusBadRequest, replyapi.CodeInvalidMedia, bot.BotID, post(ct, body))
	ct, body = multipartReply(t, "image", "cat.png", pngBytes(t, 4))
	a.refused("a media reply with an unknown token", http.StatusUnauthorized, replyapi.CodeInvalidSession, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/reply", body, "Content-Type", ct, "Authorization", "Bearer "+strings.Repeat("z", 43))
	})

	// Replies with an image and a file: the simulator's record decrypts to the bytes sent.
	replyImage, replyFile := pngBytes(t, 77), []byte("a file the agent wrote\n"+strings.Repeat("line\n", 500))
	secrets = append(secrets, string(replyImage), string(replyFile))
	sentBefore, err := a.ctl.Sent(a.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		kind, name string
		data       []byte
	}{{"image", "reply.png", replyImage}, {"file", "notes.txt", replyFile}} {
		name := r.name
		if r.kind != "file" {
			name = ""
		}
		rr, err := agent.ReplyMedia(a.ctx, a.http, a.base, d.SessionToken, r.kind, name, r.data, "media-"+r.kind)
		if err != nil || rr.Status != vocab.AttemptSent {
			t.Fatalf("%s reply: %+v %v", r.kind, rr, err)
		}
		// The same request again (as curl -F would make it) answers the first outcome and
		// sends nothing more.
		ct, body := multipartReply(t, r.kind, r.name, r.data)
		again := a.do(http.MethodPost, "/v1/reply", body, "Content-Type", ct, "Authorization", "Bearer "+d.SessionToken,
			"Idempotency-Key", "media-"+r.kind)
		var rr2 replyapi.ReplyResponse
		again.json(t, &rr2)
		if again.status != http.StatusOK || rr2.AttemptID != rr.AttemptID {
			t.Fatalf("%s reply repeated: %d %s", r.kind, again.status, again.body)
		}
	}
	sent, err := a.ctl.Sent(a.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	sent = sent[len(sentBefore):]
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want 2 (one per reply, none repeated)", len(sent))
	}
	for i, want := range [][]byte{replyImage, replyFile} {
		m := sent[i]
		if m.Outcome != ilinksim.OutcomeAccepted || !m.Rendered {
			t.Fatalf("reply %d: outcome %s rendered %v (%s)", i, m.Outcome, m.Rendered, m.RenderNote)
		}
		var msg struct {
			ItemList []sentItem `json:"item_list"`
		}
		if err := json.Unmarshal(m.Msg, &msg); err != nil || len(msg.ItemList) != 1 {
			t.Fatalf("reply %d: msg %s", i, m.Msg)
		}
		it := msg.ItemList[0]
		var param, key string
		switch {
		case i == 0 && it.ImageItem != nil:
			param, key = it.ImageItem.Media.EncryptQueryParam, it.ImageItem.Media.AESKey
		case i == 1 && it.FileItem != nil && it.FileItem.FileName == "notes.txt":
			param, key = it.FileItem.Media.EncryptQueryParam, it.FileItem.Media.AESKey
		default:
			t.Fatalf("reply %d: item %s", i, m.Msg)
		}
		obj, err := a.ctl.CDNObject(a.ctx, param)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(obj.Plaintext, want) {
			t.Fatalf("reply %d: the CDN object decrypts to %d bytes that differ from the %d sent", i, len(obj.Plaintext), len(want))
		}
		raw, _ := base64.StdEncoding.DecodeString(key)
		secrets = append(secrets, param, key, string(raw), obj.AESKeyHex, string(obj.Ciphertext))
		if k, err := hex.DecodeString(obj.AESKeyHex); err == nil {
			secrets = append(secrets, string(k))
		}
	}
	a.assertNoSecretInHistory(secrets)
	a.assertNotInDecodedPayloads(secrets)
	a.logs.assertNotLogged(t, secrets...)
}

// assertNotInDecodedPayloads decodes every payload of every history with the payload codec
// and fails if any of the values appears in the plaintext: they never passed through
// Temporal, not even encrypted.
func (a *apiSystem) assertNotInDecodedPayloads(values []string) {
	a.t.Helper()
	codec, err := payloadcodec.New(keyring)
	if err != nil {
		a.t.Fatal(err)
	}
	n := 0
	for _, e := range a.executions() {
		var ps []*commonpb.Payload
		collectPayloads(e.history.ProtoReflect(), &ps)
		decoded, err := codec.Decode(ps)
		if err != nil {
			a.t.Fatalf("decode the payloads of %s: %v", e.workflowID, err)
		}
		for _, p := range decoded {
			n++
			for _, v := range nonEmpty(values) {
				if bytes.Contains(p.GetData(), []byte(v)) {
					a.t.Errorf("a media secret (%d bytes) is in a decoded payload of %s (%s)", len(v), e.workflowID, e.workflowType)
				}
			}
		}
	}
	a.t.Logf("no media byte, key or CDN parameter in %d decoded payloads", n)
}

// done marks a session's message handled through the reply API (untilWindowReady).
func (a *apiSystem) done(token string) {
	a.t.Helper()
	got := a.untilWindowReady(func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"handled"}`), "Authorization", "Bearer "+token)
	})
	if got.status != http.StatusOK {
		a.t.Fatalf("done: %d %s", got.status, got.body)
	}
}

// untilWindowReady makes call again while the reply API answers that the window's
// workflow is not ready (503 window_unavailable, "retry": nothing was sent), for up to 30
// s, as an agent that answers at once after its delivery does, and returns the last answer.
func (a *apiSystem) untilWindowReady(call func() answer) answer {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := call()
		if got.status != http.StatusServiceUnavailable || !strings.Contains(string(got.body), replyapi.CodeWindowUnavailable) ||
			time.Now().After(deadline) {
			return got
		}
		<-time.After(100 * time.Millisecond)
	}
}
