package ilink_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// qrLogin starts a QR login with a token-less client.
func (e *simEnv) qrLogin(localTokens ...ilink.Secret) (*ilink.Client, *ilink.QRCode) {
	e.t.Helper()
	login := e.newClient("", nil)
	qr, err := login.GetBotQRCode(e.ctx, localTokens)
	if err != nil {
		e.t.Fatal(err)
	}
	return login, qr
}

// qrPoll polls the login once.
func (e *simEnv) qrPoll(c *ilink.Client, r ilink.QRStatusRequest) *ilink.QRCodeStatus {
	e.t.Helper()
	st, err := c.GetQRCodeStatus(e.ctx, r)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestSimQRLoginWaitScanedConfirmed walks the happy path and checks the
// QR request shapes.
func TestSimQRLoginWaitScanedConfirmed(t *testing.T) {
	e := newSim(t, nil, nil)
	login, qr := e.qrLogin(ilink.Secret("older-token"))
	if qr.QRCode == "" || !strings.HasPrefix(qr.ImageContent, "https://liteapp.weixin.qq.com/q/") {
		t.Fatalf("%+v", qr)
	}
	req := ilink.QRStatusRequest{QRCode: qr.QRCode}
	if st := e.qrPoll(login, req); st.Status != ilink.QRWait {
		t.Fatalf("status %s", st.Status)
	}
	if _, err := e.ctl.ScanQR(e.ctx, qr.QRCode, ""); err != nil {
		t.Fatal(err)
	}
	if st := e.qrPoll(login, req); st.Status != ilink.QRScanned {
		t.Fatalf("status %s", st.Status)
	}
	info, err := e.ctl.ConfirmQR(e.ctx, qr.QRCode)
	if err != nil {
		t.Fatal(err)
	}
	st := e.qrPoll(login, req)
	if st.Status != ilink.QRConfirmed || st.BotToken.Reveal() != info.Bot.Token || st.ILinkBotID != info.Bot.BotID ||
		st.BaseURL != info.Bot.BaseURL || st.ILinkUserID != info.Bot.Owner || st.ILinkUserID == st.ILinkBotID {
		t.Fatalf("confirmed %+v vs %+v", st, info.Bot)
	}
	// The new credentials work against the returned base URL.
	bot := e.newClient(st.BotToken, func(c *ilink.Config) { c.BaseURL = st.BaseURL })
	if err := bot.NotifyStart(e.ctx); err != nil {
		t.Fatal(err)
	}

	// Request shapes: get_bot_qrcode is a POST with local_token_list only.
	gq := e.requests("get_bot_qrcode")[0]
	if gq.Method != http.MethodPost || gq.RawQuery != "bot_type=3" || string(gq.Body) != `{"local_token_list":["older-token"]}` ||
		header(t, gq, "Authorization") != "" || header(t, gq, "AuthorizationType") != "ilink_bot_token" ||
		header(t, gq, "iLink-App-Id") != "bot" || header(t, gq, "iLink-App-ClientVersion") != "132105" || len(gq.Problems) != 0 {
		t.Errorf("get_bot_qrcode request %+v", gq)
	}
	checkUIN(t, gq)
	for _, r := range e.requests("get_qrcode_status") {
		q, _ := url.ParseQuery(r.RawQuery)
		if r.Method != http.MethodGet || q.Get("qrcode") != qr.QRCode || q.Has("verify_code") || len(r.Problems) != 0 ||
			header(t, r, "Authorization") != "" || header(t, r, "X-WECHAT-UIN") != "" ||
			header(t, r, "iLink-App-Id") != "bot" || header(t, r, "iLink-App-ClientVersion") != "132105" {
			t.Errorf("get_qrcode_status request %+v", r)
		}
	}
}

// TestSimQRNeedVerifyCodeThenCorrectCodeIsScaned checks the verify-code
// path, including a wrong code.
func TestSimQRNeedVerifyCodeThenCorrectCodeIsScaned(t *testing.T) {
	e := newSim(t, nil, nil)
	login, qr := e.qrLogin()
	if _, err := e.ctl.RequireVerifyCode(e.ctx, qr.QRCode, "424242"); err != nil {
		t.Fatal(err)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode}); st.Status != ilink.QRNeedVerifyCode {
		t.Fatalf("status %s", st.Status)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode, VerifyCode: "000000"}); st.Status != ilink.QRNeedVerifyCode {
		t.Fatalf("wrong code: status %s", st.Status)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode, VerifyCode: "424242"}); st.Status != ilink.QRScanned {
		t.Fatalf("right code: status %s", st.Status)
	}
	reqs := e.requests("get_qrcode_status")
	q, _ := url.ParseQuery(reqs[len(reqs)-1].RawQuery)
	if q.Get("verify_code") != "424242" || q.Get("qrcode") != qr.QRCode {
		t.Fatalf("query %s", reqs[len(reqs)-1].RawQuery)
	}
	if _, err := e.ctl.ConfirmQR(e.ctx, qr.QRCode); err != nil {
		t.Fatal(err)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode}); st.Status != ilink.QRConfirmed {
		t.Fatalf("status %s", st.Status)
	}
}

// TestSimQRVerifyCodeBlockedAfterTooManyWrongCodes checks the wrong-code
// limit.
func TestSimQRVerifyCodeBlockedAfterTooManyWrongCodes(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.VerifyMaxWrong = 3 }, nil)
	login, qr := e.qrLogin()
	if _, err := e.ctl.RequireVerifyCode(e.ctx, qr.QRCode, "111111"); err != nil {
		t.Fatal(err)
	}
	want := []ilink.QRStatus{ilink.QRNeedVerifyCode, ilink.QRNeedVerifyCode, ilink.QRVerifyCodeBlocked}
	for i, w := range want {
		if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode, VerifyCode: "99999" + string(rune('0'+i))}); st.Status != w {
			t.Fatalf("wrong code %d: status %s, want %s", i+1, st.Status, w)
		}
	}
}

// TestSimQRExpiresAfterItsTTLOnTheSimClock checks expiry by the clock and
// by the control API.
func TestSimQRExpiresAfterItsTTLOnTheSimClock(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.QRTTL = 120 * time.Second }, nil)
	login, qr := e.qrLogin()
	e.advance(119 * time.Second)
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode}); st.Status != ilink.QRWait {
		t.Fatalf("before TTL: %s", st.Status)
	}
	e.advance(time.Second)
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode}); st.Status != ilink.QRExpired {
		t.Fatalf("after TTL: %s", st.Status)
	}
	_, qr2 := e.qrLogin()
	if _, err := e.ctl.ExpireQR(e.ctx, qr2.QRCode); err != nil {
		t.Fatal(err)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr2.QRCode}); st.Status != ilink.QRExpired {
		t.Fatalf("forced expiry: %s", st.Status)
	}
}

// TestSimQRScannedButRedirectIsFollowedOnTheRedirectHost serves the same
// simulator on a second listener (another "data centre") and checks that the
// next poll goes there.
func TestSimQRScannedButRedirectIsFollowedOnTheRedirectHost(t *testing.T) {
	e := newSim(t, nil, nil)
	other := httptest.NewServer(e.sim.Handler())
	defer other.Close()
	otherHost := strings.TrimPrefix(other.URL, "http://")
	login, qr := e.qrLogin()
	if _, err := e.ctl.RedirectQR(e.ctx, qr.QRCode, otherHost); err != nil {
		t.Fatal(err)
	}
	st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode})
	if st.Status != ilink.QRScannedRedirect || st.RedirectHost != otherHost {
		t.Fatalf("%+v", st)
	}
	st = e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode, Host: st.RedirectHost})
	if st.Status != ilink.QRScanned {
		t.Fatalf("after redirect: %s", st.Status)
	}
	reqs := e.requests("get_qrcode_status")
	if last := reqs[len(reqs)-1]; last.Host != otherHost {
		t.Fatalf("poll went to %s, want %s", last.Host, otherHost)
	}
	if _, err := e.ctl.ConfirmQR(e.ctx, qr.QRCode); err != nil {
		t.Fatal(err)
	}
	if st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode, Host: otherHost}); st.Status != ilink.QRConfirmed {
		t.Fatalf("confirm on the redirect host: %s", st.Status)
	}
}

// TestSimQRBindedRedirectWhenLocalTokenListMatches checks binded_redirect:
// no new token is issued.
func TestSimQRBindedRedirectWhenLocalTokenListMatches(t *testing.T) {
	e := newSim(t, nil, nil)
	login, qr := e.qrLogin(ilink.Secret("unrelated"), ilink.Secret(e.bot.Token))
	if _, err := e.ctl.ScanQR(e.ctx, qr.QRCode, e.bot.Owner); err != nil {
		t.Fatal(err)
	}
	st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode})
	if st.Status != ilink.QRBindedRedirect || st.BotToken != "" {
		t.Fatalf("%+v", st)
	}
	var body struct {
		LocalTokenList []string `json:"local_token_list"`
	}
	if err := json.Unmarshal(e.requests("get_bot_qrcode")[0].Body, &body); err != nil ||
		len(body.LocalTokenList) != 2 || body.LocalTokenList[1] != e.bot.Token {
		t.Fatalf("local_token_list %v %v", body.LocalTokenList, err)
	}
	// The existing bot keeps working.
	if err := e.client.NotifyStart(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSimFreshBindingKillsTheScannersPreviousBot checks that a confirmed
// login by the same user makes the old token stale (-14).
func TestSimFreshBindingKillsTheScannersPreviousBot(t *testing.T) {
	e := newSim(t, nil, nil)
	login, qr := e.qrLogin()
	if _, err := e.ctl.ScanQR(e.ctx, qr.QRCode, e.bot.Owner); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.ConfirmQR(e.ctx, qr.QRCode); err != nil {
		t.Fatal(err)
	}
	st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode})
	if st.Status != ilink.QRConfirmed || st.ILinkBotID == e.bot.BotID || st.BotToken.Reveal() == e.bot.Token {
		t.Fatalf("%+v", st)
	}
	_, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{})
	if !ilink.IsStaleToken(err) {
		t.Fatalf("old bot: %v", err)
	}
}

// TestSimQRPollHitByTheClientTimeoutIsWait checks that a held status poll
// cut off by the client's own deadline reads as "wait".
func TestSimQRPollHitByTheClientTimeoutIsWait(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.QRPollHold = time.Minute }, nil)
	login := e.newClient("", func(c *ilink.Config) { c.QRStatusTimeout = 50 * time.Millisecond })
	qr, err := login.GetBotQRCode(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := e.qrPoll(login, ilink.QRStatusRequest{QRCode: qr.QRCode})
	if st.Status != ilink.QRWait || !st.TimedOut {
		t.Fatalf("%+v", st)
	}
}
