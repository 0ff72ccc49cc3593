package ilink

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestAuthenticatedPostCarriesPluginHeadersVerbatim(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "bot:token")
	if err := c.NotifyStart(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := ct.last(t)
	want := map[string]string{
		"Content-Type":            "application/json",
		"AuthorizationType":       "ilink_bot_token",
		"Authorization":           "Bearer bot:token",
		"iLink-App-Id":            "bot",
		"iLink-App-ClientVersion": "132105",
	}
	for k, v := range want {
		if got := r.header[k]; len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if _, ok := r.header["X-WECHAT-UIN"]; !ok {
		t.Error("X-WECHAT-UIN missing (or not spelled verbatim)")
	}
	if _, ok := r.header["SKRouteTag"]; ok {
		t.Error("SKRouteTag sent although not configured")
	}
	if r.method != http.MethodPost || r.url != "https://api.test/ilink/bot/msg/notifystart" {
		t.Errorf("%s %s", r.method, r.url)
	}
}

func TestRouteTagSentOnlyWhenConfigured(t *testing.T) {
	c, ct := newCaptureClient(t, Config{RouteTag: "rt-1"}, "tok")
	_ = c.NotifyStop(context.Background())
	if got := ct.last(t).header["SKRouteTag"]; len(got) != 1 || got[0] != "rt-1" {
		t.Fatalf("SKRouteTag = %q", got)
	}
	_, _ = c.GetQRCodeStatus(context.Background(), QRStatusRequest{QRCode: "q"})
	if got := ct.last(t).header["SKRouteTag"]; len(got) != 1 || got[0] != "rt-1" {
		t.Fatalf("SKRouteTag on GET = %q", got)
	}
}

func TestXWechatUINIsBase64OfDecimalUint32PerRequest(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	for i := 0; i < 20; i++ {
		_ = c.NotifyStart(context.Background())
	}
	seen := map[string]bool{}
	for _, r := range ct.all() {
		v := r.header["X-WECHAT-UIN"][0]
		dec, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("%q is not base64: %v", v, err)
		}
		if _, err := strconv.ParseUint(string(dec), 10, 32); err != nil || strings.TrimLeft(string(dec), "0") != string(dec) && string(dec) != "0" {
			t.Fatalf("%q decodes to %q, not a decimal uint32", v, dec)
		}
		seen[v] = true
	}
	if len(seen) < 15 {
		t.Fatalf("X-WECHAT-UIN is not random per request: %d distinct of 20", len(seen))
	}
}

func TestNoAuthorizationHeaderWithoutToken(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "")
	_ = c.NotifyStart(context.Background())
	if _, ok := ct.last(t).header["Authorization"]; ok {
		t.Fatal("Authorization sent without a token")
	}
}

func TestEveryAuthenticatedPostCarriesBaseInfo(t *testing.T) {
	c, ct := newCaptureClient(t, Config{ClientVersion: "2.4.6", BotAgent: "Test/1.0 (x)"}, "tok")
	ct.respond = func(r *http.Request) *http.Response {
		if strings.HasSuffix(r.URL.Path, "getuploadurl") {
			return jsonResponse(r, 200, `{"upload_param":"p"}`)
		}
		return jsonResponse(r, 200, `{}`)
	}
	ctx := context.Background()
	_, _ = c.GetUpdates(ctx, GetUpdatesRequest{})
	_, _ = c.SendText(ctx, SendOptions{ToUserID: "u"}, "hi")
	_, _ = c.GetUploadURL(ctx, UploadURLRequest{FileKey: "k"})
	_, _ = c.GetConfig(ctx, "u", "")
	_ = c.SendTyping(ctx, "u", "t", TypingStart)
	_ = c.NotifyStart(ctx)
	_ = c.NotifyStop(ctx)
	reqs := ct.all()
	if len(reqs) != 7 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs {
		var body struct {
			BaseInfo map[string]any `json:"base_info"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if body.BaseInfo["channel_version"] != "2.4.6" || body.BaseInfo["bot_agent"] != "Test/1.0 (x)" || len(body.BaseInfo) != 2 {
			t.Errorf("%s: base_info = %v", r.url, body.BaseInfo)
		}
		if r.header["iLink-App-ClientVersion"][0] != "132102" {
			t.Errorf("%s: version header %v", r.url, r.header["iLink-App-ClientVersion"])
		}
	}
}

func TestGetBotQRCodePostsLocalTokenListWithoutAuthOrBaseInfo(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "should-not-be-sent")
	ct.respond = func(r *http.Request) *http.Response {
		return jsonResponse(r, 200, `{"qrcode":"q1","qrcode_img_content":"https://liteapp.weixin.qq.com/q/x"}`)
	}
	qr, err := c.GetBotQRCode(context.Background(), []Secret{"t1", "t2"})
	if err != nil || qr.QRCode != "q1" || qr.ImageContent != "https://liteapp.weixin.qq.com/q/x" {
		t.Fatalf("%+v %v", qr, err)
	}
	r := ct.last(t)
	if r.method != http.MethodPost || r.url != "https://api.test/ilink/bot/get_bot_qrcode?bot_type=3" {
		t.Fatalf("%s %s", r.method, r.url)
	}
	if string(r.body) != `{"local_token_list":["t1","t2"]}` {
		t.Fatalf("body %s", r.body)
	}
	if _, ok := r.header["Authorization"]; ok {
		t.Error("Authorization sent on get_bot_qrcode")
	}
	for _, k := range []string{"AuthorizationType", "X-WECHAT-UIN", "iLink-App-Id", "iLink-App-ClientVersion", "Content-Type"} {
		if _, ok := r.header[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	_, _ = c.GetBotQRCode(context.Background(), nil)
	if string(ct.last(t).body) != `{"local_token_list":[]}` {
		t.Fatalf("empty list body %s", ct.last(t).body)
	}
	many := make([]Secret, 15)
	for i := range many {
		many[i] = Secret("t" + strconv.Itoa(i))
	}
	_, _ = c.GetBotQRCode(context.Background(), many)
	var body getBotQRCodeRequest
	_ = json.Unmarshal(ct.last(t).body, &body)
	if len(body.LocalTokenList) != 10 || body.LocalTokenList[0] != "t0" {
		t.Fatalf("token list not capped at the newest 10: %d", len(body.LocalTokenList))
	}
}

func TestQRStatusIsAGETWithAppHeadersOnly(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	ct.respond = func(r *http.Request) *http.Response { return jsonResponse(r, 200, `{"status":"wait"}`) }
	st, err := c.GetQRCodeStatus(context.Background(), QRStatusRequest{QRCode: "a b/+=", VerifyCode: "12"})
	if err != nil || st.Status != QRWait {
		t.Fatalf("%+v %v", st, err)
	}
	r := ct.last(t)
	u, _ := url.Parse(r.url)
	if r.method != http.MethodGet || u.Path != "/ilink/bot/get_qrcode_status" ||
		u.Query().Get("qrcode") != "a b/+=" || u.Query().Get("verify_code") != "12" {
		t.Fatalf("%s %s", r.method, r.url)
	}
	for _, k := range []string{"Authorization", "AuthorizationType", "X-WECHAT-UIN", "Content-Type"} {
		if _, ok := r.header[k]; ok {
			t.Errorf("%s sent on get_qrcode_status", k)
		}
	}
	if r.header["iLink-App-Id"][0] != "bot" || r.header["iLink-App-ClientVersion"][0] != "132105" {
		t.Errorf("app headers %v", r.header)
	}
}

func TestQRStatusPollsTheRedirectHost(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "")
	ct.respond = func(r *http.Request) *http.Response { return jsonResponse(r, 200, `{"status":"scaned"}`) }
	_, _ = c.GetQRCodeStatus(context.Background(), QRStatusRequest{QRCode: "q", Host: "idc2.example:8443"})
	if got := ct.last(t).url; got != "https://idc2.example:8443/ilink/bot/get_qrcode_status?qrcode=q" {
		t.Fatalf("got %s", got)
	}
	_, _ = c.GetQRCodeStatus(context.Background(), QRStatusRequest{QRCode: "q", Host: "http://127.0.0.1:9"})
	if got := ct.last(t).url; got != "http://127.0.0.1:9/ilink/bot/get_qrcode_status?qrcode=q" {
		t.Fatalf("got %s", got)
	}
	for _, h := range []string{"evil.example/path", "a?b", "user@host"} {
		if _, err := c.GetQRCodeStatus(context.Background(), QRStatusRequest{QRCode: "q", Host: h}); CodeOf(err) != CodeInvalidInput {
			t.Errorf("%q: %v", h, err)
		}
	}
}

func TestSendMessageBodyCarriesExactlyOneItem(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	ct.respond = func(r *http.Request) *http.Response {
		return jsonResponse(r, 200, `{"ret":0,"message_id":18446744073709551615}`)
	}
	res, err := c.SendText(context.Background(), SendOptions{ToUserID: "u@im.wechat", ContextToken: "CKctx", ClientID: "cid-1"}, "hi")
	if err != nil || res.MessageID != ID(^uint64(0)) || res.ClientID != "cid-1" {
		t.Fatalf("%+v %v", res, err)
	}
	want := `{"msg":{"from_user_id":"","to_user_id":"u@im.wechat","client_id":"cid-1","message_type":2,"message_state":2,` +
		`"item_list":[{"type":1,"text_item":{"text":"hi"}}],"context_token":"CKctx"},` +
		`"base_info":{"channel_version":"2.4.9","bot_agent":"ilinkflow/0.1"}}`
	if got := string(ct.last(t).body); got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
}

func TestSendWithoutContextTokenLeavesTheFieldOut(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	if _, err := c.SendText(context.Background(), SendOptions{ToUserID: "u"}, "x"); err != nil {
		t.Fatal(err)
	}
	body := string(ct.last(t).body)
	if strings.Contains(body, "context_token") {
		t.Fatalf("context_token present: %s", body)
	}
	var req sendMessageRequest
	_ = json.Unmarshal([]byte(body), &req)
	if !strings.HasPrefix(req.Msg.ClientID, "ilinkflow:") || len(req.Msg.ClientID) != len("ilinkflow:")+13+1+8 {
		t.Fatalf("generated client_id %q", req.Msg.ClientID)
	}
}

func TestSendWithCaptionSendsTheCaptionFirstAsItsOwnMessage(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	m := &UploadedMedia{AESKey: "00112233445566778899aabbccddeeff", EncryptQueryParam: "enc", RawSize: 3, CipherSize: 16}
	res, err := c.SendWithCaption(context.Background(), SendOptions{ToUserID: "u", ClientID: "c1"}, "look", m.ImageItem())
	if err != nil || len(res) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	reqs := ct.all()
	var first, second sendMessageRequest
	_ = json.Unmarshal(reqs[0].body, &first)
	_ = json.Unmarshal(reqs[1].body, &second)
	if len(first.Msg.ItemList) != 1 || first.Msg.ItemList[0].Type != ItemText || first.Msg.ItemList[0].TextItem.Text != "look" ||
		first.Msg.ClientID != "c1-caption" {
		t.Fatalf("first %+v", first.Msg)
	}
	if len(second.Msg.ItemList) != 1 || second.Msg.ItemList[0].Type != ItemImage || second.Msg.ClientID != "c1" {
		t.Fatalf("second %+v", second.Msg)
	}
}

func TestSendRejectsMissingRecipientWithoutSending(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	if _, err := c.SendText(context.Background(), SendOptions{}, "x"); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("got %v", err)
	}
	if _, err := c.SendItem(context.Background(), SendOptions{ToUserID: "u"}, Item{}); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("got %v", err)
	}
	if _, err := c.SendImage(context.Background(), SendOptions{ToUserID: "u"}, nil); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("nil media: %v", err)
	}
	if _, err := c.SendFile(context.Background(), SendOptions{ToUserID: "u"}, nil, "f"); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("nil media: %v", err)
	}
	if _, err := c.SendVideo(context.Background(), SendOptions{ToUserID: "u"}, nil); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("nil media: %v", err)
	}
	if len(ct.all()) != 0 {
		t.Fatal("a request was sent")
	}
}

func TestGetConfigAndTypingUseIlinkUserID(t *testing.T) {
	c, ct := newCaptureClient(t, Config{}, "tok")
	ct.respond = func(r *http.Request) *http.Response {
		return jsonResponse(r, 200, `{"ret":0,"typing_ticket":"AARTBK8F"}`)
	}
	cfg, err := c.GetConfig(context.Background(), "u@im.wechat", "CKctx")
	if err != nil || cfg.TypingTicket.Reveal() != "AARTBK8F" {
		t.Fatalf("%v %v", cfg, err)
	}
	var gc map[string]any
	_ = json.Unmarshal(ct.last(t).body, &gc)
	if gc["ilink_user_id"] != "u@im.wechat" || gc["context_token"] != "CKctx" || gc["user_id"] != nil {
		t.Fatalf("getconfig body %v", gc)
	}
	_ = c.SendTyping(context.Background(), "u@im.wechat", cfg.TypingTicket, TypingStop)
	var st map[string]any
	_ = json.Unmarshal(ct.last(t).body, &st)
	if st["ilink_user_id"] != "u@im.wechat" || st["typing_ticket"] != "AARTBK8F" || st["status"] != float64(2) {
		t.Fatalf("sendtyping body %v", st)
	}
}
