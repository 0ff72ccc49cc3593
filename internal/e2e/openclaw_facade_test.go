package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinkfacade"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// The official iLink client (the OpenClaw Weixin plugin's own code, run by
// openclaw_driver_test.go) against the gateway's iLink facade: a real ilinkflow account
// on the simulator behind the facade, and the plugin logged in to the facade by its own
// QR login, approved by the operator for that account.

// openclawFacadeClient is the name of the iLink client the plugin logs in as.
const openclawFacadeClient = "openclaw"

// openclawOnFacade is a gateway with an enrolled account routed to the iLink client
// openclawFacadeClient, and the official client logged in to the facade for it.
type openclawOnFacade struct {
	a     *apiSystem
	owner string
	key   string           // the account
	sim   ilinksim.BotInfo // the account's real bot, on the simulator
	// client is the iLink client's own token (the operator's, not the plugin's).
	client ilink.Secret
	oc     *openclawClient
	login  openclawLogin
	bot    openclawBot
	// trap is where the plugin would build CDN URLs itself (its cdnBaseUrl): the facade
	// hands out full URLs, so no request may reach it; trapHits counts those that did.
	trap     string
	trapHits *atomic.Int32
}

// startOpenclawOnFacade starts a gateway, enrols owner's bot, adds the iLink client and
// runs the plugin's QR login against the facade: the test reads the login code from the
// QR code's content, opens that page as a phone would (the plugin sees "scaned"), and
// approves the code for the account with the store, as the operator does.
func startOpenclawOnFacade(ctx context.Context, t *testing.T, offerID, owner string) *openclawOnFacade {
	t.Helper()
	limits := store.DefaultLimits()
	limits.MaxMediaBytes = 256 << 10
	a := startAPI(t, limits, nil)
	f := &openclawOnFacade{a: a, owner: owner, trapHits: &atomic.Int32{}}
	f.key, f.sim = a.enrolledBot(offerID, owner)
	f.client = a.iLinkClientAdd(openclawFacadeClient)
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.trapHits.Add(1)
		t.Errorf("the plugin built a CDN URL itself: %s %s", r.Method, r.URL)
		http.Error(w, "not a CDN", http.StatusTeapot)
	}))
	t.Cleanup(trap.Close)
	f.trap = trap.URL + "/c2c"

	f.oc = startOpenclaw(ctx, t, t.TempDir())
	t.Logf("official client: %s %s on node %s", openclawPackage, f.oc.ready.PluginVersion, f.oc.ready.Node)
	f.login = f.oc.loginByQR(ctx, a.base+"/", func(ctx context.Context, qr openclawQR) error {
		code, ok := strings.CutPrefix(qr.ImgContent, a.base+ilinkfacade.LoginPath)
		if !ok || code == "" {
			return fmt.Errorf("the QR code's content %q is not the facade's login page", qr.ImgContent)
		}
		resp, err := a.http.Get(qr.ImgContent)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the login page answered %s", resp.Status)
		}
		scanned := func(e openclawEvent) bool {
			var s struct {
				Status string `json:"status"`
			}
			return e.decode(&s) == nil && s.Status == "scaned"
		}
		if _, err := f.oc.next(ctx, "qr_status", scanned); err != nil {
			return fmt.Errorf("the plugin never saw its login scanned: %w", err)
		}
		return a.store.ApproveILinkLogin(ctx, time.Now(), code, openclawFacadeClient, f.key, "e2e")
	})
	l := f.login
	if l.Status != "confirmed" || l.BotToken == "" || l.BotID == "" || l.BaseURL != a.base || l.UserID != owner {
		t.Fatalf("the plugin's login through the facade: %+v (want baseurl %s, user %s)", l, a.base, owner)
	}
	if l.BotID == f.sim.BotID || l.BotToken == f.sim.Token {
		t.Fatalf("the facade handed the plugin the account's real bot id or token")
	}
	if got := l.Statuses; len(got) == 0 || got[len(got)-1] != "confirmed" || slices.ContainsFunc(got, func(s string) bool {
		return s != "wait" && s != "scaned" && s != "confirmed"
	}) {
		t.Fatalf("QR statuses after the scan %v", got)
	}
	t.Logf("QR login through the facade: bot %s, owner %s, base %s", l.BotID, l.UserID, l.BaseURL)
	f.bot = openclawBot{BaseURL: l.BaseURL, Token: l.BotToken, BotID: l.BotID, CDNBaseURL: f.trap}
	return f
}

// inject queues a text message from the owner on the simulator.
func (f *openclawOnFacade) inject(ctx context.Context, text string) ilinksim.Injected {
	f.a.t.Helper()
	in, err := f.a.ctl.InjectText(ctx, f.sim.BotID, "", text)
	if err != nil {
		f.a.t.Fatal(err)
	}
	return in
}

// lastSent is the simulator's latest send of the account's bot, which must be one of n.
func (f *openclawOnFacade) lastSent(ctx context.Context, n int) ilinksim.SentMessage {
	f.a.t.Helper()
	sent, err := f.a.ctl.Sent(ctx, f.sim.BotID)
	if err != nil {
		f.a.t.Fatal(err)
	}
	if len(sent) != n {
		f.a.t.Fatalf("the simulator recorded %d sends of the account's bot, want %d: %+v", len(sent), n, sent)
	}
	return sent[n-1]
}

// ownerTyping is the simulator's sendtyping requests to the owner, in order ("typing" or
// "cancel").
func (f *openclawOnFacade) ownerTyping() []string {
	f.a.t.Helper()
	var out []string
	for _, e := range f.a.typingLog() {
		if e.kind != "send" && e.peerID == f.owner {
			out = append(out, e.kind)
		}
	}
	return out
}

// isFacadeContextToken tells whether a context token is one the facade made (base64 of
// "ilkctx:" and a message key), not iLink's.
func isFacadeContextToken(token string) bool {
	raw, err := base64.StdEncoding.DecodeString(token)
	return err == nil && strings.HasPrefix(string(raw), "ilkctx:")
}

// TestTheOfficialClientLogsInReceivesAndRepliesThroughTheFacade runs the official plugin's
// client code against the facade in front of a real account: its QR login approved by the
// operator, notifystart, the long poll, a text and an image in (the image downloaded from
// the facade's CDN), typing, a text and an image out (uploaded to the facade's CDN), all
// checked on the simulator's side of the account, and the client's revocation (-14).
func TestTheOfficialClientLogsInReceivesAndRepliesThroughTheFacade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := startOpenclawOnFacade(ctx, t, "qo_e2e_openclaw_facade", "o9cq8openclawowner00000001@im.wechat")
	a, oc, login := f.a, f.oc, f.login

	// notifystart, then the monitor loop, as the plugin's gateway.startAccount does.
	if ret, errText := oc.notify(ctx, f.bot, "start"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystart: ret %v, error %q", ret, errText)
	}
	polling := oc.poll(ctx, f.bot)
	if polling.Cursor != "" {
		t.Fatalf("a fresh state directory held cursor %q", polling.Cursor)
	}

	// A text in: from the owner to the facade's bot, with a context token of the facade's.
	const hello = "你好, ilinkflow through the facade"
	in := f.inject(ctx, hello)
	m := oc.nextMessage(ctx)
	if m.MessageID != strconv.FormatUint(in.MessageID, 10) || m.From != f.owner || m.To != login.BotID ||
		m.text() != hello || m.Dispatch.Body != hello || m.MessageType != 1 {
		t.Fatalf("the plugin received %s\nthe simulator queued %s", m.Raw, in.Message)
	}
	if m.ContextToken == "" || m.ContextToken == in.ContextToken || !isFacadeContextToken(m.ContextToken) {
		t.Fatalf("the plugin got context token %q; the account's real one is %q", m.ContextToken, in.ContextToken)
	}

	// Typing: the plugin's getconfig ticket (the facade's own) and sendtyping reach the
	// owner through the account: typing, cancel, typing again. (The gateway shows "typing"
	// itself while a message waits for its answer; the plugin's cancel ends that, so the
	// last "typing" is the plugin's alone.)
	before := len(f.ownerTyping())
	for _, status := range []string{"typing", "cancel", "typing"} {
		tp := oc.typingStatus(ctx, f.owner, m.ContextToken, status)
		want := map[string]int{"typing": 1, "cancel": 2}[status]
		if tp.Ev != "typing" || tp.Ticket == "" || tp.Status != want {
			t.Fatalf("typing %s: %+v", status, tp)
		}
		if got := f.ownerTyping()[before:]; len(got) == 0 || got[len(got)-1] != status {
			t.Fatalf("after the plugin's %s the simulator saw sendtyping %q", status, got)
		}
		if p := openclawPeer(ctx, t, a.ctl, f.sim.BotID, f.owner); p.Typing != want || p.TypingTicket == tp.Ticket {
			t.Fatalf("the simulator's peer after the plugin's %s: %+v (the plugin's ticket %q)", status, p, tp.Ticket)
		}
	}

	// A text reply: sent to the owner by the account's bot with the real context token.
	reply := oc.sendText(ctx, m.From, m.ContextToken, "收到: 你好")
	if !reply.ok() || reply.MessageID == "" {
		t.Fatalf("reply: %+v", reply)
	}
	s := f.lastSent(ctx, 1)
	if s.Outcome != ilinksim.OutcomeAccepted || s.Text != "收到: 你好" || s.ToUserID != f.owner || s.ContextToken != in.ContextToken ||
		strconv.FormatUint(s.MessageID, 10) != reply.MessageID {
		t.Fatalf("the simulator recorded %+v for the plugin's send %+v", s, reply)
	}

	// An image in: the plugin downloads and decrypts it from the facade's CDN, by the
	// full URL the facade gave, while it handles the message and again on request.
	picture := pngBytes(t, 41)
	in, err := a.ctl.Inject(ctx, f.sim.BotID, ilinksim.InjectRequest{Kind: ilinksim.KindImage, Data: picture})
	if err != nil {
		t.Fatal(err)
	}
	m = oc.nextMessage(ctx)
	img := m.item(2)
	if m.MessageID != strconv.FormatUint(in.MessageID, 10) || img == nil || m.From != f.owner || !isFacadeContextToken(m.ContextToken) {
		t.Fatalf("the plugin received %s\nthe simulator queued %s", m.Raw, in.Message)
	}
	var media struct {
		Image struct {
			Media struct {
				FullURL string `json:"full_url"`
			} `json:"media"`
		} `json:"image_item"`
	}
	if err := json.Unmarshal(img, &media); err != nil || !strings.HasPrefix(media.Image.Media.FullURL, a.base+ilinkfacade.CDNPath) {
		t.Fatalf("the image item's full_url is not the facade's CDN: %s (%v)", img, err)
	}
	sum := sha256.Sum256(picture)
	want := hex.EncodeToString(sum[:])
	if m.Dispatch.MediaSHA256 != want || m.Dispatch.MediaBytes != len(picture) {
		t.Fatalf("the plugin's inbound media: %+v, want sha256 %s of %d bytes", m.Dispatch, want, len(picture))
	}
	if d := oc.download(ctx, img, f.trap); d.Ev != "downloaded" || d.SHA256 != want || d.Bytes != len(picture) {
		t.Fatalf("download: %+v, want sha256 %s of %d bytes", d, want, len(picture))
	}

	// An image out: uploaded to the facade's CDN (getuploadurl's upload_full_url), sent by
	// the account's bot from the simulator's CDN, where it decrypts to the same bytes.
	answer := pngBytes(t, 42)
	photo := filepath.Join(t.TempDir(), "answer.png")
	if err := os.WriteFile(photo, answer, 0o600); err != nil {
		t.Fatal(err)
	}
	sentImg := oc.sendImage(ctx, f.owner, m.ContextToken, photo)
	if !sentImg.ok() {
		t.Fatalf("send image: %+v", sentImg)
	}
	s = f.lastSent(ctx, 2)
	var out struct {
		ItemList []sentItem `json:"item_list"`
	}
	if err := json.Unmarshal(s.Msg, &out); err != nil || s.Outcome != ilinksim.OutcomeAccepted || s.ToUserID != f.owner ||
		s.ContextToken != in.ContextToken || len(out.ItemList) != 1 || out.ItemList[0].ImageItem == nil {
		t.Fatalf("the simulator recorded %+v (%s) for the plugin's image %+v (%v)", s, s.Msg, sentImg, err)
	}
	obj, err := a.ctl.CDNObject(ctx, out.ItemList[0].ImageItem.Media.EncryptQueryParam)
	if err != nil || !bytes.Equal(obj.Plaintext, answer) {
		t.Fatalf("the image the account sent differs from the one the plugin uploaded (%v)", err)
	}

	// Revoked: the held poll answers -14 and the plugin pauses the account for an hour,
	// refusing to send on its own.
	if ok, err := a.store.RevokeILinkClient(ctx, time.Now(), openclawFacadeClient, "e2e"); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	expired := oc.nextSessionExpired(ctx)
	if expired.Errcode != -14 || !expired.Paused || expired.PauseMS < 59*60*1000 {
		t.Fatalf("the plugin's -14 handling: %+v", expired)
	}
	t.Logf("revoked: the plugin paused account %s for %s", expired.AccountID, time.Duration(expired.PauseMS)*time.Millisecond)
	refused := oc.sendText(ctx, f.owner, m.ContextToken, "while paused")
	if refused.ok() || refused.Errcode == nil || *refused.Errcode != -14 || len(refused.Responses) != 0 {
		t.Fatalf("a send while the account is paused: %+v", refused)
	}
	// A new process (the pause is the old one's memory) with the credentials the plugin
	// saved sends: the facade answers -14, which the plugin throws on (ret != 0).
	oc.restart(ctx)
	refused = oc.sendCall(ctx, openclawBot{BotID: login.BotID}.fields(map[string]any{"cmd": "send_text", "to": f.owner,
		"context_token": m.ContextToken, "text": "after the revocation"}))
	if refused.ok() || refused.Ret == nil || *refused.Ret != -14 || len(refused.Responses) != 1 {
		t.Fatalf("a send after the revocation: %+v", refused)
	}
	var body struct {
		Ret     int    `json:"ret"`
		Errcode int    `json:"errcode"`
		Errmsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(refused.Responses[0].Body, &body); err != nil || refused.Responses[0].Status != http.StatusOK ||
		body.Ret != -14 || body.Errcode != -14 || body.Errmsg != "session timeout" {
		t.Fatalf("the facade answered the revoked send %d %s (%v)", refused.Responses[0].Status, refused.Responses[0].Body, err)
	}
	f.lastSent(ctx, 2) // nothing more reached the owner
	if n := f.trapHits.Load(); n != 0 {
		t.Fatalf("%d requests reached the CDN base the plugin builds URLs from", n)
	}
	a.logs.assertNotLogged(t, login.BotToken, f.client.Reveal(), hello)
}

// offerSeq is the position in the iLink client's queue of the message the simulator
// queued as in.
func (f *openclawOnFacade) offerSeq(ctx context.Context, in ilinksim.Injected) int64 {
	f.a.t.Helper()
	offers, err := f.a.store.ILinkClientOffers(ctx, openclawFacadeClient, f.key, 0, 1000)
	if err != nil {
		f.a.t.Fatal(err)
	}
	for _, o := range offers {
		m, err := f.a.store.GetMessage(ctx, o.MessageKey)
		if err != nil {
			f.a.t.Fatal(err)
		}
		if m.ProviderMessageID == strconv.FormatUint(in.MessageID, 10) {
			return o.Seq
		}
	}
	f.a.t.Fatalf("message %d is not in the client's queue", in.MessageID)
	return 0
}

// watch polls the client's queue with c (from cursor) until the message the simulator
// queued as in is there, and returns it with the cursor past it.
func (f *openclawOnFacade) watch(c *ilink.Client, cursor string, in ilinksim.Injected) (ilink.Message, string) {
	f.a.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		page, err := c.GetUpdates(f.a.ctx, ilink.GetUpdatesRequest{Cursor: cursor})
		if err != nil {
			f.a.t.Fatalf("getupdates: %v", err)
		}
		cursor = page.Cursor
		for _, m := range page.Messages {
			if uint64(m.MessageID) == in.MessageID {
				return m, cursor
			}
		}
	}
	f.a.t.Fatalf("message %d did not reach the client's queue", in.MessageID)
	return ilink.Message{}, ""
}

// TestTheOfficialClientKilledMidPollGetsEveryUnacknowledgedMessageOnce SIGKILLs the
// official client while the facade holds its long poll, sends messages while it is down,
// and restarts it on the same state directory (its saved credentials and cursor): it
// receives each message it had not acknowledged exactly once, and none of those it
// received and acknowledged before the kill again.
//
// The plugin acknowledges by its next getupdates: it saves the facade's cursor before it
// handles a page and sends it with its next poll. A poll held at the kill carries the
// cursor past every message the plugin handled, so nothing is lost or repeated here; a
// kill after the plugin saved a page's cursor and before it handed that page's messages
// on would lose them, since the restarted plugin sends the saved cursor, and the facade
// cannot tell that from a page that was handled (their content comes back only merged
// into the owner's next message, as any message nobody answered).
func TestTheOfficialClientKilledMidPollGetsEveryUnacknowledgedMessageOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := startOpenclawOnFacade(ctx, t, "qo_e2e_openclaw_kill", "o9cq8openclawkill000000001@im.wechat")
	a, oc, login := f.a, f.oc, f.login
	if ret, errText := oc.notify(ctx, f.bot, "start"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystart: ret %v, error %q", ret, errText)
	}
	polling := oc.poll(ctx, f.bot)

	// received counts, by message_id, the messages the plugin handed on, in both runs.
	received := map[string]int{}
	take := func(in ilinksim.Injected, text string) openclawMessage {
		t.Helper()
		m := oc.nextMessage(ctx)
		received[m.MessageID]++
		if m.MessageID != strconv.FormatUint(in.MessageID, 10) || m.text() != text || m.From != f.owner || m.To != login.BotID {
			t.Fatalf("the plugin received %s\nwant message %d %q", m.Raw, in.MessageID, text)
		}
		return m
	}
	var replies []string
	answer := func(m openclawMessage) {
		t.Helper()
		text := "re: " + m.text()
		if r := oc.sendText(ctx, f.owner, m.ContextToken, text); !r.ok() {
			t.Fatalf("reply to %q: %+v", m.text(), r)
		}
		replies = append(replies, text)
	}

	// Before the kill: two messages, each answered by the plugin before the next.
	var before []ilinksim.Injected
	for _, text := range []string{"before the kill: one", "before the kill: two"} {
		in := f.inject(ctx, text)
		answer(take(in, text))
		before = append(before, in)
	}

	// The plugin saved the cursor past both and holds a poll with it, which the facade
	// took as the acknowledgement of both: then it dies.
	saved := openclawSyncCursor(t, polling.SyncFile)
	for oc.nextPollSent(ctx) != saved {
		// an earlier poll's
	}
	acked := f.offerSeq(ctx, before[1])
	a.eventually("the facade holds the plugin's poll past both messages", 30*time.Second, func() (bool, error) {
		seq, err := a.store.ILinkClientCursor(ctx, openclawFacadeClient, login.BotID)
		return seq >= acked, err
	})
	oc.kill(ctx)

	// While it is down, three messages. The owner's messages in a row that nobody answered
	// are merged into the last, so the first two are answered by the operator with the
	// client's own token (whose cursor is its own), each once it is in the queue.
	texts := []string{"while it was down: one", "while it was down: two", "while it was down: three"}
	watcher := a.facadeClient(f.client)
	var down []ilinksim.Injected
	cursor := ""
	for i, text := range texts {
		in := f.inject(ctx, text)
		var wm ilink.Message
		wm, cursor = f.watch(watcher, cursor, in)
		if i < len(texts)-1 {
			reply := "answered elsewhere: " + text
			if _, err := watcher.SendText(ctx, ilink.SendOptions{ToUserID: f.owner, ContextToken: wm.ContextToken}, reply); err != nil {
				t.Fatalf("the operator's reply: %v", err)
			}
			replies = append(replies, reply)
		}
		down = append(down, in)
	}

	// Restarted on the same state directory: the credentials and the cursor the plugin
	// saved. It gets the three, in order, once each; the messages before the kill do not
	// come again (a message past them, the last, closes the account's queue: a repeat
	// would come before it).
	oc.restart(ctx)
	saved2 := openclawBot{BotID: login.BotID, CDNBaseURL: f.trap}
	if ret, errText := oc.notify(ctx, saved2, "start"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystart after the restart: ret %v, error %q", ret, errText)
	}
	polling = oc.poll(ctx, saved2)
	if polling.Cursor != saved {
		t.Fatalf("the restarted plugin loaded cursor %q, it had saved %q", polling.Cursor, saved)
	}
	if buf := oc.nextPollSent(ctx); buf != saved {
		t.Fatalf("the restarted plugin's first getupdates carried %q, want the saved %q", buf, saved)
	}
	var last openclawMessage
	for i, in := range down {
		last = take(in, texts[i])
	}
	answer(last)
	in := f.inject(ctx, "after the restart")
	answer(take(in, "after the restart"))

	for _, in := range append(append(before, down...), in) {
		if n := received[strconv.FormatUint(in.MessageID, 10)]; n != 1 {
			t.Errorf("message %d was handed on %d times, want once", in.MessageID, n)
		}
	}
	if len(received) != len(before)+len(down)+1 {
		t.Errorf("the plugin handed on %d messages, want %d: %v", len(received), len(before)+len(down)+1, received)
	}
	if extra := oc.takeAll("message", nil); len(extra) > 0 {
		t.Errorf("the plugin handed on more: %s", extra[0].Raw)
	}
	if got := a.sentTexts(f.sim.BotID); strings.Join(got, "|") != strings.Join(replies, "|") {
		t.Errorf("the owner got %q, want %q", got, replies)
	}
	if n := f.trapHits.Load(); n != 0 {
		t.Errorf("%d requests reached the CDN base the plugin builds URLs from", n)
	}
}
