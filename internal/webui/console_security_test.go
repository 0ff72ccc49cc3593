package webui_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// login posts a token to the handler from a client address (the connection's peer).
func loginFrom(h http.Handler, addr, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.RemoteAddr = addr
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Wrong tokens are throttled per client address, and the ceiling over all addresses never
// holds back an address that sent none: 100 wrong tokens from one address never stop the
// correct token from another.
func TestAHundredWrongTokensFromOneAddressNeverStopTheCorrectTokenFromAnother(t *testing.T) {
	t.Parallel()
	s := start(t)
	h, err := webui.New(s.uiCfg)
	if err != nil {
		t.Fatal(err)
	}
	throttled := 0
	for i := range 100 {
		rec := loginFrom(h, "203.0.113.7:40000", "wrong-token-"+operatorToken)
		switch rec.Code {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			throttled++
		default:
			t.Fatalf("wrong token %d: %d", i, rec.Code)
		}
	}
	if throttled != 100-webui.LoginBurst {
		t.Fatalf("%d of 100 wrong tokens were throttled, want all but the burst of %d", throttled, webui.LoginBurst)
	}
	if rec := loginFrom(h, "203.0.113.7:40001", operatorToken); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the throttled address got %d with the right token", rec.Code)
	}
	rec := loginFrom(h, "198.51.100.20:50000", operatorToken)
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
		t.Fatalf("the operator's address got %d", rec.Code)
	}
	// Behind a proxy that names the client in X-Forwarded-For, the client's address counts.
	cfg := s.uiCfg
	cfg.ClientAddressHeader = "X-Forwarded-For"
	h, err = webui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token=wrong-"+operatorToken))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		req.RemoteAddr = "10.0.0.1:1234" // the proxy
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token="+operatorToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", "198.51.100.20")
	req.RemoteAddr = "10.0.0.1:1234"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("behind the proxy the operator got %d", rec.Code)
	}
}

// A login survives a worker restart and works on another worker: the session is in the
// database, not in a worker's memory; a logout ends it everywhere.
func TestASessionWorksOnAnotherWorkerAndALogoutEndsItEverywhere(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := newBrowser(t, s.ui.URL)
	b.login()
	other, err := webui.New(s.uiCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, other)
	b2 := newBrowser(t, srv.URL)
	b2.hc.Jar = b.hc.Jar
	if r := b2.get("/accounts"); r.status != http.StatusOK {
		t.Fatalf("the session on another worker: %d", r.status)
	}
	b.do(http.MethodPost, "/logout", url.Values{"csrf": {b.csrf()}}, sameOrigin)
	if r := b2.get("/accounts"); r.status != http.StatusSeeOther {
		t.Fatalf("after the logout another worker answers %d", r.status)
	}
}

// Two starts of one form submission (a double click, a reload) start one enrollment and
// lead to the same page; another submission starts another.
func TestOneFormSubmissionStartsOneEnrollmentHoweverOftenItIsSent(t *testing.T) {
	t.Parallel()
	s := start(t)
	b := newBrowser(t, s.ui.URL)
	b.login()
	csrf := b.csrf()
	form := url.Values{"csrf": {csrf}, "submission": {"aaaaaaaaaaaaaaaaaaaaaa"}}
	var wg sync.WaitGroup
	locs := make([]string, 4)
	for i := range locs {
		wg.Go(func() {
			r := b.do(http.MethodPost, "/enroll", form, sameOrigin)
			if r.status == http.StatusSeeOther {
				locs[i] = r.header.Get("Location")
			}
		})
	}
	wg.Wait()
	for _, l := range locs {
		if l == "" || l != locs[0] || !strings.HasPrefix(l, "/enroll/qo_") {
			t.Fatalf("the starts led to %q", locs)
		}
	}
	offer := strings.TrimPrefix(locs[0], "/enroll/")
	if _, err := s.tc.DescribeWorkflow(s.ctx, wfapi.EnrollmentID(offer), ""); err != nil {
		t.Fatal(err)
	}
	form.Set("submission", "bbbbbbbbbbbbbbbbbbbbbb")
	if r := b.do(http.MethodPost, "/enroll", form, sameOrigin); r.header.Get("Location") == locs[0] {
		t.Fatal("another submission led to the same enrollment")
	}
	form.Set("submission", "short")
	if r := b.do(http.MethodPost, "/enroll", form, sameOrigin); r.status != http.StatusBadRequest {
		t.Fatalf("a malformed submission: %d", r.status)
	}
}

var ownerLinkRE = regexp.MustCompile(`value="(http://[^"]+/o/([A-Za-z0-9_-]{43}))"`)

// The owner's link opens its enrollment's page, status and QR code without any login,
// and nothing else: not the operator's pages, not the operator's forms, not another
// enrollment; a cross-site post of a code is refused; a token one character off and an
// expired link are 404; no page carries the operator's token or a session cookie.
func TestTheOwnerLinkOpensNothingButItsEnrollment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := newBrowser(t, f.ui.URL)
	op.login()
	page := op.do(http.MethodPost, "/enroll/"+f.offer+"/owner-link", url.Values{"csrf": {op.csrf()}}, sameOrigin)
	m := ownerLinkRE.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || m == nil {
		t.Fatalf("making the link: %d %s", page.status, page.body)
	}
	link, token := m[1], m[2]
	path := strings.TrimPrefix(link, f.ui.URL)

	owner := newBrowser(t, f.ui.URL)
	var bodies []response
	for _, p := range []string{path, path + "?lang=en", path + "/status", path + "/status?lang=en"} {
		r := owner.get(p)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d", p, r.status)
		}
		if len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("GET %s sets a cookie", p)
		}
		bodies = append(bodies, r)
	}
	if !strings.Contains(bodies[0].body, `lang="zh-CN"`) || strings.Contains(bodies[2].body, f.offer) || strings.Contains(bodies[2].body, `"account_key"`) {
		t.Errorf("the owner's page or status: %s / %s", bodies[0].body, bodies[2].body)
	}
	for _, p := range f.pages() {
		if r := owner.get(p); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Errorf("with the owner's link only, GET %s: %d", p, r.status)
		}
	}
	for _, p := range f.forms {
		if r := owner.do(http.MethodPost, p, url.Values{}, sameOrigin); r.status != http.StatusUnauthorized {
			t.Errorf("with the owner's link only, POST %s: %d", p, r.status)
		}
	}
	off := token[:42] + map[bool]string{true: "B", false: "A"}[token[42] == 'A']
	for _, p := range []string{"/o/" + off, "/o/" + off + "/status", "/o/" + off + "/qr.png", "/o/" + f.offer} {
		if r := owner.get(p); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	if r := owner.do(http.MethodPost, path+"/code", url.Values{"code": {"1234"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
		t.Errorf("a cross-site code: %d", r.status)
	}
	for _, r := range bodies {
		if strings.Contains(r.body, operatorToken) || strings.Contains(r.body, op.csrf()) {
			t.Errorf("an owner's page carries the operator's token or CSRF token")
		}
	}
	if _, err := f.pool.Exec(f.ctx, `UPDATE webui_owner_links SET created_at = created_at - interval '1 hour', expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if r := owner.get(path); r.status != http.StatusNotFound || !strings.Contains(r.body, "链接无效或已过期") {
		t.Fatalf("the expired link: %d", r.status)
	}
}

// An unknown path answers an HTML page that says so, with a way back.
func TestAnUnknownPathAnswersAnHTML404WithAWayBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := newBrowser(t, f.ui.URL)
	for _, logged := range []bool{false, true} {
		if logged {
			b.login()
		}
		r := b.get("/no/such/page")
		if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(r.body, `id="back"`) {
			t.Fatalf("logged in %v: %d %q %s", logged, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
}

// With PostgreSQL hanging, the pages say they cannot reach it within their timeout (no
// page waits for the database), and they work again once it answers.
func TestWithPostgreSQLAwayThePagesSaySoWithinTheirTimeout(t *testing.T) {
	t.Parallel()
	s := start(t)
	cc, err := pgxpool.ParseConfig(dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.New(net.JoinHostPort(cc.ConnConfig.Host, strconv.Itoa(int(cc.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	})
	t.Cleanup(func() { _ = proxy.Close() })
	st, err := store.New(pool, keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.uiCfg
	cfg.Store, cfg.Timeout = st, time.Second
	h, err := webui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, h)
	b := newBrowser(t, srv.URL)
	b.login()
	proxy.Blackhole()
	for _, p := range []string{"/accounts", "/enroll"} {
		began := time.Now()
		r := b.get(p)
		took := time.Since(began)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "Cannot reach PostgreSQL") {
			t.Fatalf("GET %s with PostgreSQL away: %d %s", p, r.status, r.body)
		}
		if took > 3*time.Second {
			t.Errorf("GET %s took %v to say PostgreSQL cannot be reached", p, took)
		}
		t.Logf("GET %s answered in %v", p, took)
	}
	proxy.Restore()
	testkit.Eventually(t, "the accounts page works again", 30*time.Second, func() (bool, error) {
		return b.get("/accounts").status == http.StatusOK, nil
	})
}
