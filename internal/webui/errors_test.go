package webui_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// syncBuffer is a log sink the UI's handlers write to concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An enrollment that failed in an activity reports the activity's error, which names the
// worker's identity (pid@host) and the store's internals. The page and the status
// endpoint show a short, stable message instead; the log has the error. A refused account
// operation is said the same way.
func TestAnEnrollmentErrorIsShownAsAStableMessageWithoutTheWorkersIdentity(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := start(t, func(c *webui.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	const offer = "qo_00000000000000e1"
	acc := s.enrollDirectly(offer, "o9cq8erroruser@im.wechat")

	// The offer was confirmed: an Enrollment of it again fails in its CreateOffer activity.
	run, err := s.tc.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offer), TaskQueue: s.tq},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "test", Lifetime: wfapi.Duration(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var es wfapi.EnrollmentState
	if err := run.Get(s.ctx, &es); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if es.Status != "failed" || !strings.Contains(es.Error, "identity") {
		t.Fatalf("the second enrollment ended %q with %q: want a failure with an activity's error", es.Status, es.Error)
	}
	leaks := []string{"identity", "activity error", "scheduledEventID", "store:", "CreateOffer", "already confirmed"}
	if host != "" {
		leaks = append(leaks, "@"+host)
	}
	leaked := func(where, body string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(body, l) {
				t.Errorf("%s shows %q: %.300s", where, l, body)
			}
		}
	}

	b := newBrowser(t, s.ui.URL)
	b.login()
	page := b.get("/enroll/" + offer)
	if page.status != http.StatusOK || !strings.Contains(page.body, "The enrollment failed. The server log has the details.") {
		t.Fatalf("enrollment page: %d %.500s", page.status, page.body)
	}
	leaked("the enrollment page", page.body)
	r := b.get("/enroll/" + offer + "/status")
	var st webui.Status
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || r.status != http.StatusOK {
		t.Fatalf("status: %d %s %v", r.status, r.body, err)
	}
	if !st.Done || st.Status != "failed" || st.Error != "The enrollment failed. The server log has the details." {
		t.Fatalf("status %+v", st)
	}
	leaked("the status endpoint", r.body)
	if !strings.Contains(logs.String(), "already confirmed") {
		t.Errorf("the log does not have the enrollment's error: %.500s", logs.String())
	}

	// Pausing a removed account is refused by the store: the page says why in its words.
	csrf := b.csrf()
	for _, verb := range []string{"remove", "pause"} {
		if r := b.do(http.MethodPost, "/accounts/"+acc.AccountKey+"/"+verb, url.Values{"csrf": {csrf}, "for": {"1h"}}, sameOrigin); r.status != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", verb, r.status, r.body)
		}
	}
	accounts := b.get("/accounts")
	if !strings.Contains(accounts.body, "pause "+acc.AccountKey+" failed: the account is not active") {
		t.Fatalf("accounts page after a refused pause: %.2000s", accounts.body)
	}
	leaked("the accounts page", accounts.body)
	if strings.Contains(accounts.body, "account_not_active") {
		t.Errorf("the accounts page shows the store's code: %.2000s", accounts.body)
	}
}

// A route the store refuses (a short secret, a bad URL, a workflow without its task queue,
// an unknown or malformed MCP agent or iLink client, a login code that waits for nothing or
// a revoked client's) is said on the accounts page in the store's words, without its code,
// and changes nothing; neither the page nor the log holds the secret.
func TestABadRouteIsRefusedWithTheStoresMessageAndWritesNothing(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := start(t, func(c *webui.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	key := s.enrollDirectly("qo_00000000000000b1", "o9cq8badroute@im.wechat").AccountKey
	b := newBrowser(t, s.ui.URL)
	b.login()
	csrf := b.csrf()
	path := "/accounts/" + key + "/route"
	if r := b.do(http.MethodPost, path, url.Values{"csrf": {csrf}, "kind": {"echo"}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("echo route: %d %s", r.status, r.body)
	}
	before, _, err := s.store.GetRoute(s.ctx, key)
	if err != nil || before.Kind != "echo" {
		t.Fatalf("route: %+v %v", before, err)
	}
	for _, name := range []string{"openclaw", "retired"} {
		if _, err := s.store.CreateILinkClient(s.ctx, time.Now(), name, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.store.RevokeILinkClient(s.ctx, time.Now(), "retired", "test"); err != nil {
		t.Fatal(err)
	}
	login, err := s.store.StartILinkLogin(s.ctx, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	const (
		shortSecret = "short-secret" // 12 bytes
		goodSecret  = "a-long-enough-webhook-secret-77e1"
	)
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"kind": {"webhook"}, "webhook_url": {"https://agent.example/hook"}, "webhook_secret": {shortSecret}},
			"webhook secret must be at least 16 bytes (it has 12)."},
		{url.Values{"kind": {"webhook"}, "webhook_url": {"ftp://agent.example/hook"}, "webhook_secret": {goodSecret}},
			"webhook URL: want an absolute http or https URL."},
		{url.Values{"kind": {"webhook"}, "webhook_url": {"https://user:pw@agent.example/hook"}, "webhook_secret": {goodSecret}},
			"webhook URL: user info in the URL is not allowed"},
		{url.Values{"kind": {"webhook"}, "webhook_url": {"https://agent.example/hook"}, "webhook_secret": {goodSecret},
			"webhook_timeout": {"soon"}}, "webhook timeout must be whole milliseconds between 0 (the default) and 1m30s."},
		{url.Values{"kind": {"webhook"}, "webhook_url": {"https://agent.example/hook"}, "webhook_secret": {goodSecret},
			"webhook_timeout": {"5m"}}, "webhook timeout must be whole milliseconds between 0 (the default) and 1m30s."},
		{url.Values{"kind": {"workflow"}, "workflow_type": {"MyAgent"}}, "task queue is required."},
		{url.Values{"kind": {"mcp"}, "mcp_agent": {"nobody"}}, "no MCP agent has that name"},
		{url.Values{"kind": {"mcp"}, "mcp_agent": {"Not A Name"}}, "an MCP agent name is 1 to 63 of a-z"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"nobody"}}, "no iLink client has that name"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"Not A Name"}}, "an iLink client name is 1 to 63 of a-z"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"nobody"}, "login_code": {login.Code}}, "no iLink client has that name"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"retired"}, "login_code": {login.Code}}, "the iLink client retired is revoked"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"openclaw"}, "login_code": {"ABC"}}, "a login code is 8 letters and digits"},
		{url.Values{"kind": {"ilink"}, "ilink_client": {"openclaw"}, "login_code": {"ZZZZ-ZZZZ"}}, "no login waits under that code"},
	} {
		c.form.Set("csrf", csrf)
		if r := b.do(http.MethodPost, path, c.form, sameOrigin); r.status != http.StatusSeeOther {
			t.Fatalf("%s route: %d %s", c.form.Get("kind"), r.status, r.body)
		}
		page := b.get("/accounts")
		if !strings.Contains(page.body, "route "+key+" failed: "+c.want) {
			t.Errorf("accounts page after a bad %s route: want %q in %.3000s", c.form.Get("kind"), c.want, page.body)
		}
		if !strings.Contains(page.body, `class="flash flash-error"`) || strings.Contains(page.body, "flash-ok") {
			t.Errorf("a refused %s route is not shown as an error", c.form.Get("kind"))
		}
		for _, leak := range []string{"invalid_input", "mcp_agent_not_found", "ilink_client_not_found", "ilink_login_not_found", "store:", "fkey",
			shortSecret, goodSecret, "user:pw"} {
			if strings.Contains(page.body, leak) {
				t.Errorf("accounts page after a bad %s route shows %q", c.form.Get("kind"), leak)
			}
		}
	}
	if r := b.do(http.MethodPost, path, url.Values{"csrf": {csrf}, "kind": {"carrier-pigeon"}}, sameOrigin); r.status != http.StatusBadRequest {
		t.Errorf("unknown route kind: %d", r.status)
	}

	after, _, err := s.store.GetRoute(s.ctx, key)
	if err != nil || after.Kind != "echo" || after.Version != before.Version {
		t.Fatalf("route after refused changes: %s version %d (was %d), %v", after.Kind, after.Version, before.Version, err)
	}
	if changes, err := s.store.ListRouteChanges(s.ctx, key); err != nil || len(changes) != 1 {
		t.Fatalf("route changes after refused ones: %d %v", len(changes), err)
	}
	if waiting, err := s.store.ListILinkLogins(s.ctx, time.Now()); err != nil || len(waiting) != 1 || waiting[0].Code != login.Code {
		t.Fatalf("after refused approvals the login does not wait: %+v %v", waiting, err)
	}
	log := logs.String()
	if !strings.Contains(log, "invalid_input") || !strings.Contains(log, "mcp_agent_not_found") {
		t.Errorf("the log does not have the store's errors: %.2000s", log)
	}
	for _, leak := range []string{shortSecret, goodSecret, "user:pw"} {
		if strings.Contains(log, leak) {
			t.Errorf("the log holds %q", leak)
		}
	}
	// The same form with a good timeout sets it.
	form := url.Values{"csrf": {csrf}, "kind": {"webhook"}, "webhook_url": {"https://agent.example/hook"},
		"webhook_secret": {goodSecret}, "webhook_timeout": {"30s"}}
	if r := b.do(http.MethodPost, path, form, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("webhook route with a timeout: %d %s", r.status, r.body)
	}
	if got, _, err := s.store.GetRoute(s.ctx, key); err != nil || got.Kind != "webhook" || got.WebhookTimeout != 30*time.Second {
		t.Fatalf("route with a timeout: %+v %v", got, err)
	}
}
