package ilinksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// newQR calls get_bot_qrcode (POST with local_token_list, or GET when tokens is nil).
func (e *env) newQR(tokens []string) (qrcode, img string) {
	e.t.Helper()
	method, body := http.MethodGet, []byte(nil)
	if tokens != nil {
		method = http.MethodPost
		body, _ = json.Marshal(map[string]any{"local_token_list": tokens})
	}
	status, _, out, err := e.raw(e.ctx, method, "/ilink/bot/get_bot_qrcode?bot_type=3", "", body)
	if err != nil || status != http.StatusOK {
		e.t.Fatalf("get_bot_qrcode: %d %v %s", status, err, out)
	}
	m := decodeMap(e.t, out)
	qrcode, _ = m["qrcode"].(string)
	img, _ = m["qrcode_img_content"].(string)
	return qrcode, img
}

// qrStatus polls get_qrcode_status once.
func (e *env) qrStatus(qrcode, verify string) map[string]any {
	e.t.Helper()
	path := "/ilink/bot/get_qrcode_status?qrcode=" + url.QueryEscape(qrcode)
	if verify != "" {
		path += "&verify_code=" + url.QueryEscape(verify)
	}
	status, _, out, err := e.raw(e.ctx, http.MethodGet, path, "", nil)
	if err != nil || status != http.StatusOK {
		e.t.Fatalf("get_qrcode_status: %d %v %s", status, err, out)
	}
	return decodeMap(e.t, out)
}

func (e *env) wantStatus(qrcode, verify, want string) map[string]any {
	e.t.Helper()
	m := e.qrStatus(qrcode, verify)
	if m["status"] != want {
		e.t.Fatalf("status %v, want %s (%v)", m["status"], want, m)
	}
	return m
}

func TestQRLoginWaitScanedConfirmedIssuesCredentials(t *testing.T) {
	e := newEnv(t, nil)
	qr, img := e.newQR([]string{})
	if !strings.HasPrefix(img, "https://liteapp.weixin.qq.com/q/") {
		t.Fatalf("qrcode_img_content %q is not a URL to render", img)
	}
	e.wantStatus(qr, "", QRWait)
	if _, err := e.ctl.ScanQR(e.ctx, qr, ""); err != nil {
		t.Fatal(err)
	}
	e.wantStatus(qr, "", QRScaned)
	info, err := e.ctl.ConfirmQR(e.ctx, qr)
	if err != nil {
		t.Fatal(err)
	}
	m := e.wantStatus(qr, "", QRConfirmed)
	botID, _ := m["ilink_bot_id"].(string)
	tok, _ := m["bot_token"].(string)
	if !strings.HasSuffix(botID, "@im.bot") || len(botID) != 12+len("@im.bot") || !strings.HasPrefix(tok, botID+":") ||
		m["baseurl"] != e.srv.URL || m["ilink_user_id"] != info.UserID || !strings.HasSuffix(info.UserID, "@im.wechat") {
		t.Fatalf("confirmed: %v / %+v", m, info)
	}
	// The issued credentials work.
	if r := e.poll(tok, ""); num(r, "ret") != 0 {
		t.Fatalf("poll with new token: %v", r)
	}
}

func TestQRVerifyCodeWrongAgainThenBlocked(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.VerifyMaxWrong = 3 })
	qr, _ := e.newQR(nil)
	info, err := e.ctl.RequireVerifyCode(e.ctx, qr, "4711")
	if err != nil || info.VerifyCode != "4711" {
		t.Fatalf("require verify: %+v %v", info, err)
	}
	e.wantStatus(qr, "", QRNeedVerifyCode)
	e.wantStatus(qr, "1", QRNeedVerifyCode)
	e.wantStatus(qr, "2", QRNeedVerifyCode)
	e.wantStatus(qr, "3", QRVerifyBlocked)
	e.wantStatus(qr, "4711", QRVerifyBlocked) // blocked for good: fetch a new QR
	if _, err := e.ctl.ConfirmQR(e.ctx, qr); err == nil {
		t.Fatal("confirm after verify_code_blocked succeeded")
	}
}

func TestQRVerifyCodeCorrectAnswersScanedThenConfirms(t *testing.T) {
	e := newEnv(t, nil)
	qr, _ := e.newQR(nil)
	if _, err := e.ctl.ScanQR(e.ctx, qr, "o9cq8user@im.wechat"); err != nil {
		t.Fatal(err)
	}
	info, err := e.ctl.RequireVerifyCode(e.ctx, qr, "")
	if err != nil || len(info.VerifyCode) != 6 {
		t.Fatalf("generated code: %+v %v", info, err)
	}
	if _, err := e.ctl.ConfirmQR(e.ctx, qr); err == nil {
		t.Fatal("confirm before the code was typed succeeded")
	}
	e.wantStatus(qr, "000000x", QRNeedVerifyCode)
	e.wantStatus(qr, info.VerifyCode, QRScaned)
	if _, err := e.ctl.ConfirmQR(e.ctx, qr); err != nil {
		t.Fatal(err)
	}
	m := e.wantStatus(qr, "", QRConfirmed)
	if m["ilink_user_id"] != "o9cq8user@im.wechat" {
		t.Fatalf("confirmed: %v", m)
	}
}

func TestQRExpiresAfterTTLOnSimClock(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QRTTL = 120 * time.Second })
	qr, _ := e.newQR(nil)
	e.advance(119 * time.Second)
	e.wantStatus(qr, "", QRWait)
	e.advance(time.Second)
	e.wantStatus(qr, "", QRExpired)
	if _, err := e.ctl.ScanQR(e.ctx, qr, ""); err == nil {
		t.Fatal("scan of an expired QR succeeded")
	}
	// Scripted expiry.
	qr2, _ := e.newQR(nil)
	if _, err := e.ctl.ExpireQR(e.ctx, qr2); err != nil {
		t.Fatal(err)
	}
	e.wantStatus(qr2, "", QRExpired)
}

func TestQRRedirectAnnouncesHostOnceThenPollsContinue(t *testing.T) {
	e := newEnv(t, nil)
	qr, _ := e.newQR(nil)
	if _, err := e.ctl.RedirectQR(e.ctx, qr, "idc2.example.test"); err != nil {
		t.Fatal(err)
	}
	m := e.wantStatus(qr, "", QRRedirect)
	if m["redirect_host"] != "idc2.example.test" {
		t.Fatalf("redirect: %v", m)
	}
	e.wantStatus(qr, "", QRScaned)
	if _, err := e.ctl.ConfirmQR(e.ctx, qr); err != nil {
		t.Fatal(err)
	}
	e.wantStatus(qr, "", QRConfirmed)

	// Without a host, the polling request's own host is announced.
	qr2, _ := e.newQR(nil)
	if _, err := e.ctl.RedirectQR(e.ctx, qr2, ""); err != nil {
		t.Fatal(err)
	}
	m = e.wantStatus(qr2, "", QRRedirect)
	if m["redirect_host"] != strings.TrimPrefix(e.srv.URL, "http://") {
		t.Fatalf("default redirect host: %v", m)
	}
}

func TestQRBindedRedirectWhenLocalTokenBelongsToScanner(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	qr, _ := e.newQR([]string{"stale-token", b.Token})
	info, err := e.ctl.ScanQR(e.ctx, qr, b.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != QRBindedRedirect || info.Bot == nil || info.Bot.BotID != b.BotID {
		t.Fatalf("scan: %+v", info)
	}
	m := e.wantStatus(qr, "", QRBindedRedirect)
	if _, has := m["bot_token"]; has {
		t.Fatalf("binded_redirect must not issue a token: %v", m)
	}
	// The existing bot keeps working.
	if r := e.poll(b.Token, ""); num(r, "ret") != 0 {
		t.Fatalf("poll: %v", r)
	}
	// Another user's scan with the same list is a fresh login.
	qr2, _ := e.newQR([]string{b.Token})
	if info, _ := e.ctl.ScanQR(e.ctx, qr2, ""); info.Status != QRScaned {
		t.Fatalf("other user's scan: %+v", info)
	}
}

func TestSecondBindingIssuesNewBotAndKillsPreviousWithErrcode14(t *testing.T) {
	e := newEnv(t, nil)
	login := func(user string) map[string]any {
		qr, _ := e.newQR([]string{})
		if _, err := e.ctl.ScanQR(e.ctx, qr, user); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ctl.ConfirmQR(e.ctx, qr); err != nil {
			t.Fatal(err)
		}
		return e.wantStatus(qr, "", QRConfirmed)
	}
	user := "o9cq8abcdefghijklmnopqrstuvw@im.wechat"
	first := login(user)
	second := login(user)
	if first["ilink_bot_id"] == second["ilink_bot_id"] || first["bot_token"] == second["bot_token"] {
		t.Fatalf("second binding reused credentials: %v %v", first, second)
	}
	oldTok, _ := first["bot_token"].(string)
	newTok, _ := second["bot_token"].(string)
	if r := e.poll(oldTok, ""); num(r, "errcode") != -14 {
		t.Fatalf("old bot getupdates: %v", r)
	}
	b := BotInfo{Token: oldTok}
	if r := e.send(b, user, "", "x"); num(r, "errcode") != -14 {
		t.Fatalf("old bot sendmessage: %v", r)
	}
	if r := e.poll(newTok, ""); num(r, "ret") != 0 || isStale(r) {
		t.Fatalf("new bot: %v", r)
	}
}

func TestSecondBindingWakesHeldPollOfPreviousBotWithErrcode14(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute })
	b := e.bot()
	done := e.pollAsync(b.Token, "")
	waitForPollers(t, e, b.BotID, 1)
	qr, _ := e.newQR(nil)
	if _, err := e.ctl.ScanQR(e.ctx, qr, b.Owner); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.ConfirmQR(e.ctx, qr); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if num(r, "errcode") != -14 {
			t.Fatalf("held poll: %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held poll did not end when its bot died")
	}
}

func TestGetBotQRCodeNeedsBotType3(t *testing.T) {
	e := newEnv(t, nil)
	status, _, out, err := e.raw(e.ctx, http.MethodGet, "/ilink/bot/get_bot_qrcode?bot_type=1", "", nil)
	if err != nil || status != http.StatusOK || num(decodeMap(t, out), "ret") != -2 {
		t.Fatalf("bot_type=1: %d %v %s", status, err, out)
	}
	// Unknown qrcode: expired, so clients fetch a new one.
	e.wantStatus("nope", "", QRExpired)
}

func TestQRPollHoldReturnsOnStatusChange(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QRPollHold = time.Minute })
	qr, _ := e.newQR(nil)
	done := make(chan map[string]any, 1)
	go func() {
		_, _, out, err := e.raw(e.ctx, http.MethodGet, "/ilink/bot/get_qrcode_status?qrcode="+url.QueryEscape(qr), "", nil)
		m := map[string]any{"error": fmt.Sprint(err)}
		if err == nil {
			_ = json.Unmarshal(out, &m)
		}
		done <- m
	}()
	waitForRequest(t, e, "get_qrcode_status", 1)
	if _, err := e.ctl.ScanQR(e.ctx, qr, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r["status"] != QRScaned {
			t.Fatalf("held status poll: %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held status poll did not return on scan")
	}
}
