package webui_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// browser is a plain HTTP client of the UI that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(raw)}
}

func (b *browser) get(path string) response { return b.do(http.MethodGet, path, nil, nil) }

// sameOrigin is what a browser sends with a form of the page itself.
var sameOrigin = map[string]string{"Sec-Fetch-Site": "same-origin"}

func (b *browser) login() {
	b.t.Helper()
	r := b.do(http.MethodPost, "/login", url.Values{"token": {operatorToken}}, sameOrigin)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/accounts" {
		b.t.Fatalf("login: %d %s", r.status, r.body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func (b *browser) csrf() string {
	b.t.Helper()
	r := b.get("/accounts")
	m := csrfField.FindStringSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		b.t.Fatalf("no CSRF token on the accounts page: %d %s", r.status, r.body)
	}
	return m[1]
}

// fixture is a system with an enrolled account and a running enrollment.
type fixture struct {
	*system
	account string
	offer   string
	forms   []string // every POST form's path but login
}

func newFixture(t *testing.T, opts ...option) *fixture {
	s := start(t, opts...)
	acc := s.enrollDirectly("qo_0000000000000001", "o9cq8owner@im.wechat")
	offer := "qo_0000000000000002"
	if _, err := s.tc.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offer), TaskQueue: s.tq},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "test", Lifetime: wfapi.Duration(time.Minute), PollGap: wfapi.Duration(100 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	return &fixture{system: s, account: acc.AccountKey, offer: offer, forms: []string{
		"/logout", "/enroll", "/enroll/" + offer + "/code", "/enroll/" + offer + "/cancel",
		"/accounts/" + acc.AccountKey + "/pause", "/accounts/" + acc.AccountKey + "/resume", "/accounts/" + acc.AccountKey + "/remove",
		"/accounts/" + acc.AccountKey + "/route",
		"/accounts/" + acc.AccountKey + "/forget", "/accounts/" + acc.AccountKey + "/forget/confirm",
	}}
}

func (f *fixture) pages() []string {
	return []string{"/", "/accounts", "/enroll", "/enroll/" + f.offer}
}

func (f *fixture) apis() []string {
	return []string{"/enroll/" + f.offer + "/status", "/enroll/" + f.offer + "/qr.png"}
}

func (f *fixture) accountStatus() string {
	f.t.Helper()
	a, err := f.store.GetAccount(f.ctx, f.account)
	if err != nil {
		f.t.Fatal(err)
	}
	return a.Status
}

func (f *fixture) enrollmentRunning() bool {
	f.t.Helper()
	d, err := f.tc.DescribeWorkflow(f.ctx, wfapi.EnrollmentID(f.offer), "")
	if err != nil {
		f.t.Fatal(err)
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() == nil
}

func TestEveryPageAndFormRefusesAnUnauthenticatedRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, cookie := range []string{"", "forged-session-id"} {
		b := newBrowser(t, f.ui.URL)
		hdr := map[string]string{}
		if cookie != "" {
			hdr["Cookie"] = webui.SessionCookie + "=" + cookie
		}
		for _, p := range f.pages() {
			if r := b.do(http.MethodGet, p, nil, hdr); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next="+url.QueryEscape(p) {
				t.Errorf("GET %s (cookie %q): %d to %q, want a redirect to /login that comes back", p, cookie, r.status, r.header.Get("Location"))
			}
		}
		for _, p := range f.apis() {
			if r := b.do(http.MethodGet, p, nil, hdr); r.status != http.StatusUnauthorized {
				t.Errorf("GET %s (cookie %q): %d, want 401", p, cookie, r.status)
			}
		}
		for _, p := range f.forms {
			form := url.Values{"csrf": {"x"}, "code": {"123456"}, "for": {"1h"}}
			if r := b.do(http.MethodPost, p, form, hdr); r.status != http.StatusUnauthorized {
				t.Errorf("POST %s (cookie %q): %d, want 401", p, cookie, r.status)
			}
		}
	}
	if st := f.accountStatus(); st != vocab.AccountActive {
		t.Errorf("account is %s after refused requests", st)
	}
	if !f.enrollmentRunning() {
		t.Error("the enrollment ended after refused requests")
	}
	// The login page itself is open, and a wrong token is refused without a session.
	b := newBrowser(t, f.ui.URL)
	if r := b.get("/login"); r.status != http.StatusOK || !strings.Contains(r.body, `name="token"`) {
		t.Errorf("login page: %d", r.status)
	}
	r := b.do(http.MethodPost, "/login", url.Values{"token": {operatorToken + "x"}}, sameOrigin)
	if r.status != http.StatusUnauthorized || len(r.header.Values("Set-Cookie")) != 0 {
		t.Errorf("wrong token: %d, cookies %v", r.status, r.header.Values("Set-Cookie"))
	}
	if r := b.get("/accounts"); r.status != http.StatusSeeOther {
		t.Errorf("after a wrong token: %d", r.status)
	}
}

func TestAPostWithAMissingOrWrongCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := newBrowser(t, f.ui.URL)
	other.login()
	otherCSRF := other.csrf()
	b := newBrowser(t, f.ui.URL)
	b.login()
	good := b.csrf()
	for _, csrf := range []string{"", "wrong", otherCSRF, good + "x"} {
		for _, p := range f.forms {
			form := url.Values{"code": {"123456"}, "for": {"1h"}}
			if csrf != "" {
				form.Set("csrf", csrf)
			}
			if r := b.do(http.MethodPost, p, form, sameOrigin); r.status != http.StatusForbidden {
				t.Errorf("POST %s with CSRF %q: %d, want 403", p, csrf, r.status)
			}
		}
	}
	if st := f.accountStatus(); st != vocab.AccountActive {
		t.Errorf("account is %s after refused requests", st)
	}
	if !f.enrollmentRunning() {
		t.Error("the enrollment ended after refused requests")
	}
	// The session's own token works (the refusals were for the token alone).
	r := b.do(http.MethodPost, "/accounts/"+f.account+"/pause", url.Values{"csrf": {good}, "for": {"1h"}}, sameOrigin)
	if r.status != http.StatusSeeOther || f.accountStatus() != vocab.AccountPaused {
		t.Fatalf("pause with the right token: %d, account %s", r.status, f.accountStatus())
	}
	// Logging out ends the session: its cookie and token no longer work.
	if r := b.do(http.MethodPost, "/logout", url.Values{"csrf": {good}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	if r := b.get("/accounts"); r.status != http.StatusSeeOther {
		t.Errorf("after logout: %d", r.status)
	}
}

func TestACrossSitePostIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.ui.URL)
	b.login()
	csrf := b.csrf()
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://attacker.example"},
		{"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"},
	} {
		for _, p := range append([]string{"/login"}, f.forms...) {
			form := url.Values{"csrf": {csrf}, "code": {"123456"}, "for": {"1h"}, "token": {operatorToken}}
			if r := b.do(http.MethodPost, p, form, hdr); r.status != http.StatusForbidden {
				t.Errorf("POST %s with %v: %d, want 403", p, hdr, r.status)
			}
		}
	}
	if st := f.accountStatus(); st != vocab.AccountActive {
		t.Errorf("account is %s after refused requests", st)
	}
	if !f.enrollmentRunning() {
		t.Error("the enrollment ended after refused requests")
	}
	// The same form from the page's own origin is accepted.
	r := b.do(http.MethodPost, "/enroll/"+f.offer+"/cancel", url.Values{"csrf": {csrf}}, map[string]string{"Origin": f.ui.URL, "Sec-Fetch-Site": "same-origin"})
	if r.status != http.StatusSeeOther {
		t.Fatalf("same-origin cancel: %d %s", r.status, r.body)
	}
	f.eventually("enrollment cancelled", 30*time.Second, func() (bool, error) { return !f.enrollmentRunning(), nil })
}

func TestTheSessionCookieIsHttpOnlySameSiteStrictAndSecureWhenConfigured(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, secure := range []bool{false, true} {
		h, err := webui.New(webui.Config{Temporal: s.tc, TaskQueue: s.tq, Store: s.store, OperatorToken: tokenSecret(), Secure: secure})
		if err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, h)
		b := newBrowser(t, srv.URL)
		r := b.do(http.MethodPost, "/login", url.Values{"token": {operatorToken}}, sameOrigin)
		if r.status != http.StatusSeeOther {
			t.Fatalf("login: %d", r.status)
		}
		cookies := (&http.Response{Header: r.header}).Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies: %v", r.header.Values("Set-Cookie"))
		}
		c := cookies[0]
		if c.Name != webui.SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != secure || len(c.Value) < 32 || c.MaxAge <= 0 {
			t.Errorf("secure=%v: cookie %q", secure, r.header.Get("Set-Cookie"))
		}
		if strings.Contains(c.Value, operatorToken) {
			t.Error("the session cookie holds the operator token")
		}
	}
	// Too short a token is refused outright.
	if _, err := webui.New(webui.Config{Temporal: s.tc, Store: s.store}); err == nil {
		t.Error("New accepted an empty operator token")
	}
}

func TestNoBotTokenAppearsInAnyResponseBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	secret, err := f.store.GetAccountWithSecret(f.ctx, f.account)
	if err != nil {
		t.Fatal(err)
	}
	token := secret.BotToken.Reveal()
	_, tail, _ := strings.Cut(token, ":") // the part after the bot id
	if token == "" || len(tail) < 8 {
		t.Fatalf("bot token %d chars", len(token))
	}
	b := newBrowser(t, f.ui.URL)
	var bodies []response
	bodies = append(bodies, b.get("/login"))
	b.login()
	csrf := b.csrf()
	start := b.do(http.MethodPost, "/enroll", url.Values{"csrf": {csrf}, "submission": {"0123456789abcdefghijkl"}}, sameOrigin)
	if start.status != http.StatusSeeOther || !strings.HasPrefix(start.header.Get("Location"), "/enroll/qo_") {
		t.Fatalf("start an enrollment: %d %q", start.status, start.header.Get("Location"))
	}
	paths := append(f.pages(), f.apis()...)
	paths = append(paths, start.header.Get("Location"), start.header.Get("Location")+"/status", "/enroll/qo_ffffffffffffffff", "/nope",
		"/assets/app.css", "/assets/enroll.js")
	for _, p := range paths {
		r := b.get(p)
		bodies = append(bodies, r)
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: security headers %v", p, r.header)
		}
	}
	if r := b.get("/accounts"); !strings.Contains(r.body, f.account) || !strings.Contains(r.body, vocab.AccountActive) {
		t.Errorf("the accounts page does not list %s", f.account)
	}
	for _, verb := range []string{"pause", "resume", "remove"} {
		r := b.do(http.MethodPost, "/accounts/"+f.account+"/"+verb, url.Values{"csrf": {csrf}, "for": {"1h"}}, sameOrigin)
		bodies = append(bodies, r, b.get("/accounts"))
	}
	for i, r := range bodies {
		for _, s := range []string{token, tail, operatorToken} {
			if strings.Contains(r.body, s) {
				t.Errorf("response %d (%d) holds a secret", i, r.status)
			}
		}
	}
	if st := f.accountStatus(); st != vocab.AccountDisabled {
		t.Errorf("after pause, resume, remove: %s", st)
	}
}

func TestTheHandlerWorksUnderAPrefix(t *testing.T) {
	t.Parallel()
	s := start(t)
	h, err := webui.New(webui.Config{Temporal: s.tc, TaskQueue: s.tq, Store: s.store, OperatorToken: tokenSecret(), Prefix: "/ui"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	mux.HandleFunc("/other", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "other") })
	srv := newServer(t, mux)
	b := newBrowser(t, srv.URL)
	if r := b.get("/ui/accounts"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next=%2Fui%2Faccounts" {
		t.Fatalf("unauthenticated: %d to %q", r.status, r.header.Get("Location"))
	}
	r := b.do(http.MethodPost, "/ui/login", url.Values{"token": {operatorToken}}, sameOrigin)
	cookies := (&http.Response{Header: r.header}).Cookies()
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/accounts" || len(cookies) != 1 || cookies[0].Path != "/ui/" {
		t.Fatalf("login: %d to %q, cookies %v", r.status, r.header.Get("Location"), r.header.Values("Set-Cookie"))
	}
	page := b.get("/ui/accounts")
	if page.status != http.StatusOK || !strings.Contains(page.body, `href="/ui/assets/app.css"`) || !strings.Contains(page.body, `action="/ui/enroll"`) {
		t.Fatalf("accounts page under /ui: %d %s", page.status, page.body)
	}
	if css := b.get("/ui/assets/app.css"); css.status != http.StatusOK || !strings.Contains(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %q", css.status, css.header.Get("Content-Type"))
	}
	// A verification code is refused while iLink asks for none.
	csrf := csrfField.FindStringSubmatch(page.body)[1]
	start := b.do(http.MethodPost, "/ui/enroll", url.Values{"csrf": {csrf}, "submission": {"0123456789abcdefghijkl"}}, sameOrigin)
	loc := start.header.Get("Location")
	if start.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/enroll/qo_") {
		t.Fatalf("start: %d %q", start.status, loc)
	}
	if r := b.do(http.MethodPost, loc+"/code", url.Values{"csrf": {csrf}, "code": {"123456"}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("code: %d", r.status)
	}
	if r := b.get(loc); !strings.Contains(r.body, "not asking for a verification code") {
		t.Errorf("a code sent while none is asked for: %s", r.body)
	}
}

func TestRepeatedWrongTokensAreThrottled(t *testing.T) {
	t.Parallel()
	s := start(t)
	h, err := webui.New(webui.Config{Temporal: s.tc, TaskQueue: s.tq, Store: s.store, OperatorToken: tokenSecret(), FailedLoginEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, newServer(t, h).URL)
	for i := range webui.LoginBurst {
		if r := b.do(http.MethodPost, "/login", url.Values{"token": {"wrong-token-" + operatorToken}}, sameOrigin); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, r.status)
		}
	}
	// The next attempt, right or wrong, waits (one more wrong token an hour).
	for _, tok := range []string{"wrong-token", operatorToken} {
		if r := b.do(http.MethodPost, "/login", url.Values{"token": {tok}}, sameOrigin); r.status != http.StatusTooManyRequests || len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("after %d wrong tokens: %d %v", webui.LoginBurst, r.status, r.header.Values("Set-Cookie"))
		}
	}
}

// routeOf reads an account's route from the store (found false: the default route) and
// how many route changes it has in the audit.
func (f *fixture) routeOf() (store.Route, bool, int) {
	f.t.Helper()
	r, found, err := f.store.GetRoute(f.ctx, f.account)
	if err != nil {
		f.t.Fatal(err)
	}
	changes, err := f.store.ListRouteChanges(f.ctx, f.account)
	if err != nil {
		f.t.Fatal(err)
	}
	return r, found, len(changes)
}

func TestARouteChangeWithoutTheOperatorSessionOrTheCSRFTokenIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	if _, err := f.store.CreateMCPAgent(f.ctx, now, "support", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CreateILinkClient(f.ctx, now, "openclaw", "test"); err != nil {
		t.Fatal(err)
	}
	login, err := f.store.StartILinkLogin(f.ctx, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before, err := f.store.SetRoute(f.ctx, now, store.RouteInput{AccountKey: f.account, Kind: vocab.RouteWorkflow,
		WorkflowType: "Before", TaskQueue: "agents", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "refused-webhook-secret-9a8b7c6d5e4f"
	path := "/accounts/" + f.account + "/route"
	routes := []url.Values{
		{"kind": {"webhook"}, "webhook_url": {"https://attacker.example/hook"}, "webhook_secret": {secret}},
		{"kind": {"workflow"}, "workflow_type": {"Evil"}, "task_queue": {"evil"}},
		{"kind": {"mcp"}, "mcp_agent": {"support"}},
		{"kind": {"ilink"}, "ilink_client": {"openclaw"}},
		{"kind": {"ilink"}, "ilink_client": {"openclaw"}, "login_code": {login.Code}},
		{"kind": {"echo"}},
		{"kind": {"default"}},
	}
	var bodies []response
	post := func(b *browser, what, csrf string, hdr map[string]string, want int) {
		t.Helper()
		for _, form := range routes {
			form := maps.Clone(form)
			if csrf != "" {
				form.Set("csrf", csrf)
			}
			r := b.do(http.MethodPost, path, form, hdr)
			bodies = append(bodies, r)
			if r.status != want {
				t.Errorf("POST %s kind %s (%s): %d, want %d", path, form.Get("kind"), what, r.status, want)
			}
		}
	}

	// No operator session: no cookie, a forged one, a logged-out one.
	post(newBrowser(t, f.ui.URL), "no session cookie", "x", sameOrigin, http.StatusUnauthorized)
	post(newBrowser(t, f.ui.URL), "a forged session cookie", "x", map[string]string{"Sec-Fetch-Site": "same-origin", "Cookie": webui.SessionCookie + "=forged-session-id"}, http.StatusUnauthorized)
	gone := newBrowser(t, f.ui.URL)
	gone.login()
	goneCSRF := gone.csrf()
	base, err := url.Parse(f.ui.URL)
	if err != nil {
		t.Fatal(err)
	}
	cookies := gone.hc.Jar.Cookies(base)
	if len(cookies) != 1 || cookies[0].Name != webui.SessionCookie {
		t.Fatalf("session cookies: %v", cookies)
	}
	if r := gone.do(http.MethodPost, "/logout", url.Values{"csrf": {goneCSRF}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", r.status)
	}
	post(gone, "a logged-out session", goneCSRF, map[string]string{"Sec-Fetch-Site": "same-origin", "Cookie": webui.SessionCookie + "=" + cookies[0].Value}, http.StatusUnauthorized)

	// A session without its CSRF token: none, a wrong one, another session's; or its own
	// token from another site.
	other := newBrowser(t, f.ui.URL)
	other.login()
	otherCSRF := other.csrf()
	b := newBrowser(t, f.ui.URL)
	b.login()
	good := b.csrf()
	for what, csrf := range map[string]string{"no CSRF token": "", "a wrong CSRF token": "wrong",
		"another session's CSRF token": otherCSRF, "the CSRF token with a suffix": good + "x"} {
		post(b, what, csrf, sameOrigin, http.StatusForbidden)
	}
	post(b, "cross-site", good, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden)
	post(b, "from another origin", good, map[string]string{"Origin": "https://attacker.example"}, http.StatusForbidden)

	r, found, changes := f.routeOf()
	if !found || r.Kind != vocab.RouteWorkflow || r.WorkflowType != "Before" || r.Version != before.Version || changes != 1 {
		t.Fatalf("after refused route changes: found %v, route %s %s version %d (was %d), %d audited changes (want 1)",
			found, r.Kind, r.WorkflowType, r.Version, before.Version, changes)
	}
	if waiting, err := f.store.ListILinkLogins(f.ctx, time.Now()); err != nil || len(waiting) != 1 || waiting[0].Code != login.Code {
		t.Fatalf("after refused approvals the login does not wait: %+v %v", waiting, err)
	}
	bodies = append(bodies, b.get("/accounts"))
	for i, r := range bodies {
		if strings.Contains(r.body, secret) {
			t.Errorf("response %d (%d) holds the webhook secret", i, r.status)
		}
	}

	// The session's own token from the page's own origin works (the refusals were for it).
	if r := b.do(http.MethodPost, path, url.Values{"csrf": {good}, "kind": {"echo"}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("echo route with the right token: %d %s", r.status, r.body)
	}
	if r, found, changes := f.routeOf(); !found || r.Kind != vocab.RouteEcho || r.UpdatedBy != webui.RouteBy || changes != 2 {
		t.Fatalf("after the echo route: found %v, %s by %q, %d changes", found, r.Kind, r.UpdatedBy, changes)
	}
}
