package webui_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// The enrollment page as the operator and the bot's owner use it: the QR code's real
// lifetime and its refreshes, wrong codes, the owner's link, a double click, a worker
// restart and Temporal going away, each in headless Chromium against the dev server, the
// simulator and PostgreSQL.

// withLifetime sets the lifetime of the enrollments the UI starts.
func withLifetime(d time.Duration) option { return func(c *webui.Config) { c.Lifetime = d } }

// qrSerial is the serial of the QR image the page shows once it has loaded (0 before).
func (tb *tab) qrShown(serial int) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf("QR code %d is shown", serial), fmt.Sprintf(
		`(() => { const i = document.getElementById("qr"), b = document.getElementById("qr-box"); return !!i && !!b && !b.hidden && i.getAttribute("data-serial") === "%d" && i.complete && i.naturalWidth >= 100; })()`, serial))
}

func (tb *tab) attr(sel, name string) string {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).getAttribute(%q) || ""`, sel, name)))
	if err != nil {
		tb.t.Fatal(err)
	}
	return v
}

func (tb *tab) eval(js string) bool {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		tb.t.Fatal(err)
	}
	return v
}

// docScreenshot saves the page as docs/NAME when ILINKFLOW_DOCS_SCREENSHOTS is set (the
// screenshots of docs/web-ui.md are made this way).
func (tb *tab) docScreenshot(name string) {
	tb.t.Helper()
	if os.Getenv("ILINKFLOW_DOCS_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// The page states the real remaining lifetime of the QR code; an expired QR code is
// replaced by a new one, shown at once, DefaultQRRefreshes times; then the enrollment
// ends expired and the page offers a new one.
func TestBrowserAnExpiredQRCodeIsReplacedUntilTheLimitThenTheOperatorStartsAgain(t *testing.T) {
	t.Parallel()
	s := start(t, withLifetime(10*time.Minute))
	tb := newTab(t)
	tb.login(s.ui.URL)
	offer := tb.startEnrollment()
	tb.qrShown(1)
	qrExp, err := time.Parse(time.RFC3339, tb.attr("#qr-expiry", "data-expires-at"))
	if err != nil {
		t.Fatalf("the page states no QR expiry: %v", err)
	}
	st := s.state(offer)
	if !qrExp.Equal(st.QRExpiresAt.Truncate(time.Second)) || st.QRExpiresAt.After(st.ExpiresAt) {
		t.Fatalf("the page says the QR code expires at %v, the workflow %v (enrollment %v)", qrExp, st.QRExpiresAt, st.ExpiresAt)
	}
	if left := time.Until(qrExp); left > 2*time.Minute+time.Second || left < time.Minute {
		t.Fatalf("the QR code is said to live %v more: iLink's live about two minutes", left)
	}
	tb.waitFor("the QR countdown runs", `/^[0-9]+:[0-9]{2}$/.test(document.getElementById("qr-expires-in").textContent)`)
	tb.docScreenshot("web-ui.png")

	for serial := 2; serial <= 4; serial++ {
		if _, err := s.ctl.ExpireQR(s.ctx, s.qrOf(offer).QRCode); err != nil {
			t.Fatal(err)
		}
		tb.qrShown(serial)
		tb.waitFor("the page says the QR code was replaced", `document.getElementById("hint").textContent.includes("replaced with a new one")`)
	}
	if _, err := s.ctl.ExpireQR(s.ctx, s.qrOf(offer).QRCode); err != nil {
		t.Fatal(err)
	}
	tb.waitStatus("expired")
	tb.waitFor("a new enrollment is offered", `!document.getElementById("retry-form").hidden && document.getElementById("qr-box").hidden`)
	if !tb.eval(`document.getElementById("hint").classList.contains("problem")`) {
		t.Error("the expiry is not shown as a problem")
	}
	tb.do("start again", chromedp.Click(chromedp.CSS("#retry")))
	tb.qrShown(1)
	url, err := chromedp.Run(tb.ctx, chromedp.Location())
	if err != nil || strings.HasSuffix(url, offer) || !strings.Contains(url, "/enroll/qo_") {
		t.Fatalf("after the retry the page is %s (%v)", url, err)
	}
}

// state queries a running enrollment.
func (s *system) state(offer string) wfapi.EnrollmentState {
	s.t.Helper()
	v, err := s.tc.QueryWorkflow(s.ctx, wfapi.EnrollmentID(offer), "", wfapi.QueryEnrollmentState)
	if err != nil {
		s.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := v.Get(&st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// A wrong verification code is said to be wrong, with the attempts left, in the look of an
// error; the message after sending a code is a success's; the right code then enrolls.
func TestBrowserAWrongCodeSaysSoWithTheAttemptsLeftThenTheRightOneEnrolls(t *testing.T) {
	t.Parallel()
	s := start(t)
	tb := newTab(t)
	tb.login(s.ui.URL)
	offer := tb.startEnrollment()
	qr := s.qrOf(offer)
	if _, err := s.ctl.ScanQR(s.ctx, qr.QRCode, "o9cq8wrong@im.wechat"); err != nil {
		t.Fatal(err)
	}
	info, err := s.ctl.RequireVerifyCode(s.ctx, qr.QRCode, "")
	if err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the code is asked for", `!document.getElementById("code-form").hidden`)
	wrong := "1" + info.VerifyCode
	tb.do("enter a wrong code",
		chromedp.SendKeys(chromedp.CSS("#code"), wrong),
		chromedp.Click(chromedp.CSS("#send-code")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if !tb.eval(`document.getElementById("flash").classList.contains("flash-ok")`) {
		t.Error("sending a code is not shown as a success")
	}
	tb.waitFor("the page says the code was wrong", `document.getElementById("hint").textContent.includes("That code was wrong. 2 attempts left.")`)
	if !tb.eval(`document.getElementById("hint").classList.contains("problem") && !document.getElementById("code-form").hidden`) {
		t.Error("the wrong code is not shown as a problem with the form open again")
	}
	tb.do("enter the right code",
		chromedp.SendKeys(chromedp.CSS("#code"), info.VerifyCode),
		chromedp.Click(chromedp.CSS("#send-code")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	s.eventually("the owner confirms", 30*time.Second, func() (bool, error) {
		_, err := s.ctl.ConfirmQR(s.ctx, qr.QRCode)
		return err == nil, err
	})
	tb.waitStatus("confirmed")
	if res := s.result(offer); res.Status != "confirmed" || res.WrongCodes != 1 {
		t.Fatalf("the workflow ended %+v", res)
	}
}

// ownerLink makes the link for the bot's owner on the enrollment page and returns it.
func (tb *tab) ownerLink() string {
	tb.t.Helper()
	tb.do("make the owner's link",
		chromedp.Click(chromedp.CSS("#make-owner-link")),
		chromedp.WaitVisible(chromedp.CSS("#owner-link")),
	)
	link := tb.attr("#owner-link", "value")
	if !strings.Contains(link, "/o/") {
		tb.t.Fatalf("owner link %q", link)
	}
	return link
}

// newPhoneTab is a tab of its own browser (no cookie of another tab) at a phone's size.
func newPhoneTab(t *testing.T) *tab {
	tb := newTab(t)
	tb.do("phone size", chromedp.EmulateViewport(390, 844))
	return tb
}

// The operator's link opens the enrollment for the bot's owner without the operator's
// token: in Chinese and plain words, the QR code within a phone's screen, the code form
// with the attempts left; it opens no other page, and it expires with the enrollment.
func TestBrowserTheOwnerLinkOpensItsEnrollmentOnlyInChineseAndExpires(t *testing.T) {
	t.Parallel()
	s := start(t, withLifetime(8*time.Minute))
	op := newTab(t)
	op.login(s.ui.URL)
	offer := op.startEnrollment()
	link := op.ownerLink()

	owner := newPhoneTab(t)
	owner.do("open the link", chromedp.Navigate(link))
	owner.qrShown(1)
	status := owner.text("#status")
	if status != "等待扫码" || owner.attr("html", "lang") != "zh-CN" {
		t.Fatalf("the owner's page says %q (lang %q)", status, owner.attr("html", "lang"))
	}
	if !owner.eval(`document.getElementById("qr").getBoundingClientRect().bottom <= window.innerHeight && document.getElementById("qr").getBoundingClientRect().right <= window.innerWidth`) {
		t.Error("the QR code does not fit a 390x844 screen without scrolling")
	}
	owner.docScreenshot("web-ui-owner.png")
	for _, word := range []string{"wait", "scaned", "need_verifycode", "qo_", "ilk_"} {
		if strings.Contains(owner.text("body"), word) {
			t.Errorf("the owner's page shows %q", word)
		}
	}

	// The owner scans; iLink asks for the code; a wrong one is said in Chinese.
	qr := s.qrOf(offer)
	if _, err := s.ctl.ScanQR(s.ctx, qr.QRCode, "o9cq8owner@im.wechat"); err != nil {
		t.Fatal(err)
	}
	owner.waitFor("the scan is shown", `document.getElementById("status").textContent === "已扫码，请在手机上确认登录"`)
	info, err := s.ctl.RequireVerifyCode(s.ctx, qr.QRCode, "")
	if err != nil {
		t.Fatal(err)
	}
	owner.waitFor("the code is asked for", `!document.getElementById("code-form").hidden`)
	owner.do("a wrong code",
		chromedp.SendKeys(chromedp.CSS("#code"), "1"+info.VerifyCode),
		chromedp.Click(chromedp.CSS("#send-code")),
	)
	owner.waitFor("the wrong code is said", `document.getElementById("hint").textContent === "验证码不对，还可以再试 2 次。"`)

	// The link opens nothing else: the operator's pages ask for the operator's login.
	for _, p := range []string{"/accounts", "/enroll", "/enroll/" + offer} {
		owner.do("open "+p, chromedp.Navigate(s.ui.URL+p), chromedp.WaitVisible(chromedp.CSS("#token")))
	}
	// English is a click away.
	owner.do("back to the link in English", chromedp.Navigate(link+"?lang=en"), chromedp.WaitVisible(chromedp.CSS("#status")))
	if txt := owner.text("#status"); txt != "WeChat shows a number: type it below" {
		t.Errorf("the English page says %q", txt)
	}

	// The link expires with the enrollment.
	var linkExp time.Time
	if err := s.pool.QueryRow(s.ctx, `SELECT expires_at FROM webui_owner_links`).Scan(&linkExp); err != nil {
		t.Fatal(err)
	}
	if st := s.state(offer); linkExp.After(st.ExpiresAt) || st.ExpiresAt.Sub(linkExp) >= time.Second {
		t.Fatalf("the link expires at %v, the enrollment at %v", linkExp, st.ExpiresAt)
	}
	if _, err := s.pool.Exec(s.ctx, `UPDATE webui_owner_links SET created_at = created_at - interval '1 hour', expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	owner.do("open the expired link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#error")))
	if txt := owner.text("#error"); !strings.Contains(txt, "链接无效或已过期") {
		t.Fatalf("the expired link says %q", txt)
	}
}

// The start form submitted twice 120 ms apart (a double click), over a network slow enough
// that the first's answer comes after the second submission (both are handled), starts
// one enrollment: the form's submission names its workflow, and the second start finds
// the first.
func TestBrowserADoubleClickStartsOneEnrollment(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := start(t, func(c *webui.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	tb := newTab(t)
	tb.login(s.ui.URL)
	tb.do("open the start page", chromedp.Navigate(s.ui.URL+"/enroll"), chromedp.WaitVisible(chromedp.CSS("#start-enrollment")))
	s.slowPosts.Store(int64(3 * time.Second))
	// The first submission is the form's data posted as the browser posts it, the second a
	// click 120 ms later: a browser may drop a second click's submission while the first's
	// navigation is pending (seen on a busy machine), which would leave the server's rule
	// unexercised; a posted form and a click always both arrive.
	tb.do("double submission", chromedp.Evaluate[chromedp.Void](
		`(() => { const f = document.getElementById("start-form"), b = document.getElementById("start-enrollment");
		  fetch(f.action, {method: "POST", body: new URLSearchParams(new FormData(f)), credentials: "same-origin"});
		  setTimeout(() => b.click(), 120); })()`))
	tb.qrShown(1)
	s.eventually("the second click reached the server", 30*time.Second, func() (bool, error) {
		return strings.Count(logs.String(), "webui: enrollment started")+strings.Count(logs.String(), "webui: the form started its enrollment already") >= 2, nil
	})
	if n := strings.Count(logs.String(), "webui: enrollment started"); n != 1 {
		t.Fatalf("%d enrollments were started", n)
	}
	s.eventually("one Enrollment workflow is listed", 30*time.Second, func() (bool, error) {
		res, err := s.tc.CountWorkflow(s.ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowType = 'Enrollment'"})
		if err != nil {
			return false, err
		}
		if res.GetCount() > 1 {
			return false, fmt.Errorf("%d Enrollment workflows", res.GetCount())
		}
		return res.GetCount() == 1, nil
	})
}

// A worker restart (the worker stops as on SIGTERM and a new one starts with a new web UI:
// nothing in either's memory survives) keeps the operator logged in and the enrollment
// page live, its expiry and the QR code's still shown.
func TestBrowserAWorkerRestartKeepsTheOperatorLoggedInAndTheEnrollmentsExpiry(t *testing.T) {
	t.Parallel()
	s := start(t)
	tb := newTab(t)
	tb.login(s.ui.URL)
	offer := tb.startEnrollment()
	s.restartWorker()
	if _, err := s.ctl.ScanQR(s.ctx, s.qrOf(offer).QRCode, "o9cq8restart@im.wechat"); err != nil {
		t.Fatal(err)
	}
	tb.waitStatus("scaned")
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#enrollment")))
	if tb.text("#expires-at") == "" || tb.mustBeHidden("#expiry") {
		t.Fatal("after the restart the page shows no expiry")
	}
	tb.waitFor("the QR countdown runs", `/^[0-9]+:[0-9]{2}$/.test(document.getElementById("qr-expires-in").textContent)`)
	tb.do("the accounts page", chromedp.Navigate(s.ui.URL+"/accounts"), chromedp.WaitVisible(chromedp.CSS("#new-enrollment")))
}

// With Temporal unreachable the pages answer at once that they cannot reach it, and the
// live page says the connection is lost until Temporal is back, then goes on by itself.
func TestBrowserTemporalStoppedIsSaidClearlyAndThePageRecoversWithoutAReload(t *testing.T) {
	t.Parallel()
	s := start(t)
	proxy, err := tcpproxy.New(s.dev.HostPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	tc, err := client.DialContext(context.Background(), client.Options{HostPort: proxy.Addr(), Namespace: s.ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	s.restartUI(func(c *webui.Config) { c.Temporal, c.Timeout = tc, time.Second })

	tb := newTab(t)
	tb.login(s.ui.URL)
	offer := tb.startEnrollment()
	b := newBrowser(t, s.ui.URL)
	b.login()

	proxy.Cut()
	cut := time.Now()
	tb.waitFor("the connection is said lost", `!document.getElementById("conn").hidden`)
	t.Logf("the live page said the connection was lost %v after Temporal was cut off", time.Since(cut))
	began := time.Now()
	r := b.get("/enroll/" + offer)
	took := time.Since(began)
	if r.status != 503 || !strings.Contains(r.body, "Cannot reach Temporal") {
		t.Fatalf("with Temporal away the page answers %d: %s", r.status, r.body)
	}
	if took > 3*time.Second {
		t.Errorf("the page took %v to say it cannot reach Temporal", took)
	}
	t.Logf("with Temporal away the page answered in %v", took)

	proxy.Restore()
	tb.waitFor("the connection is back", `document.getElementById("conn").hidden`)
	if _, err := s.ctl.ScanQR(s.ctx, s.qrOf(offer).QRCode, "o9cq8outage@im.wechat"); err != nil {
		t.Fatal(err)
	}
	tb.waitStatus("scaned")
}
