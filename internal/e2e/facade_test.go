package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinkfacade"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The iLink facade, driven by the repo's own iLink client (internal/ilink, the client the
// gateway polls iLink with) against the real dev server, PostgreSQL and the simulator
// behind it. The official plugin's own client code drives it in openclaw_test.go.

// iLinkClientAdd adds an iLink client and returns its token.
func (a *apiSystem) iLinkClientAdd(name string) ilink.Secret {
	a.t.Helper()
	token, err := a.store.CreateILinkClient(a.ctx, time.Now(), name, "e2e")
	if err != nil {
		a.t.Fatal(err)
	}
	return ilink.Secret(token.Reveal())
}

// facadeClient is an iLink client of the facade with the token.
func (a *apiSystem) facadeClient(token ilink.Secret) *ilink.Client {
	a.t.Helper()
	c, err := ilink.New(ilink.Config{BaseURL: a.base, PollTimeout: 20 * time.Second}, token)
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// facadeLogin runs a client's QR login on the facade as the clients do, with the
// operator's approval for the account in the middle, and returns the bot it made.
func (a *apiSystem) facadeLogin(client, accountKey, owner string) (botID string, token ilink.Secret) {
	a.t.Helper()
	c := a.facadeClient("")
	qr, err := c.GetBotQRCode(a.ctx, nil)
	if err != nil {
		a.t.Fatalf("get_bot_qrcode: %v", err)
	}
	status := func() *ilink.QRCodeStatus {
		a.t.Helper()
		st, err := c.GetQRCodeStatus(a.ctx, ilink.QRStatusRequest{QRCode: qr.QRCode})
		if err != nil {
			a.t.Fatalf("get_qrcode_status: %v", err)
		}
		return st
	}
	if st := status(); st.Status != ilink.QRWait {
		a.t.Fatalf("a new login is %s, want wait", st.Status)
	}
	code, ok := strings.CutPrefix(qr.ImageContent, a.base+ilinkfacade.LoginPath)
	if !ok {
		a.t.Fatalf("the QR code's content %q is not the facade's login page", qr.ImageContent)
	}
	resp, err := a.http.Get(qr.ImageContent) // the operator opens the page the QR code shows
	if err != nil || resp.StatusCode != http.StatusOK {
		a.t.Fatalf("login page: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if st := status(); st.Status != ilink.QRScanned {
		a.t.Fatalf("a login whose page was opened is %s, want scaned", st.Status)
	}
	if err := a.store.ApproveILinkLogin(a.ctx, time.Now(), code, client, accountKey, "e2e"); err != nil {
		a.t.Fatal(err)
	}
	st := status()
	if st.Status != ilink.QRConfirmed || st.ILinkBotID == "" || st.BotToken == "" || st.BaseURL != a.base || st.ILinkUserID != owner {
		a.t.Fatalf("the approved login answered %+v", st)
	}
	if again := status(); again.Status != ilink.QRExpired {
		a.t.Fatalf("a collected login answered %s again, want expired", again.Status)
	}
	return st.ILinkBotID, st.BotToken
}

// takeMessages polls the facade from cursor until it has n messages, and returns them
// with the cursor after them.
func (a *apiSystem) takeMessages(c *ilink.Client, cursor string, n int) ([]ilink.Message, string) {
	a.t.Helper()
	var got []ilink.Message
	deadline := time.Now().Add(2 * time.Minute)
	for len(got) < n {
		if time.Now().After(deadline) {
			a.t.Fatalf("%d of %d messages after 2 minutes", len(got), n)
		}
		page, err := c.GetUpdates(a.ctx, ilink.GetUpdatesRequest{Cursor: cursor})
		if err != nil {
			a.t.Fatalf("getupdates: %v", err)
		}
		got = append(got, page.Messages...)
		cursor = page.Cursor
	}
	return got, cursor
}

func textOf(m ilink.Message) string {
	for _, it := range m.ItemList {
		if it.TextItem != nil {
			return it.TextItem.Text
		}
	}
	return ""
}

func TestAnILinkClientLogsInByQRTakesTextAndImageRepliesWithBothAndIsRefusedOnceRevoked(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxMediaBytes = 256 << 10
	limits.WindowLifetime = time.Hour
	a := startAPI(t, limits, nil)
	const owner = "o9cq8facadeowner0000000001@im.wechat"
	key, bot := a.enrolledBot("qo_e2e_facade", owner)
	clientToken := a.iLinkClientAdd("openclaw")
	botID, token := a.facadeLogin("openclaw", key, owner)
	if r, found, err := a.store.GetRoute(a.ctx, key); err != nil || !found || r.Kind != vocab.RouteILink || r.ILinkClient != "openclaw" {
		t.Fatalf("the approval left the route %+v (found %v, %v)", r, found, err)
	}
	c := a.facadeClient(token)
	if err := c.NotifyStart(a.ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "hello through the facade"); err != nil {
		t.Fatal(err)
	}
	picture := pngBytes(t, 21)
	msgs, cursor := a.takeMessages(c, "", 1)
	if _, err := a.ctl.Inject(a.ctx, bot.BotID, ilinksim.InjectRequest{Kind: "image", Data: picture}); err != nil {
		t.Fatal(err)
	}
	more, cursor := a.takeMessages(c, cursor, 1)
	msgs = append(msgs, more...)
	m := msgs[0]
	if m.FromUserID != owner || m.ToUserID != botID || textOf(m) != "hello through the facade" || m.MessageType != ilink.MessageTypeUser ||
		m.MessageID == 0 || m.ContextToken == "" {
		t.Fatalf("the first message is %+v", m)
	}
	raw, err := base64.StdEncoding.DecodeString(m.ContextToken.Reveal())
	if err != nil || !strings.HasPrefix(string(raw), "ilkctx:") {
		t.Fatalf("the context token is not the facade's own")
	}
	img := msgs[1]
	var imageItem *ilink.Item
	for i := range img.ItemList {
		if img.ItemList[i].Type == ilink.ItemImage {
			imageItem = &img.ItemList[i]
		}
	}
	if imageItem == nil {
		t.Fatalf("the image message has no image item: %+v", img)
	}
	got, err := c.DownloadItem(a.ctx, imageItem)
	if err != nil || !bytes.Equal(got, picture) {
		t.Fatalf("the image downloaded from the facade's CDN differs (%v)", err)
	}

	cfg, err := c.GetConfig(a.ctx, owner, img.ContextToken)
	if err != nil || cfg.TypingTicket == "" {
		t.Fatalf("getconfig: %+v %v", cfg, err)
	}
	if err := c.SendTyping(a.ctx, owner, cfg.TypingTicket, ilink.TypingStart); err != nil {
		t.Fatal(err)
	}
	opts := ilink.SendOptions{ToUserID: owner, ContextToken: img.ContextToken}
	if _, err := c.SendText(a.ctx, opts, "a fine picture"); err != nil {
		t.Fatalf("sendmessage: %v", err)
	}
	answer := pngBytes(t, 22)
	up, err := c.UploadMedia(a.ctx, ilink.UploadRequest{ToUserID: owner, MediaType: ilink.MediaImage, Data: answer})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if _, err := c.SendImage(a.ctx, opts, up); err != nil {
		t.Fatalf("send image: %v", err)
	}
	// The user received the text and the image, sent with the real context token.
	sent, err := a.ctl.Sent(a.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want 2", len(sent))
	}
	if texts := a.sentTexts(bot.BotID); texts[0] != "a fine picture" {
		t.Fatalf("texts sent %q", texts)
	}
	var out struct {
		ItemList []sentItem `json:"item_list"`
	}
	if err := json.Unmarshal(sent[1].Msg, &out); err != nil || len(out.ItemList) != 1 || out.ItemList[0].ImageItem == nil {
		t.Fatalf("second reply %s", sent[1].Msg)
	}
	obj, err := a.ctl.CDNObject(a.ctx, out.ItemList[0].ImageItem.Media.EncryptQueryParam)
	if err != nil || !bytes.Equal(obj.Plaintext, answer) {
		t.Fatalf("the image reply's CDN object differs from the bytes uploaded (%v)", err)
	}

	// Revoked: the bot's token and the client's own are refused at once, with iLink's -14.
	if _, err := a.store.RevokeILinkClient(a.ctx, time.Now(), "openclaw", "e2e"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetUpdates(a.ctx, ilink.GetUpdatesRequest{Cursor: cursor}); !ilink.IsStaleToken(err) {
		t.Fatalf("a revoked client's poll answered %v, want -14", err)
	}
	if _, err := a.facadeClient(clientToken).SendText(a.ctx, opts, "after revoke"); !ilink.IsStaleToken(err) {
		t.Fatalf("a revoked client's send answered %v, want -14", err)
	}
	a.logs.assertNotLogged(t, token.Reveal(), clientToken.Reveal(), "a fine picture", "hello through the facade")
}
