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
// behind it. The official plugin's own client code drives it in openclaw_facade_test.go.

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

// facadeBot is a bot enrolled, routed to an iLink client by its QR login, with the
// client's iLink client for it.
type facadeBot struct {
	key, owner, simBot string
	botID              string
	token              ilink.Secret
	client             *ilink.Client
}

func (a *apiSystem) facadeBotOf(client, offerID, owner string) facadeBot {
	a.t.Helper()
	key, bot := a.enrolledBot(offerID, owner)
	botID, token := a.facadeLogin(client, key, owner)
	return facadeBot{key: key, owner: owner, simBot: bot.BotID, botID: botID, token: token, client: a.facadeClient(token)}
}

func texts(msgs []ilink.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = textOf(m)
	}
	return out
}

func TestEachILinkClientSeesOnlyItsBotsAndARestartedClientGetsWhatItHadNotAcknowledgedOnce(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	alphaToken := a.iLinkClientAdd("alpha")
	betaToken := a.iLinkClientAdd("beta")
	bots := map[string][]facadeBot{}
	for i, c := range []string{"alpha", "alpha", "beta", "beta"} {
		owner := "o9cq8facadetwo000000000" + string(rune('a'+i)) + "1@im.wechat"
		bots[c] = append(bots[c], a.facadeBotOf(c, "qo_e2e_facade_two_"+string(rune('a'+i)), owner))
	}
	say := func(b facadeBot, text string) {
		t.Helper()
		if _, err := a.ctl.InjectText(a.ctx, b.simBot, "", text); err != nil {
			t.Fatal(err)
		}
	}
	for c, bs := range bots {
		for i, b := range bs {
			say(b, c+" bot "+string(rune('0'+i))+" first")
		}
	}
	// Each bot's poll shows its own message only; the client's own token shows both of
	// its bots' messages and none of the other client's.
	for c, bs := range bots {
		for i, b := range bs {
			got, _ := a.takeMessages(b.client, "", 1)
			if want := c + " bot " + string(rune('0'+i)) + " first"; len(got) != 1 || textOf(got[0]) != want || got[0].ToUserID != b.botID {
				t.Fatalf("bot %d of %s polled %q, want only %q", i, c, texts(got), want)
			}
		}
	}
	all, _ := a.takeMessages(a.facadeClient(betaToken), "", 2)
	if got := texts(all); len(got) != 2 || !strings.HasPrefix(got[0], "beta") || !strings.HasPrefix(got[1], "beta") {
		t.Fatalf("beta's own token polled %q, want beta's two messages", got)
	}

	// alpha's first bot answers its first message, then takes the owner's next messages
	// and dies before its store kept the cursor (the page was answered, the client never
	// moved past it). Restarted with the cursor it had kept, it gets them again; moving
	// past them, never again. The owner's messages in a row, unanswered, are merged into
	// the last (every route sees them so); each waits until it is queued, seen through
	// alpha's own token, whose cursor is its own.
	b := bots["alpha"][0]
	first, kept := a.takeMessages(b.client, "", 1) // the first message again: nothing was acknowledged yet
	if _, err := b.client.SendText(a.ctx, ilink.SendOptions{ToUserID: b.owner, ContextToken: first[0].ContextToken}, "noted"); err != nil {
		t.Fatal(err)
	}
	watcher := a.facadeClient(alphaToken)
	_, seen := a.takeMessages(watcher, "", 2)
	for _, s := range []string{"one", "two", "three"} {
		say(b, s)
		_, seen = a.takeMessages(watcher, seen, 1)
	}
	lost, _ := a.takeMessages(b.client, kept, 1)
	if got := texts(lost); len(got) != 1 || got[0] != "one\ntwo\nthree" {
		t.Fatalf("the client took %q, want the merged one, two, three", got)
	}
	restarted := a.facadeClient(b.token)
	again, next := a.takeMessages(restarted, kept, 1)
	if got := texts(again); strings.Join(got, ",") != strings.Join(texts(lost), ",") || again[0].MessageID != lost[0].MessageID {
		t.Fatalf("the restarted client got %q, want what it lost: %q", got, texts(lost))
	}
	// A client that kept no cursor at all resumes from its last acknowledgement too.
	empty, _ := a.takeMessages(a.facadeClient(b.token), "", 1)
	if empty[0].MessageID != lost[0].MessageID {
		t.Fatalf("a client with no cursor got %q, want the unacknowledged %q", texts(empty), texts(lost))
	}
	if _, err := restarted.SendText(a.ctx, ilink.SendOptions{ToUserID: b.owner, ContextToken: again[0].ContextToken}, "got them"); err != nil {
		t.Fatal(err)
	}
	say(b, "four")
	after, _ := a.takeMessages(restarted, next, 1)
	if got := texts(after); len(got) != 1 || got[0] != "four" {
		t.Fatalf("past the cursor the client got %q, want only four", got)
	}
	if got := a.sentTexts(b.simBot); strings.Join(got, ",") != "noted,got them" {
		t.Fatalf("the user got %q", got)
	}
}

func TestThirteenILinkRepliesToOneMessageSendTenAndHoldThreeForTheUsersNextMessage(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	a.iLinkClientAdd("openclaw")
	b := a.facadeBotOf("openclaw", "qo_e2e_facade_held", "o9cq8facadeheld0000000001@im.wechat")
	if _, err := a.ctl.InjectText(a.ctx, b.simBot, "", "question one"); err != nil {
		t.Fatal(err)
	}
	msgs, cursor := a.takeMessages(b.client, "", 1)
	opts := ilink.SendOptions{ToUserID: b.owner, ContextToken: msgs[0].ContextToken}
	var want []string
	for i := 1; i <= 13; i++ {
		text := "reply " + string(rune('a'+i-1)) + " to question one"
		res, err := b.client.SendText(a.ctx, opts, text)
		if err != nil {
			t.Fatalf("reply %d: %v (a held reply answers iLink's success)", i, err)
		}
		// Sent replies carry the provider's message id; held ones none.
		if sentNow := i <= 10; sentNow != (res.MessageID != 0) {
			t.Fatalf("reply %d answered message_id %d", i, res.MessageID)
		}
		want = append(want, text)
	}
	if got := a.sentTexts(b.simBot); strings.Join(got, ",") != strings.Join(want[:10], ",") {
		t.Fatalf("the user got %q, want the first ten replies", got)
	}
	hs, err := a.store.ListHeldReplies(a.ctx, store.HeldFilter{AccountKey: b.key})
	if err != nil || len(hs) != 3 {
		t.Fatalf("%d held replies (%v), want 3", len(hs), err)
	}
	if _, err := a.ctl.InjectText(a.ctx, b.simBot, "", "question two"); err != nil {
		t.Fatal(err)
	}
	a.eventually("the held replies reach the user", 2*time.Minute, func() (bool, error) {
		return len(a.sentTexts(b.simBot)) >= 13, nil
	})
	if got := a.sentTexts(b.simBot); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the user got %q, want the thirteen replies in order", got)
	}
	next, _ := a.takeMessages(b.client, cursor, 1)
	if textOf(next[0]) != "question two" {
		t.Fatalf("the client's next message is %q", textOf(next[0]))
	}
}

// facadePost posts a raw request to a facade endpoint with the headers given (a nil map:
// those of a well-behaved client) and returns the decoded JSON answer.
func (a *apiSystem) facadePost(path, token string, headers map[string]string, body string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, a.base+ilinkfacade.BotPath+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if headers == nil {
		headers = map[string]string{"Content-Type": "application/json", "AuthorizationType": "ilink_bot_token"}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestTheFacadeAnswersBadInputInILinksOwnShapes(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	a.iLinkClientAdd("openclaw")
	b := a.facadeBotOf("openclaw", "qo_e2e_facade_bad", "o9cq8facadebadinput000001@im.wechat")
	if _, err := a.ctl.InjectText(a.ctx, b.simBot, "", "hello"); err != nil {
		t.Fatal(err)
	}
	msgs, _ := a.takeMessages(b.client, "", 1)
	ctxToken := msgs[0].ContextToken.Reveal()
	base := `"base_info":{"channel_version":"2.4.9"}`
	send := func(text string) string {
		raw, _ := json.Marshal(map[string]any{"to_user_id": b.owner, "context_token": ctxToken, "message_type": 2, "message_state": 2,
			"item_list": []any{map[string]any{"type": 1, "text_item": map[string]any{"text": text}}}})
		return `{"msg":` + string(raw) + `,` + base + `}`
	}
	stale := map[string]any{"ret": float64(-14), "errcode": float64(-14), "errmsg": "session timeout"}
	invalid := map[string]any{"ret": float64(-2), "errmsg": "invalid arguments"}
	for _, c := range []struct {
		name, path, token string
		headers           map[string]string
		body              string
		want              map[string]any
	}{
		{"no token", "getupdates", "", nil, `{"get_updates_buf":"",` + base + `}`, stale},
		{"an unknown token", "getupdates", "0123456789ab@im.bot:" + strings.Repeat("ab", 32), nil, `{"get_updates_buf":"",` + base + `}`, stale},
		{"no AuthorizationType", "getupdates", b.token.Reveal(), map[string]string{"Content-Type": "application/json"},
			`{"get_updates_buf":"",` + base + `}`, invalid},
		{"no base_info", "sendmessage", b.token.Reveal(), nil, `{"msg":{}}`, invalid},
		{"a bot_agent that is not ASCII", "getupdates", b.token.Reveal(), nil,
			`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9","bot_agent":"机器人"}}`, invalid},
		{"a body that is not JSON", "sendmessage", b.token.Reveal(), nil, `{"msg":`, invalid},
		{"two items in one message", "sendmessage", b.token.Reveal(), nil, `{"msg":{"to_user_id":"` + b.owner +
			`","item_list":[{"type":1,"text_item":{"text":"a"}},{"type":1,"text_item":{"text":"b"}}]},` + base + `}`, invalid},
		{"a context token of nobody's message", "sendmessage", b.token.Reveal(), nil, strings.Replace(send("hi"), ctxToken,
			ilinkfacade.ContextToken("im_00000000000000000000000000000000"), 1), invalid},
		{"another user's conversation", "sendmessage", b.token.Reveal(), nil, strings.Replace(send("hi"), b.owner,
			"o9cq8someoneelse000000000001@im.wechat", 1), invalid},
		{"getconfig without ilink_user_id", "getconfig", b.token.Reveal(), nil, `{"user_id":"` + b.owner + `",` + base + `}`,
			map[string]any{"ret": float64(-2), "errcode": float64(0), "errmsg": "ilink_user_id required"}},
	} {
		status, got := a.facadePost(c.path, c.token, c.headers, c.body)
		if status != http.StatusOK || !equalJSON(got, c.want) {
			t.Errorf("%s: %d %v, want 200 %v", c.name, status, got, c.want)
		}
	}
	// A text over iLink's limit is refused as iLink refuses it, with the reason.
	status, got := a.facadePost("sendmessage", b.token.Reveal(), nil, send(strings.Repeat("长", 6000)))
	if status != http.StatusOK || got["ret"] != float64(-2) || !strings.HasPrefix(got["errmsg"].(string), "text_too_long") {
		t.Fatalf("an oversized text: %d %v", status, got)
	}
	if sent, err := a.ctl.Sent(a.ctx, b.simBot); err != nil || len(sent) != 0 {
		t.Fatalf("bad requests sent %d messages (%v)", len(sent), err)
	}
}

func equalJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
