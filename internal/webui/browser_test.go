package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// The browser tests drive real headless Chromium (Debian's chromium package) against the
// dev server, PostgreSQL, the simulator and an in-process worker, on a phone-sized window.

// chromiumPath finds the browser; the tests fail, not skip, without one.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is needed for the web UI's browser tests and was not found on PATH (chromium, chromium-browser) " +
		"nor in $CHROMIUM: install Debian's package with `apt-get install -y chromium`")
	return ""
}

// tab is one headless Chromium tab of a test. On failure it saves a screenshot of the
// page and logs its path.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(412, 915), // a phone screen
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start headless Chromium: %v", err)
	}
	tb := &tab{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			tb.screenshot()
		}
	})
	return tb
}

// screenshot saves the page to a file that outlives the test (t.TempDir is removed when
// the test ends): $ILINKFLOW_SCREENSHOT_DIR, or a new directory under the system's
// temporary directory.
func (tb *tab) screenshot() {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot: %v", err)
		return
	}
	dir := os.Getenv("ILINKFLOW_SCREENSHOT_DIR")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "webui-screenshot-"); err != nil {
			tb.t.Logf("screenshot: %v", err)
			return
		}
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(tb.t.Name())+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Logf("screenshot: %v", err)
		return
	}
	tb.t.Logf("screenshot of the page at the failure: %s", path)
}

func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		url, _ := chromedp.Run(tb.ctx, chromedp.Location())
		tb.t.Fatalf("%s (at %s): %v", what, url, err)
	}
}

// waitFor polls a JavaScript predicate on the page.
// A page the predicate was polled on may go away (a form's answer replaces it): the
// predicate is then polled on the next page.
func (tb *tab) waitFor(what, predicate string) {
	tb.t.Helper()
	pollPage[chromedp.Void](tb, what, predicate)
}

// pollPage evaluates expression in the page until it is truthy and returns its value; an
// evaluation cut by a navigation (the page's context destroyed) is tried again.
func pollPage[T any](tb *tab, what, expression string) T {
	tb.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := chromedp.Run(tb.ctx, chromedp.Poll[T](expression, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return v
		}
		if !strings.Contains(err.Error(), "(-32000)") || time.Now().After(deadline) {
			url, _ := chromedp.Run(tb.ctx, chromedp.Location())
			tb.t.Fatalf("%s (at %s): %v", what, url, err)
		}
	}
}

// text returns the text of the first node sel matches once there is one, read in the same
// evaluation that finds the node: a node found first and read after could be gone by
// then, replaced by the page's re-render.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	// A one-element array, truthy even when the text is empty; a node not laid out (hidden)
	// reads as empty, as chromedp.Text reads it.
	js := fmt.Sprintf(`(n => n ? [n.offsetWidth || n.offsetHeight || n.getClientRects().length ? n.innerText : ""] : null)(document.querySelector(%s))`, jsString(sel))
	got := pollPage[[]string](tb, "text of "+sel, js)
	if len(got) != 1 {
		tb.t.Fatalf("text of %s: %v", sel, got)
	}
	return strings.TrimSpace(got[0])
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// login opens the UI (which sends it to the login form) and logs in.
func (tb *tab) login(base string) {
	tb.t.Helper()
	tb.do("log in",
		chromedp.Navigate(base+"/accounts"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), operatorToken),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#new-enrollment")),
	)
	// The form shows before a long table below it is parsed: the page is read once whole.
	tb.waitFor("the accounts page loaded", `document.readyState === "complete"`)
}

// startEnrollment starts an enrollment from the accounts page and waits for its QR code
// to be shown (the image loaded); it returns the enrollment's offer id.
func (tb *tab) startEnrollment() string {
	tb.t.Helper()
	tb.do("start an enrollment",
		chromedp.Click(chromedp.CSS("#new-enrollment")),
		chromedp.WaitVisible(chromedp.CSS("#enrollment")),
	)
	tb.waitFor("the QR code is shown",
		`(() => { const i = document.getElementById("qr"); return !document.getElementById("qr-box").hidden && i.complete && i.naturalWidth >= 100; })()`)
	url, err := chromedp.Run(tb.ctx, chromedp.Location())
	if err != nil {
		tb.t.Fatal(err)
	}
	i := strings.LastIndex(url, "/enroll/")
	if i < 0 {
		tb.t.Fatalf("enrollment page at %s", url)
	}
	return url[i+len("/enroll/"):]
}

func (tb *tab) waitStatus(status string) {
	tb.t.Helper()
	tb.waitFor("status "+status, fmt.Sprintf(`document.getElementById("enrollment").getAttribute("data-status") === %q`, status))
}

// qrOf finds the simulator's QR session of an enrollment (the workflow's QR content is
// the session's image content).
func (s *system) qrOf(offer string) ilinksim.QRInfo {
	s.t.Helper()
	v, err := s.tc.QueryWorkflow(s.ctx, wfapi.EnrollmentID(offer), "", wfapi.QueryEnrollmentState)
	if err != nil {
		s.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := v.Get(&st); err != nil {
		s.t.Fatal(err)
	}
	sessions, err := s.ctl.QRSessions(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, q := range sessions {
		if q.ImgContent == st.QRContent {
			return q
		}
	}
	s.t.Fatalf("no simulator QR session shows %q", st.QRContent)
	return ilinksim.QRInfo{}
}

func (s *system) result(offer string) wfapi.EnrollmentState {
	s.t.Helper()
	var st wfapi.EnrollmentState
	if err := s.tc.GetWorkflow(s.ctx, wfapi.EnrollmentID(offer), "").Get(s.ctx, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

func TestBrowserOperatorEnrollsABotWithAVerificationCode(t *testing.T) {
	t.Parallel()
	s := start(t)
	tb := newTab(t)
	tb.login(s.ui.URL)
	if !strings.Contains(tb.text("main"), "No accounts yet") {
		t.Fatalf("accounts page before any enrollment: %q", tb.text("main"))
	}
	offer := tb.startEnrollment()
	if tb.text("#expires-at") == "" {
		t.Error("the enrollment page shows no expiry")
	}

	// The owner scans; iLink asks for the number WeChat shows.
	qr := s.qrOf(offer)
	if _, err := s.ctl.ScanQR(s.ctx, qr.QRCode, "o9cq8owner@im.wechat"); err != nil {
		t.Fatal(err)
	}
	info, err := s.ctl.RequireVerifyCode(s.ctx, qr.QRCode, "")
	if err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the verification code is asked for", `!document.getElementById("code-form").hidden`)
	tb.do("enter the verification code",
		chromedp.SendKeys(chromedp.CSS("#code"), info.VerifyCode),
		chromedp.Click(chromedp.CSS("#send-code")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	// The code reached iLink through the workflow's signal: the scan goes on; the owner
	// confirms on the phone.
	s.eventually("the owner confirms", 30*time.Second, func() (bool, error) {
		_, err := s.ctl.ConfirmQR(s.ctx, qr.QRCode)
		return err == nil, err
	})
	tb.waitStatus("confirmed")
	tb.waitFor("the account is shown", `!document.getElementById("result").hidden && !!document.getElementById("account-key")`)
	key := tb.text("#account-key")
	if res := s.result(offer); res.Status != "confirmed" || res.AccountKey != key {
		t.Fatalf("the page shows account %q, the workflow ended %+v", key, res)
	}
	if !tb.mustBeHidden("#qr-box") || !tb.mustBeHidden("#code-form") || !tb.mustBeHidden("#cancel-form") {
		t.Error("the QR code, the code form or Cancel is still shown after the confirmation")
	}

	// The account is listed, active; pausing it from the page goes through the operator's code.
	row := fmt.Sprintf(`li.account[data-account=%q]`, key)
	tb.do("open the accounts page",
		chromedp.Click(chromedp.CSS(`#result a[href$="/accounts"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if txt := tb.text(row); !strings.Contains(txt, vocab.AccountActive) {
		t.Fatalf("account row: %q", txt)
	}
	tb.do("pause the account",
		chromedp.Click(chromedp.CSS(row+" button.pause")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if txt := tb.text("#flash"); !strings.Contains(txt, key+" is now paused") {
		t.Errorf("after pause: %q", txt)
	}
	a, err := s.store.GetAccount(s.ctx, key)
	if err != nil || a.Status != vocab.AccountPaused {
		t.Fatalf("after pause: %+v %v", a, err)
	}
}

// mustBeHidden reports whether the element is hidden.
func (tb *tab) mustBeHidden(sel string) bool {
	tb.t.Helper()
	hidden, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).hidden`, sel)))
	if err != nil {
		tb.t.Fatal(err)
	}
	return hidden
}

func TestBrowserOperatorCancelsAnEnrollment(t *testing.T) {
	t.Parallel()
	s := start(t)
	tb := newTab(t)
	tb.login(s.ui.URL)
	offer := tb.startEnrollment()
	tb.do("cancel",
		chromedp.Click(chromedp.CSS("#cancel")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	tb.waitStatus("cancelled")
	tb.waitFor("the result is shown", `!document.getElementById("result").hidden && document.getElementById("qr-box").hidden`)
	if res := s.result(offer); res.Status != "cancelled" || res.AccountKey != "" {
		t.Fatalf("the workflow ended %+v", res)
	}
	if accounts, err := s.store.ListAccounts(s.ctx, ""); err != nil || len(accounts) != 0 {
		t.Fatalf("accounts after a cancelled enrollment: %v %v", accounts, err)
	}
}

// The accounts page shows each bot's route (its ROUTE entry) and changes it through its
// route forms: to an MCP agent chosen from the store's agents (a revoked one is marked),
// then to a webhook. The webhook's secret is sealed in the store and shows nowhere in the
// page, nor does the webhook's URL beyond its host.
func TestBrowserTheRouteColumnShowsTheRouteSetThroughTheFormButNeverTheWebhookSecret(t *testing.T) {
	t.Parallel()
	s := start(t)
	key := s.enrollDirectly("qo_00000000000000a1", "o9cq8routeowner@im.wechat").AccountKey
	now := time.Now()
	for _, name := range []string{"support", "retired"} {
		if _, err := s.store.CreateMCPAgent(s.ctx, now, name, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.store.RevokeMCPAgent(s.ctx, now, "retired", "test"); err != nil {
		t.Fatal(err)
	}
	const (
		hookURL = "https://agent.example/hooks/pathkey-7f3a9c?sig=querykey-51d2"
		secret  = "webhook-signing-secret-0f1e2d3c4b5a"
	)

	tb := newTab(t)
	tb.login(s.ui.URL)
	row := fmt.Sprintf(`li.account[data-account=%q]`, key)
	if got := tb.text(row + " dd.route"); got != "default" {
		t.Fatalf("route before any change: %q, want default", got)
	}
	revoked, err := chromedp.Run(tb.ctx, chromedp.TextContent(chromedp.CSS(row+` form.route-mcp option[value="retired"]`)))
	if err != nil || strings.TrimSpace(revoked) != "retired (revoked)" {
		t.Errorf("the revoked MCP agent's option: %q %v", revoked, err)
	}

	tb.do("route to the MCP agent",
		chromedp.Click(chromedp.CSS(row+" details.route-forms summary")),
		chromedp.SetValue(chromedp.CSS(row+" form.route-mcp select"), "support"),
		chromedp.Click(chromedp.CSS(row+" form.route-mcp button")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if got := tb.text(row + " dd.route"); got != "mcp (support)" {
		t.Fatalf("route after choosing the MCP agent: %q (flash %q)", got, tb.text("#flash"))
	}

	tb.do("route to the webhook",
		chromedp.Navigate(s.ui.URL+"/accounts"), // a page without the last flash
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+" details.route-forms summary")),
		chromedp.SendKeys(chromedp.CSS(row+" form.route-webhook input[name=webhook_url]"), hookURL),
		chromedp.SendKeys(chromedp.CSS(row+" form.route-webhook input[name=webhook_secret]"), secret),
		chromedp.Click(chromedp.CSS(row+" form.route-webhook button")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if got := tb.text(row + " dd.route"); got != "webhook (agent.example)" {
		t.Fatalf("route after setting the webhook: %q (flash %q)", got, tb.text("#flash"))
	}
	if flash := tb.text("#flash"); !strings.Contains(flash, key+" routes to webhook (agent.example)") {
		t.Errorf("flash after setting the webhook: %q", flash)
	}
	html, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, hookURL, "pathkey-7f3a9c", "querykey-51d2"} {
		if strings.Contains(html, leak) {
			t.Errorf("the accounts page holds %q", leak)
		}
	}

	// The store has the route, its secret sealed, and an audit of both changes by the web UI.
	r, found, err := s.store.GetRoute(s.ctx, key)
	if err != nil || !found || r.Kind != "webhook" || r.WebhookURL != hookURL || r.WebhookSecret.Reveal() != secret {
		t.Fatalf("stored route: found %v, kind %q, URL %q, secret matches %v, %v", found, r.Kind, r.WebhookURL, r.WebhookSecret.Reveal() == secret, err)
	}
	changes, err := s.store.ListRouteChanges(s.ctx, key)
	if err != nil || len(changes) != 2 {
		t.Fatalf("route changes: %+v %v", changes, err)
	}
	for i, want := range []string{"mcp", "webhook"} {
		if c := changes[i]; c.NewKind != want || c.ChangedBy != webui.RouteBy {
			t.Errorf("route change %d: %+v, want %s by %s", i, c, want, webui.RouteBy)
		}
	}
}

// The route forms route a bot to an iLink client chosen from the store's clients (a
// revoked one is marked) as to an MCP agent; given the code of a client's QR login (typed
// in any case), the same form approves that login for the bot: the route shows as "ilink
// (openclaw)", the client's next poll of the login collects a bot of this account, and the
// row's form is prefilled with the client afterwards.
func TestBrowserTheILinkRouteFormRoutesToAClientAndApprovesItsLoginByItsCode(t *testing.T) {
	t.Parallel()
	s := start(t)
	key := s.enrollDirectly("qo_00000000000000a3", "o9cq8ilinkowner@im.wechat").AccountKey
	now := time.Now()
	for _, name := range []string{"openclaw", "retired"} {
		if _, err := s.store.CreateILinkClient(s.ctx, now, name, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.store.RevokeILinkClient(s.ctx, now, "retired", "test"); err != nil {
		t.Fatal(err)
	}
	login, err := s.store.StartILinkLogin(s.ctx, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	tb := newTab(t)
	tb.login(s.ui.URL)
	row := fmt.Sprintf(`li.account[data-account=%q]`, key)
	revoked, err := chromedp.Run(tb.ctx, chromedp.TextContent(chromedp.CSS(row+` form.route-ilink option[value="retired"]`)))
	if err != nil || strings.TrimSpace(revoked) != "retired (revoked)" {
		t.Errorf("the revoked iLink client's option: %q %v", revoked, err)
	}
	tb.do("route to the iLink client with the login's code",
		chromedp.Click(chromedp.CSS(row+" details.route-forms summary")),
		chromedp.SetValue(chromedp.CSS(row+" form.route-ilink select"), "openclaw"),
		chromedp.SendKeys(chromedp.CSS(row+" form.route-ilink input[name=login_code]"), strings.ToLower(login.Code)),
		chromedp.Click(chromedp.CSS(row+" form.route-ilink button")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	if got := tb.text(row + " dd.route"); got != "ilink (openclaw)" {
		t.Fatalf("route after choosing the iLink client: %q (flash %q)", got, tb.text("#flash"))
	}
	if flash := tb.text("#flash"); !strings.Contains(flash, key+" routes to ilink (openclaw) from its next message; login "+login.Code+" approved") {
		t.Errorf("flash after the approval: %q", flash)
	}
	bot, err := s.store.PollILinkLogin(s.ctx, time.Now(), login.QRCode)
	if err != nil || bot.Status != store.ILinkLoginConfirmed || bot.AccountKey != key || bot.Client != "openclaw" {
		t.Fatalf("the client's poll of the approved login: %+v %v", bot, err)
	}
	changes, err := s.store.ListRouteChanges(s.ctx, key)
	if err != nil || len(changes) != 1 || changes[0].NewKind != vocab.RouteILink || changes[0].ChangedBy != webui.RouteBy {
		t.Fatalf("route changes: %+v %v", changes, err)
	}

	tb.do("the accounts page again",
		chromedp.Navigate(s.ui.URL+"/accounts"),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+" details.route-forms summary")),
	)
	tb.waitFor("the iLink form prefilled with the client", fmt.Sprintf(`document.querySelector(%s)?.value === "openclaw"`,
		jsString(row+" form.route-ilink select")))
}
