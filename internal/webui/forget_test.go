package webui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// "Forget this user" on a bot's conversations page: the console's `starter forget`.
// These tests run the UI over a store of its own (newConsoleUI) and the dev server's
// namespace, where a test starts the workflow of the user's open window itself (no
// worker runs it).

// forgetScene is a bot whose owner wrote twice and another bot with another owner
// (conversation), the owner's earlier bot, which the first replaced (an iLink bot talks
// to its owner only, and an owner has one bot at a time), with a message of the owner,
// and the workflow of the owner's open window on the first bot running in Temporal.
type forgetScene struct {
	*conversation
	c *consoleUI
	// earlier is the owner's replaced bot, earlierSaid the key of the owner's message to it.
	earlier     store.Account
	earlierSaid string
	// windowWorkflow is the workflow id of the owner's open window, inst the store's
	// installation.
	windowWorkflow string
	inst           wfapi.Installation
	tc             client.Client
}

// earlierText is what the owner wrote to their earlier bot (kept by an erasure on the
// first bot only).
const earlierText = "to my earlier bot, secret-four"

func newForgetScene(t *testing.T, opts ...option) *forgetScene {
	t.Helper()
	srv := devserver.Start(t)
	c := newConsoleUI(t, append([]option{func(cfg *webui.Config) { cfg.Namespace = srv.Namespace }}, opts...)...)
	earlier, err := storetest.RegisterAccount(c.ctx, c.st, time.Now().Add(-72*time.Hour), store.ConfirmInput{
		ProviderAccountID: "c0ffee000003@im.bot", OwnerPeerID: "o9cq8Owner001@im.wechat",
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(botToken(3))})
	if err != nil {
		t.Fatal(err)
	}
	earlierSaid := c.message(earlier, earlier.OwnerPeerID, time.Now().Add(-60*time.Hour), earlierText).Deliverable.MessageKey
	sc := &forgetScene{conversation: c.conversation(), c: c, tc: srv.Client, earlier: earlier, earlierSaid: earlierSaid}
	if sc.bot.OwnerPeerID != earlier.OwnerPeerID {
		t.Fatalf("the bot's owner %s is not the earlier bot's", sc.bot.OwnerPeerID)
	}
	conv, err := c.st.Conversations(c.ctx, sc.bot.AccountKey, 100)
	if err != nil {
		t.Fatal(err)
	}
	var open int64
	for _, w := range conv.Windows {
		if w.PeerID == sc.bot.OwnerPeerID && w.State == vocab.WindowOpen {
			open = w.ReplyWindowID
		}
	}
	if open == 0 {
		t.Fatalf("the owner has no open window: %+v", conv.Windows)
	}
	inst, err := c.st.Installation(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc.windowWorkflow, sc.inst = inst.WindowWorkflowID(open), inst
	start := wfapi.StartOptions(client.StartWorkflowOptions{ID: sc.windowWorkflow, TaskQueue: devserver.TaskQueue(t)},
		sc.bot.AccountKey, sc.bot.OwnerPeerID)
	if _, err := srv.Client.ExecuteWorkflow(c.ctx, start, "ReplyWindow"); err != nil {
		t.Fatal(err)
	}
	return sc
}

// erased reports whether the bot's message's content is erased (found and erased).
func (sc *forgetScene) erased(accountKey, messageKey string) bool {
	sc.c.t.Helper()
	content, found, err := sc.c.st.MessageText(sc.c.ctx, accountKey, messageKey)
	if err != nil || !found {
		sc.c.t.Fatalf("message %s: found %v, %v", messageKey, found, err)
	}
	return content.Erased && content.Payload == nil
}

// audits counts the lines of forget_audit, and returns the last one's requested_by.
func (sc *forgetScene) audits() (int, string) {
	sc.c.t.Helper()
	var n int
	var by string
	err := sc.c.pool.QueryRow(sc.c.ctx, `SELECT count(*), coalesce(max(requested_by), '') FROM forget_audit`).Scan(&n, &by)
	if err != nil {
		sc.c.t.Fatal(err)
	}
	return n, by
}

// nothingErased fails the test when anything of the scene was erased or audited.
func (sc *forgetScene) nothingErased(after string) {
	sc.c.t.Helper()
	for _, m := range [][2]string{{sc.bot.AccountKey, sc.answered}, {sc.bot.AccountKey, sc.gaveUp},
		{sc.earlier.AccountKey, sc.earlierSaid}, {sc.other.AccountKey, sc.othersReport}} {
		if sc.erased(m[0], m[1]) {
			sc.c.t.Errorf("after %s, message %s is erased", after, m[1])
		}
	}
	if n, _ := sc.audits(); n != 0 {
		sc.c.t.Errorf("after %s, forget_audit has %d lines", after, n)
	}
	d, err := sc.tc.DescribeWorkflow(sc.c.ctx, sc.windowWorkflow, "")
	if err != nil || d.Status.String() != "Running" {
		sc.c.t.Errorf("after %s, the open window's workflow: %v %v", after, d, err)
	}
}

// outcome is the forget page's outcome (its data-outcome), "" on another page.
func outcome(body string) string {
	v := between(body, `id="forget" data-account="`, `">`)
	_, o, _ := strings.Cut(v, `data-outcome="`)
	return o
}

// count is the number the forget page shows for a count's key.
func count(body, key string) string {
	return between(between(body, `data-count="`+key+`"`, "</tr>"), `<td class="n">`, "</td>")
}

// The conversations page lists each user of the bot with "Forget this user"; the action
// first shows a dry run (the store's counts, as `starter forget --dry-run` prints them),
// on this bot or on every bot, that changes nothing, and erases only from its
// confirmation form: the user's content on this bot, the workflow of their open window,
// and nothing of another bot's or another user's. The audit line names the console;
// neither the page nor the log holds a text, nor the log the user's id. A second erasure
// is a no-op and says so.
func TestForgettingAUserFromTheConsoleShowsTheDryRunFirstAndErasesOnlyAfterConfirmation(t *testing.T) {
	t.Parallel()
	sc := newForgetScene(t)
	c, key, owner := sc.c, sc.bot.AccountKey, sc.bot.OwnerPeerID
	b := newBrowser(t, c.url)
	b.login()
	csrf := b.csrf()

	page := b.get("/accounts/" + key + "/conversations")
	row := between(page.body, `<tr class="user" data-peer="`+owner+`"`, "</tr>")
	if !strings.Contains(row, `<td>2 <small>latest`) || !strings.Contains(row, `action="/accounts/`+key+`/forget"`) ||
		!strings.Contains(row, `name="peer" value="`+owner+`"`) || !strings.Contains(row, `name="csrf" value="`+csrf+`"`) ||
		!strings.Contains(row, "Forget this user") {
		t.Errorf("the conversations page has no forget form for the bot's user:\n%s", row)
	}
	if strings.Contains(page.body, sc.other.OwnerPeerID) {
		t.Error("the conversations page lists another bot's user")
	}

	// The dry run: the counts, a confirmation form, nothing changed.
	form := url.Values{"csrf": {csrf}, "peer": {owner}}
	dry := b.do(http.MethodPost, "/accounts/"+key+"/forget", form, sameOrigin)
	if dry.status != http.StatusOK || outcome(dry.body) != "dry-run" {
		t.Fatalf("the dry run: %d %q\n%s", dry.status, outcome(dry.body), dry.body)
	}
	for k, want := range map[string]string{"messages": "2", "replies": "2", "windows": "2", "windows_ended": "1",
		"held_replies": "0", "quarantined_pages": "0"} {
		if got := count(dry.body, k); got != want {
			t.Errorf("the dry run counts %s %q, want %s", k, got, want)
		}
	}
	if !strings.Contains(dry.body, "Dry run: nothing was erased.") || !strings.Contains(dry.body, `id="forget-confirm"`) ||
		!strings.Contains(dry.body, `action="/accounts/`+key+`/forget/confirm"`) || !strings.Contains(dry.body, `name="confirm" value="yes"`) {
		t.Errorf("the dry run does not say so or offers no confirmation:\n%s", dry.body)
	}
	// On every bot: the owner's earlier bot too.
	every := b.do(http.MethodPost, "/accounts/"+key+"/forget", url.Values{"csrf": {csrf}, "peer": {owner}, "scope": {"every"}}, sameOrigin)
	if outcome(every.body) != "dry-run" || count(every.body, "messages") != "3" || !strings.Contains(every.body, "on 2 account(s)") ||
		!strings.Contains(every.body, sc.earlier.AccountKey) || !strings.Contains(every.body, `name="scope" value="every"`) {
		t.Errorf("the dry run on every bot: %d %q\n%s", every.status, outcome(every.body), every.body)
	}
	sc.nothingErased("the dry runs")

	// The confirmation form's post without its confirmation erases nothing.
	form.Set("scope", "account")
	if r := b.do(http.MethodPost, "/accounts/"+key+"/forget/confirm", form, sameOrigin); r.status != http.StatusBadRequest {
		t.Errorf("an erasure without confirm=yes: %d", r.status)
	}
	sc.nothingErased("an unconfirmed erasure")

	form.Set("confirm", "yes")
	done := b.do(http.MethodPost, "/accounts/"+key+"/forget/confirm", form, sameOrigin)
	if done.status != http.StatusOK || outcome(done.body) != "erased" || count(done.body, "messages") != "2" ||
		count(done.body, "windows_ended") != "1" || count(done.body, "workflows_terminated") != "1" {
		t.Fatalf("the erasure: %d %q\n%s", done.status, outcome(done.body), done.body)
	}
	for _, mk := range []string{sc.answered, sc.gaveUp} {
		if !sc.erased(key, mk) {
			t.Errorf("the owner's message %s is not erased", mk)
		}
	}
	if sc.erased(sc.earlier.AccountKey, sc.earlierSaid) || sc.erased(sc.other.AccountKey, sc.othersReport) {
		t.Error("another bot's message was erased")
	}
	if n, by := sc.audits(); n != 1 || by != webui.ForgetBy {
		t.Errorf("forget_audit: %d lines, by %q; want 1 by %q", n, by, webui.ForgetBy)
	}
	var accountKey string
	if err := c.pool.QueryRow(c.ctx, `SELECT account_key FROM forget_audit`).Scan(&accountKey); err != nil || accountKey != key {
		t.Errorf("the audit line's account: %q %v", accountKey, err)
	}
	// Temporal deletes a history asynchronously, slowly on a busy machine; the visibility
	// listing of the user's workflows empties too.
	testkit.Eventually(t, "the open window's workflow deleted", 3*time.Minute, func() (bool, error) {
		if _, err := sc.tc.DescribeWorkflow(c.ctx, sc.windowWorkflow, ""); !wfclient.IsNotFound(err) {
			return false, err
		}
		resp, err := sc.tc.ListWorkflow(c.ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: operator.PeerWorkflowsQuery(sc.inst, owner, "")})
		return err == nil && len(resp.GetExecutions()) == 0, err
	})
	for _, r := range []response{page, dry, every, done} {
		for _, text := range append(sc.texts, earlierText) {
			if strings.Contains(r.body, text) {
				t.Errorf("a page shows the text %q", text)
			}
		}
	}
	logs := c.logs.String()
	if !strings.Contains(logs, "webui: a WeChat user's content was erased") || strings.Contains(logs, owner) {
		t.Errorf("the log does not say the erasure, or names the user:\n%s", logs)
	}

	// Again: nothing left, said so; the other bots' messages are still kept.
	again := b.do(http.MethodPost, "/accounts/"+key+"/forget/confirm", form, sameOrigin)
	if again.status != http.StatusOK || outcome(again.body) != "nothing-left" ||
		!strings.Contains(again.body, "Nothing was left to erase of this user: nothing was changed") {
		t.Errorf("a second erasure: %d %q\n%s", again.status, outcome(again.body), again.body)
	}
	if r := b.do(http.MethodPost, "/accounts/"+key+"/forget", url.Values{"csrf": {csrf}, "peer": {owner}}, sameOrigin); outcome(r.body) != "nothing-left" ||
		strings.Contains(r.body, `id="forget-confirm"`) {
		t.Errorf("a dry run after the erasure: %q, want nothing left and no confirmation", outcome(r.body))
	}
	if sc.erased(sc.earlier.AccountKey, sc.earlierSaid) || sc.erased(sc.other.AccountKey, sc.othersReport) {
		t.Error("the second erasure erased another bot's message")
	}
}

// The forget forms are the console's actions: without the session's CSRF token, from
// another site, or without a session (an owner's link opens none) they are refused and
// erase nothing.
func TestTheConsolesForgetRefusesAPostWithoutItsCSRFToken(t *testing.T) {
	t.Parallel()
	sc := newForgetScene(t)
	key, owner := sc.bot.AccountKey, sc.bot.OwnerPeerID
	b := newBrowser(t, sc.c.url)
	b.login()
	good := b.csrf()
	other := newBrowser(t, sc.c.url)
	other.login()
	for _, p := range []string{"/accounts/" + key + "/forget", "/accounts/" + key + "/forget/confirm"} {
		for _, csrf := range []string{"", "wrong", other.csrf(), good + "x"} {
			form := url.Values{"peer": {owner}, "scope": {"account"}, "confirm": {"yes"}}
			if csrf != "" {
				form.Set("csrf", csrf)
			}
			if r := b.do(http.MethodPost, p, form, sameOrigin); r.status != http.StatusForbidden {
				t.Errorf("POST %s with CSRF %q: %d, want 403", p, csrf, r.status)
			}
		}
		form := url.Values{"csrf": {good}, "peer": {owner}, "scope": {"account"}, "confirm": {"yes"}}
		if r := b.do(http.MethodPost, p, form, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
			t.Errorf("POST %s cross-site: %d, want 403", p, r.status)
		}
		if r := newBrowser(t, sc.c.url).do(http.MethodPost, p, form, sameOrigin); r.status != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d, want 401", p, r.status)
		}
	}
	sc.nothingErased("the refused posts")
}

// Forgetting a user of whom the bot stores nothing answers a clear error page
// (peer_not_found) and writes nothing: an unknown id, another bot's user on this bot's
// page, a malformed id, an unknown bot.
func TestForgettingAnUnknownUserFromTheConsoleWritesNothing(t *testing.T) {
	t.Parallel()
	sc := newForgetScene(t)
	key := sc.bot.AccountKey
	b := newBrowser(t, sc.c.url)
	b.login()
	csrf := b.csrf()
	for _, tc := range []struct {
		name, path, peer, scope string
		status                  int
		says                    string
	}{
		{"an unknown user", "/accounts/" + key + "/forget", "o9cq8Nobody@im.wechat", "", http.StatusNotFound, "peer_not_found"},
		{"an unknown user, confirmed", "/accounts/" + key + "/forget/confirm", "o9cq8Nobody@im.wechat", "account", http.StatusNotFound, "peer_not_found"},
		{"an unknown user on every bot", "/accounts/" + key + "/forget/confirm", "o9cq8Nobody@im.wechat", "every", http.StatusNotFound, "No data of this WeChat user is stored on any bot"},
		{"another bot's user", "/accounts/" + key + "/forget/confirm", sc.other.OwnerPeerID, "account", http.StatusNotFound, "No data of this WeChat user is stored on this bot"},
		{"a malformed id", "/accounts/" + key + "/forget/confirm", " o9cq8Owner001@im.wechat", "account", http.StatusBadRequest, "not a WeChat user id"},
		{"an empty id", "/accounts/" + key + "/forget", "", "", http.StatusBadRequest, "not a WeChat user id"},
		{"an unknown bot", "/accounts/ilk_00000000000000000000000000000000/forget/confirm", sc.bot.OwnerPeerID, "account", http.StatusNotFound, "No such account."},
	} {
		form := url.Values{"csrf": {csrf}, "peer": {tc.peer}, "scope": {tc.scope}, "confirm": {"yes"}}
		r := b.do(http.MethodPost, tc.path, form, sameOrigin)
		if r.status != tc.status || !strings.Contains(r.body, `id="error"`) || !strings.Contains(r.body, tc.says) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", tc.name, r.status, tc.status, tc.says, r.body)
		}
	}
	sc.nothingErased("forgetting unknown users")
	if sc.erased(sc.other.AccountKey, sc.othersReport) {
		t.Error("the other bot's user was erased from this bot's page")
	}
	if logs := sc.c.logs.String(); strings.Contains(logs, "o9cq8Nobody") || strings.Contains(logs, sc.other.OwnerPeerID) {
		t.Errorf("the log names a user:\n%s", logs)
	}
}

// An erasure whose Temporal part fails (here: a namespace the server does not have) says
// that the store's part is done and offers to erase again; run again where Temporal
// answers, it erases nothing more in the store and ends and deletes the user's workflow.
func TestAnErasureCutShortInTemporalSaysSoAndFinishesWhenRunAgain(t *testing.T) {
	t.Parallel()
	sc := newForgetScene(t, func(cfg *webui.Config) { cfg.Namespace = "no-such-namespace" })
	key, owner := sc.bot.AccountKey, sc.bot.OwnerPeerID
	b := newBrowser(t, sc.c.url)
	b.login()
	form := url.Values{"csrf": {b.csrf()}, "peer": {owner}, "scope": {"account"}, "confirm": {"yes"}}
	r := b.do(http.MethodPost, "/accounts/"+key+"/forget/confirm", form, sameOrigin)
	if r.status != http.StatusInternalServerError || outcome(r.body) != "unfinished" ||
		!strings.Contains(r.body, "erased from PostgreSQL, but their workflows in Temporal were not all deleted") ||
		!strings.Contains(r.body, `id="forget-confirm"`) || count(r.body, "messages") != "2" {
		t.Fatalf("the erasure without Temporal: %d %q\n%s", r.status, outcome(r.body), r.body)
	}
	if !sc.erased(key, sc.gaveUp) {
		t.Error("the store's part was not done")
	}
	if d, err := sc.tc.DescribeWorkflow(sc.c.ctx, sc.windowWorkflow, ""); err != nil || d.Status.String() != "Running" {
		t.Fatalf("the open window's workflow: %v %v", d, err)
	}
	if logs := sc.c.logs.String(); !strings.Contains(logs, "webui: forget") || strings.Contains(logs, owner) {
		t.Errorf("the failure is not logged, or its log names the user:\n%s", logs)
	}

	h, err := webui.New(webui.Config{Temporal: sc.tc, Store: sc.c.st, OperatorToken: tokenSecret(), Namespace: devserver.Start(t).Namespace})
	if err != nil {
		t.Fatal(err)
	}
	b = newBrowser(t, newServer(t, h).URL)
	b.login()
	form.Set("csrf", b.csrf())
	r = b.do(http.MethodPost, "/accounts/"+key+"/forget/confirm", form, sameOrigin)
	if r.status != http.StatusOK || outcome(r.body) != "erased" || count(r.body, "messages") != "0" ||
		count(r.body, "workflows_terminated") != "1" || count(r.body, "workflows_deleted") != "1" {
		t.Fatalf("the erasure run again: %d %q\n%s", r.status, outcome(r.body), r.body)
	}
	// Temporal deletes a history asynchronously: the run is ended now, and the deletion
	// was accepted (the count above); the main test waits for the history to go.
	if d, err := sc.tc.DescribeWorkflow(sc.c.ctx, sc.windowWorkflow, ""); err == nil && d.Status.String() == "Running" {
		t.Errorf("the open window's workflow still runs")
	} else if err != nil && !wfclient.IsNotFound(err) {
		t.Fatal(err)
	}
}

// In the browser: "Forget this user…" on the conversations page shows the dry run, whose
// "Erase this user's content" erases and says what was erased.
func TestBrowserForgettingAUserFromTheConversationsPage(t *testing.T) {
	t.Parallel()
	sc := newForgetScene(t)
	key, owner := sc.bot.AccountKey, sc.bot.OwnerPeerID
	tb := newTab(t)
	tb.login(sc.c.url)
	row := `tr.user[data-peer="` + owner + `"] button.forget-user`
	tb.do("open the conversations and forget the owner",
		chromedp.Navigate(sc.c.url+"/accounts/"+key+"/conversations"),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row)),
	)
	tb.waitFor("the dry run", `document.querySelector('#forget[data-outcome="dry-run"]') !== null`)
	if got := tb.text(`#forget-counts tr[data-count="messages"] td`); got != "2" {
		t.Errorf("the dry run counts %q messages", got)
	}
	sc.nothingErased("the dry run in the browser")
	tb.do("confirm", chromedp.Click(chromedp.CSS("#forget-erase")))
	tb.waitFor("the erasure", `document.querySelector('#forget[data-outcome="erased"]') !== null`)
	if got := tb.text("#forget-summary"); !strings.Contains(got, "Erased, of this user, on 1 account(s): "+key) {
		t.Errorf("the erasure says %q", got)
	}
	if !sc.erased(key, sc.gaveUp) || sc.erased(sc.earlier.AccountKey, sc.earlierSaid) {
		t.Error("the browser's erasure did not erase exactly the owner's messages on this bot")
	}
}
