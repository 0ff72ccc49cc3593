package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// The official iLink client (the OpenClaw Weixin plugin's own code, run by
// openclaw_driver_test.go) against the iLink simulator, checked on the simulator's side.

// TestTheOfficialClientSpeaksToTheSimulator runs the official plugin's client code against
// the simulator: QR login, notifystart, the long poll, a text exchange, an image each way,
// typing, a crash and restart that resumes from the saved cursor, and the session expiry
// (errcode -14), checking on the simulator's side what the client sent.
func TestTheOfficialClientSpeaksToTheSimulator(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = 2 * time.Second // a quiet getupdates ends after 2 s...
	cfg.LongPollTimeoutMS = 10000      // ...well inside the client timeout the plugin takes from longpolling_timeout_ms
	cfg.ThrottleBurst = 0              // the test sends faster than iLink's burst detector allows
	sim := ilinksim.New(cfg)
	srv := httptest.NewUnstartedServer(sim.Handler())
	srv.Config.ConnContext = ilinksim.ConnContext // a killed client's held poll is not outstanding
	srv.Start()
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	cdnBase := srv.URL + "/c2c"

	oc := startOpenclaw(ctx, t, t.TempDir())
	t.Logf("official client: %s %s on node %s", openclawPackage, oc.ready.PluginVersion, oc.ready.Node)

	// QR login: the plugin polls its fixed host, which the harness routes to the simulator.
	login := oc.loginByQR(ctx, srv.URL+"/", simQRApprover(ctl, ""))
	if login.Status != ilinksim.QRConfirmed || login.BotID == "" || login.BotToken == "" {
		t.Fatalf("login: %+v", login)
	}
	if got := login.Statuses[len(login.Statuses)-1]; got != ilinksim.QRConfirmed {
		t.Fatalf("QR statuses %v", login.Statuses)
	}
	t.Logf("QR login: statuses %v, bot %s, user %s", login.Statuses, login.BotID, login.UserID)
	if login.BaseURL != srv.URL {
		t.Fatalf("baseurl %q, want the simulator's %q", login.BaseURL, srv.URL)
	}
	st, err := ctl.BotState(ctx, login.BotID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Token != login.BotToken || st.Owner != login.UserID {
		t.Fatalf("the simulator's bot %+v, the plugin's login %+v", st.BotInfo, login)
	}
	openclawCheckQRRequests(ctx, t, ctl)

	// notifystart, then the monitor loop, as the plugin's gateway.startAccount does.
	bot := openclawBot{BaseURL: login.BaseURL, Token: login.BotToken, BotID: login.BotID, CDNBaseURL: cdnBase}
	if ret, errText := oc.notify(ctx, bot, "start"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystart: ret %v, error %q", ret, errText)
	}
	polling := oc.poll(ctx, bot)
	if polling.Cursor != "" {
		t.Fatalf("a fresh state directory held cursor %q", polling.Cursor)
	}
	if st, err = ctl.BotState(ctx, login.BotID); err != nil || !st.NotifyStarted || !st.Online {
		t.Fatalf("after notifystart the simulator has %+v (%v)", st, err)
	}

	// A text message in, a text reply out.
	in, err := ctl.InjectText(ctx, login.BotID, "", "你好, ilinkflow")
	if err != nil {
		t.Fatal(err)
	}
	m := oc.nextMessage(ctx)
	if m.MessageID != strconv.FormatUint(in.MessageID, 10) || m.ContextToken != in.ContextToken ||
		m.From != login.UserID || m.text() != "你好, ilinkflow" || m.Dispatch.Body != "你好, ilinkflow" {
		t.Fatalf("the plugin received %s\nthe simulator queued %s", m.Raw, in.Message)
	}
	if cur := openclawSyncCursor(t, polling.SyncFile); cur == "" {
		t.Fatal("the plugin saved no get_updates_buf after a batch")
	}
	reply := oc.sendText(ctx, m.From, m.ContextToken, "收到: 你好")
	if !reply.ok() {
		t.Fatalf("reply: %+v", reply)
	}
	sentLog := openclawSentSince(ctx, t, ctl, login.BotID, 0, 1)
	if s := sentLog[0]; s.Outcome != ilinksim.OutcomeAccepted || s.Text != "收到: 你好" || s.ClientID != reply.ClientID ||
		s.ContextToken != m.ContextToken || strconv.FormatUint(s.MessageID, 10) != reply.MessageID {
		t.Fatalf("the simulator recorded %+v for the plugin's send %+v", s, reply)
	}
	if !regexp.MustCompile(`^openclaw-weixin:\d{13}-[0-9a-f]{8}$`).MatchString(reply.ClientID) {
		t.Fatalf("client_id %q", reply.ClientID)
	}

	// An image in: the plugin downloads and decrypts it itself, and on request.
	inData := openclawRandomBytes(5000)
	in, err = ctl.Inject(ctx, login.BotID, ilinksim.InjectRequest{Kind: ilinksim.KindImage, Data: inData})
	if err != nil {
		t.Fatal(err)
	}
	m = oc.nextMessage(ctx)
	wantSum := sha256.Sum256(inData)
	want := hex.EncodeToString(wantSum[:])
	img := m.item(2)
	if m.MessageID != strconv.FormatUint(in.MessageID, 10) || img == nil {
		t.Fatalf("the plugin received %s\nthe simulator queued %s", m.Raw, in.Message)
	}
	if m.Dispatch.MediaSHA256 != want || m.Dispatch.MediaBytes != len(inData) {
		t.Fatalf("the plugin's inbound media: %+v, want sha256 %s of %d bytes", m.Dispatch, want, len(inData))
	}
	if d := oc.download(ctx, img, cdnBase); d.Ev != "downloaded" || d.SHA256 != want || d.Bytes != len(inData) {
		t.Fatalf("download: %+v, want sha256 %s of %d bytes", d, want, len(inData))
	}

	// An image out: the simulator keeps the ciphertext and decrypts it with the announced key.
	outData := openclawRandomBytes(7000)
	photo := filepath.Join(t.TempDir(), "photo.png")
	if err := os.WriteFile(photo, outData, 0o600); err != nil {
		t.Fatal(err)
	}
	sentImg := oc.sendImage(ctx, m.From, m.ContextToken, photo)
	if !sentImg.ok() {
		t.Fatalf("send image: %+v", sentImg)
	}
	sentLog = openclawSentSince(ctx, t, ctl, login.BotID, sentLog[len(sentLog)-1].Index, 1)
	if s := sentLog[0]; s.Outcome != ilinksim.OutcomeAccepted || !slices.Equal(s.ItemTypes, []int{2}) || s.ClientID != sentImg.ClientID {
		t.Fatalf("the simulator recorded %+v for the plugin's image %+v", s, sentImg)
	}
	openclawCheckSentImage(ctx, t, ctl, sentLog[0], outData)

	// Typing: getconfig for the ticket, then sendtyping.
	typing := oc.typing(ctx, m.From, m.ContextToken)
	if typing.Ev != "typing" || typing.Ticket == "" || typing.Status != 1 {
		t.Fatalf("typing: %+v", typing)
	}
	if p := openclawPeer(ctx, t, ctl, login.BotID, m.From); p.Typing != 1 || p.TypingTicket != typing.Ticket {
		t.Fatalf("the simulator's peer after typing: %+v", p)
	}

	// notifystop, as the plugin's gateway.stopAccount does.
	if ret, errText := oc.notify(ctx, bot, "stop"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystop: ret %v, error %q", ret, errText)
	}
	if st, err = ctl.BotState(ctx, login.BotID); err != nil || st.Online {
		t.Fatalf("after notifystop the simulator has %+v (%v)", st, err)
	}

	// A crash in the middle of a long poll; the restarted client resumes from its cursor.
	saved := openclawSyncCursor(t, polling.SyncFile)
	oc.kill(ctx)
	requestsBefore, err := ctl.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oc.restart(ctx)
	if ret, errText := oc.notify(ctx, bot, "start"); errText != "" || ret == nil || *ret != 0 {
		t.Fatalf("notifystart after the restart: ret %v, error %q", ret, errText)
	}
	polling = oc.poll(ctx, bot)
	if polling.Cursor != saved {
		t.Fatalf("the restarted plugin loaded cursor %q, it had saved %q", polling.Cursor, saved)
	}
	in, err = ctl.InjectText(ctx, login.BotID, "", "after the crash")
	if err != nil {
		t.Fatal(err)
	}
	if m = oc.nextMessage(ctx); m.MessageID != strconv.FormatUint(in.MessageID, 10) || m.text() != "after the crash" {
		t.Fatalf("after the restart the plugin received %s\nthe simulator queued %s", m.Raw, in.Message)
	}
	openclawCheckResumedCursor(ctx, t, ctl, len(requestsBefore), saved)

	// The session expires: the plugin pauses the account for an hour and refuses to send.
	if err := ctl.KillBot(ctx, login.BotID); err != nil {
		t.Fatal(err)
	}
	expired := oc.nextSessionExpired(ctx)
	if expired.Errcode != -14 || !expired.Paused || expired.PauseMS < 59*60*1000 {
		t.Fatalf("the plugin's -14 handling: %+v", expired)
	}
	t.Logf("errcode -14: the plugin paused account %s for %s", expired.AccountID, time.Duration(expired.PauseMS)*time.Millisecond)
	refused := oc.sendText(ctx, m.From, m.ContextToken, "while paused")
	if refused.ok() || refused.Errcode == nil || *refused.Errcode != -14 || len(refused.Responses) != 0 {
		t.Fatalf("a send while the account is paused: %+v", refused)
	}
	oc.stopPoll(ctx)

	openclawCheckNoProblems(ctx, t, ctl)
}

// openclawRandomBytes returns n bytes of noise.
func openclawRandomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(mrand.Uint32())
	}
	return b
}

// openclawSentSince returns the simulator's send log of botID after index after, which
// must hold exactly n entries.
func openclawSentSince(ctx context.Context, t *testing.T, ctl *ilinksim.Control, botID string, after, n int) []ilinksim.SentMessage {
	t.Helper()
	sent, err := ctl.SentAfter(ctx, botID, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != n {
		t.Fatalf("the simulator recorded %d sends after #%d, want %d: %+v", len(sent), after, n, sent)
	}
	return sent
}

// openclawCheckSentImage checks an image the plugin sent: the item's shape and the CDN
// object it points at, which must decrypt to want.
func openclawCheckSentImage(ctx context.Context, t *testing.T, ctl *ilinksim.Control, s ilinksim.SentMessage, want []byte) {
	t.Helper()
	var msg struct {
		Items []struct {
			Type  int `json:"type"`
			Image struct {
				Media struct {
					EncryptQueryParam string `json:"encrypt_query_param"`
					AESKey            string `json:"aes_key"`
					EncryptType       int    `json:"encrypt_type"`
				} `json:"media"`
				MidSize int `json:"mid_size"`
			} `json:"image_item"`
		} `json:"item_list"`
	}
	if err := json.Unmarshal(s.Msg, &msg); err != nil || len(msg.Items) != 1 {
		t.Fatalf("the plugin's image message %s: %v", s.Msg, err)
	}
	media := msg.Items[0].Image.Media
	// aes_key: base64 of the key's 32 hex characters (protocol §4.5.2).
	key, err := base64.StdEncoding.DecodeString(media.AESKey)
	if err != nil || len(key) != 32 {
		t.Fatalf("aes_key %q: %d bytes (%v), want base64 of 32 hex characters", media.AESKey, len(key), err)
	}
	if _, err := hex.DecodeString(string(key)); err != nil {
		t.Fatalf("aes_key %q does not carry a hex key: %v", media.AESKey, err)
	}
	obj, err := ctl.CDNObject(ctx, media.EncryptQueryParam)
	if err != nil {
		t.Fatalf("the CDN object of the plugin's image: %v", err)
	}
	if obj.Source != "upload" || obj.MediaType != 1 || obj.AESKeyHex != string(key) || !bytes.Equal(obj.Plaintext, want) ||
		msg.Items[0].Image.MidSize != len(obj.Ciphertext) || media.EncryptType != 1 {
		t.Fatalf("the plugin's image: item %s, CDN object source %q type %d key %q, %d ciphertext bytes, plaintext equal: %v",
			s.Msg, obj.Source, obj.MediaType, obj.AESKeyHex, len(obj.Ciphertext), bytes.Equal(obj.Plaintext, want))
	}
}

// openclawPeer returns the simulator's bookkeeping of (botID, user).
func openclawPeer(ctx context.Context, t *testing.T, ctl *ilinksim.Control, botID, user string) ilinksim.PeerState {
	t.Helper()
	st, err := ctl.BotState(ctx, botID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Peers {
		if p.UserID == user {
			return p
		}
	}
	t.Fatalf("the simulator has no peer %s of bot %s", user, botID)
	return ilinksim.PeerState{}
}

// openclawCheckQRRequests checks the QR login requests as the simulator received them:
// get_bot_qrcode by POST with local_token_list, get_qrcode_status by GET, both with the
// plugin's iLink-App headers.
func openclawCheckQRRequests(ctx context.Context, t *testing.T, ctl *ilinksim.Control) {
	t.Helper()
	reqs, err := ctl.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var qr, status int
	for _, r := range reqs {
		switch r.Endpoint {
		case "get_bot_qrcode":
			qr++
			var body struct {
				Tokens *[]string `json:"local_token_list"`
			}
			if r.Method != "POST" || r.RawQuery != "bot_type=3" || json.Unmarshal(r.Body, &body) != nil || body.Tokens == nil {
				t.Fatalf("get_bot_qrcode: %s ?%s %s", r.Method, r.RawQuery, r.Body)
			}
		case "get_qrcode_status":
			status++
			if r.Method != "GET" {
				t.Fatalf("get_qrcode_status by %s", r.Method)
			}
		default:
			continue
		}
		h := http.Header(r.Header)
		if id, v := h.Get("iLink-App-Id"), h.Get("iLink-App-ClientVersion"); id != "bot" || v != "132105" {
			t.Fatalf("%s with iLink-App-Id %q, iLink-App-ClientVersion %q", r.Endpoint, id, v)
		}
	}
	if qr != 1 || status == 0 {
		t.Fatalf("%d get_bot_qrcode and %d get_qrcode_status requests", qr, status)
	}
}

// openclawCheckResumedCursor checks that the first getupdates after request #seen carried
// the cursor the plugin had saved before it was killed.
func openclawCheckResumedCursor(ctx context.Context, t *testing.T, ctl *ilinksim.Control, seen int, saved string) {
	t.Helper()
	reqs, err := ctl.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs[seen:] {
		if r.Endpoint != "getupdates" {
			continue
		}
		var body struct {
			Buf *string `json:"get_updates_buf"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.Buf == nil || *body.Buf != saved {
			t.Fatalf("the restarted plugin's first getupdates: %s (%v), want get_updates_buf %q", r.Body, err, saved)
		}
		return
	}
	t.Fatal("no getupdates after the restart")
}

// openclawCheckNoProblems checks that the simulator found nothing to object to in any
// request of the official client (headers, base_info, one getupdates at a time).
func openclawCheckNoProblems(ctx context.Context, t *testing.T, ctl *ilinksim.Control) {
	t.Helper()
	reqs, err := ctl.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, r := range reqs {
		for _, p := range r.Problems {
			problems = append(problems, fmt.Sprintf("#%d %s %s: %s", r.Seq, r.Method, r.Endpoint, p))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("the simulator objected to the official client's requests:\n%s", strings.Join(problems, "\n"))
	}
	if len(reqs) == 0 {
		t.Fatal("the simulator recorded no requests")
	}
}

// simQRApprover approves a QR login on the simulator by its control API, as user ("" = a
// new user).
func simQRApprover(ctl *ilinksim.Control, user string) qrApprover {
	return func(ctx context.Context, qr openclawQR) error {
		if _, err := ctl.ScanQR(ctx, qr.QRCode, user); err != nil {
			return err
		}
		_, err := ctl.ConfirmQR(ctx, qr.QRCode)
		return err
	}
}
