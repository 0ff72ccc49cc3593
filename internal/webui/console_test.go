package webui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The operator's console: the accounts table (GET /accounts) and a bot's conversations
// (GET /accounts/{key}/conversations). Both read the store only, so these tests run the
// UI over a store of their own and a dev server's Temporal client, without a gateway, and
// put the bots, their messages and replies in the store directly.

// consoleUI is the web UI over a store of its own.
type consoleUI struct {
	t       *testing.T
	ctx     context.Context
	st      *store.Store
	pool    *pgxpool.Pool
	url     string
	logs    *syncBuffer
	cursors map[string]string
	seq     int
}

func newConsoleUI(t *testing.T, opts ...option) *consoleUI {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := devserver.Start(t).Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	logs := &syncBuffer{}
	cfg := webui.Config{Temporal: tc, Store: st, OperatorToken: tokenSecret(), Logger: slog.New(slog.NewTextHandler(logs, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := webui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ui := httptest.NewServer(h)
	t.Cleanup(ui.Close)
	return &consoleUI{t: t, ctx: ctx, st: st, pool: pool, url: ui.URL, logs: logs, cursors: map[string]string{}}
}

// botToken is bot i's token as the store seals it.
func botToken(i int) string { return fmt.Sprintf("c0ffee%06d@im.bot:bot-token-secret-%06d", i, i) }

// register registers bot i: iLink id c0ffee<i>@im.bot, owner o9cq8Owner<i>@im.wechat.
func (c *consoleUI) register(i int) store.Account {
	c.t.Helper()
	a, err := storetest.RegisterAccount(c.ctx, c.st, time.Now().Add(-48*time.Hour), store.ConfirmInput{
		ProviderAccountID: fmt.Sprintf("c0ffee%06d@im.bot", i), OwnerPeerID: fmt.Sprintf("o9cq8Owner%03d@im.wechat", i),
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(botToken(i))})
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

// message stores text as the bot's next page at at, from peer.
func (c *consoleUI) message(a store.Account, peer string, at time.Time, text string) store.PageResult {
	c.t.Helper()
	c.seq++
	id := strconv.FormatInt(7100000000000000000+int64(c.seq), 10)
	cursor, next := c.cursors[a.AccountKey], fmt.Sprintf("Ck%d", c.seq)
	res, err := c.st.CommitPage(c.ctx, at, store.PageInput{AccountKey: a.AccountKey, Generation: a.Generation,
		ExpectedCursor: cursor, NextCursor: next, Entries: []store.PageEntry{{ProviderMessageID: id, PeerID: peer,
			SentAt: at, Cursor: cursor, ContextToken: sealing.NewSecret("CKctx-" + id), Payload: store.Payload{Summary: text}}}})
	if err != nil {
		c.t.Fatalf("commit page: %v", err)
	}
	c.cursors[a.AccountKey] = next
	return res
}

// session opens an agent session on the window a page opened.
func (c *consoleUI) session(res store.PageResult, at time.Time) sealing.Secret {
	c.t.Helper()
	if res.Deliverable == nil {
		c.t.Fatalf("nothing to deliver: %+v", res)
	}
	tok := sealing.NewSecret(fmt.Sprintf("console-session-%d-%d", res.Deliverable.ReplyWindowID, c.seq))
	if _, err := c.st.OpenAgentSession(c.ctx, at, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		c.t.Fatal(err)
	}
	return tok
}

var (
	replySent     = store.Completion{Status: vocab.AttemptSent}
	replyRejected = store.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: "ilink_rejected", ErrorMessage: "ret -2"}
)

// send sends one reply of the session, completed as outcome says.
func (c *consoleUI) send(tok sealing.Secret, at time.Time, text string, outcome store.Completion) {
	c.t.Helper()
	prep, err := c.st.ReserveAndStart(c.ctx, at, store.ReplyInput{Session: store.ByToken(tok),
		Content: vocab.Content{Type: "text", Text: text}}, store.SendPacing{})
	if err != nil || prep.Started == nil {
		c.t.Fatalf("reserve and start: %+v %v", prep, err)
	}
	outcome.AttemptID = prep.Attempt.AttemptID
	if outcome.Status == vocab.AttemptSent {
		outcome.ProviderMessageID = "pm-" + outcome.AttemptID
	}
	if _, err := c.st.CompleteSend(c.ctx, at, outcome); err != nil {
		c.t.Fatal(err)
	}
}

var accountRowKey = regexp.MustCompile(`<li class="account" data-account="(ilk_[0-9a-f]{32})"`)

// rowsOf lists the account keys of an accounts page's rows, in order.
func rowsOf(body string) []string {
	var keys []string
	for _, m := range accountRowKey.FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// fleet is two hundred bots: 188 active (some polled, some busy in the last day, some
// with a route of their own, one holding replies, some whose sends iLink rejected), 5
// paused, 4 whose token died (needs_relogin) and 3 removed.
type fleet struct {
	bots                      []store.Account
	paused, relogin, disabled []string
	messages, replies         int
	busiest, holder           string
}

func (c *consoleUI) fleet() *fleet {
	c.t.Helper()
	f := &fleet{}
	now := time.Now()
	if _, err := c.st.CreateMCPAgent(c.ctx, now, "support", "test"); err != nil {
		c.t.Fatal(err)
	}
	for i := range 200 {
		a := c.register(i)
		f.bots = append(f.bots, a)
		key := a.AccountKey
		switch {
		case i%9 == 0 || i%40 == 1 || i%50 == 2: // a conversation of the last hours, answered
			n := 1
			if i == 0 {
				n = 3
			}
			for j := range n {
				at := now.Add(-time.Duration(5*(n-j)) * time.Minute)
				res := c.message(a, a.OwnerPeerID, at, fmt.Sprintf("hello %d", j))
				f.messages++
				tok := c.session(res, at)
				c.send(tok, at, "hi there", replySent)
				f.replies++
				if i%27 == 0 {
					c.send(tok, at, "and a rejected postscript", replyRejected)
				}
			}
		case i == 5: // a late answer held for the user's next message
			base := now.Add(-25 * time.Hour)
			res := c.message(a, a.OwnerPeerID, base, "a question from yesterday")
			tok := c.session(res, base)
			if _, err := c.st.ExpireWindow(c.ctx, now.Add(-30*time.Minute), res.Deliverable.ReplyWindowID); err != nil {
				c.t.Fatal(err)
			}
			if _, err := c.st.HoldReply(c.ctx, now.Add(-29*time.Minute), store.HoldInput{Session: store.ByToken(tok),
				RequestID: "late-1", Content: vocab.Content{Type: "text", Text: "a late answer"}}); err != nil {
				c.t.Fatal(err)
			}
			f.holder = key
		}
		var route *store.RouteInput
		switch {
		case i%11 == 0:
			route = &store.RouteInput{Kind: vocab.RouteWebhook, WebhookURL: "https://agent.example/hooks/" + strconv.Itoa(i),
				WebhookSecret: sealing.NewSecret("webhook-signing-secret-" + strconv.Itoa(i))}
		case i%13 == 0:
			route = &store.RouteInput{Kind: vocab.RouteWorkflow, WorkflowType: "SupportAgent", TaskQueue: "agents"}
		case i%17 == 0:
			route = &store.RouteInput{Kind: vocab.RouteMCP, MCPAgent: "support"}
		}
		if route != nil {
			route.AccountKey, route.By = key, "test"
			if _, err := c.st.SetRoute(c.ctx, now, *route); err != nil {
				c.t.Fatal(err)
			}
		}
		if i%7 != 6 {
			if err := c.st.RecordPoll(c.ctx, now, key, a.Generation); err != nil {
				c.t.Fatal(err)
			}
		}
		var err error
		switch {
		case i%40 == 1:
			_, err = c.st.PauseAccount(c.ctx, now, key, a.Generation, now.Add(time.Hour), "operator (test)")
			f.paused = append(f.paused, key)
		case i%50 == 2:
			_, err = c.st.MarkNeedsRelogin(c.ctx, now, key, a.Generation, "iLink refused the bot token (errcode -14)")
			f.relogin = append(f.relogin, key)
		case i%70 == 3:
			_, err = c.st.DisableAccount(c.ctx, now, key, a.Generation, "operator (test)")
			f.disabled = append(f.disabled, key)
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	f.busiest = f.bots[0].AccountKey
	return f
}

// maxPageBytes is the most one page of the accounts table may weigh.
const maxPageBytes = 100 << 10

// The accounts table is built for hundreds of bots: with two hundred, each page of fifty
// rows weighs under 100 KB; the pages together list every bot once (the removed ones only
// when asked for); a search finds one bot by its owner, its iLink id or its key, whatever
// the case; a status filter shows the bots of that status; the summary counts them and
// their last day; each row links to the bot's workflows in the Temporal UI and a bot whose
// token died to its re-enrollment. In the browser the search and filter forms, the sort
// and the pager work; the route forms of the page's template are in every row; the table
// updates itself without a reload, but not while the operator has one of its menus open.
// With ILINKFLOW_DOCS_SCREENSHOTS set it saves the screenshots of docs/web-ui.md.
func TestBrowserTheAccountsTableOfTwoHundredBotsSearchesFiltersAndPagesUnder100KB(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t, func(cfg *webui.Config) {
		cfg.TemporalUIURL, cfg.Namespace = "http://127.0.0.1:8233/", "bots-prod"
	})
	f := c.fleet()
	b := newBrowser(t, c.url)
	b.login()

	// Every page is under 100 KB; the pages list each bot shown once, 50 at a time.
	seen := map[string]int{}
	var sizes []string
	for page := 1; page <= 4; page++ {
		r := b.get("/accounts?page=" + strconv.Itoa(page))
		rows := rowsOf(r.body)
		if r.status != http.StatusOK || len(rows) != min(50, 197-50*(page-1)) {
			t.Fatalf("page %d: %d with %d rows", page, r.status, len(rows))
		}
		if len(r.body) >= maxPageBytes {
			t.Errorf("page %d weighs %d bytes, want under %d", page, len(r.body), maxPageBytes)
		}
		sizes = append(sizes, fmt.Sprintf("page %d: %d rows, %d bytes", page, len(rows), len(r.body)))

		for _, k := range rows {
			seen[k]++
		}
	}
	t.Logf("the accounts table with %d accounts: %s", len(f.bots), strings.Join(sizes, "; "))
	for _, a := range f.bots {
		want := 1
		if slices.Contains(f.disabled, a.AccountKey) {
			want = 0
		}
		if seen[a.AccountKey] != want {
			t.Errorf("%s (%s) is on %d pages, want %d", a.AccountKey, a.Status, seen[a.AccountKey], want)
		}
	}
	if r := b.get("/accounts?page=9"); !slices.Equal(rowsOf(r.body), rowsOf(b.get("/accounts?page=4").body)) {
		t.Error("a page past the last does not show the last")
	}

	// The summary counts the bots shown and their last 24 hours.
	r := b.get("/accounts")
	wantSummary := fmt.Sprintf("<strong>197 bots</strong>: 188 active, 5 paused, 4 need re-login; %d messages received and %d replies sent in the last 24 h. <span class=\"muted\">3 removed or replaced not shown.</span>", f.messages, f.replies)
	if !strings.Contains(r.body, wantSummary) {
		t.Errorf("the summary is not %q:\n%s", wantSummary, between(r.body, `id="accounts-summary"`, "</p>"))
	}
	// Each row links to its conversations and to its workflows in the Temporal UI.
	for _, key := range rowsOf(r.body) {
		row := between(r.body, `data-account="`+key+`"`, "</li>")
		temporal := `href="http://127.0.0.1:8233/namespaces/bots-prod/workflows?query=IlinkAccount%3D%22` + key + `%22"`
		if !strings.Contains(row, temporal) || !strings.Contains(row, `href="/accounts/`+key+`/conversations"`) {
			t.Errorf("row %s lacks its links (%s):\n%s", key, temporal, row)
			break
		}
	}

	// A search finds one bot by a part of its owner's id, its iLink id or its key, in any case.
	for _, q := range []string{"OWNER137", "C0FFEE000137", f.bots[137].AccountKey[4:20]} {
		r := b.get("/accounts?q=" + url.QueryEscape(q))
		if rows := rowsOf(r.body); len(rows) != 1 || rows[0] != f.bots[137].AccountKey {
			t.Errorf("search %q: %v, want %s", q, rows, f.bots[137].AccountKey)
		}
	}
	if r := b.get("/accounts?q=nobody-has-this"); len(rowsOf(r.body)) != 0 || !strings.Contains(r.body, `id="no-match"`) {
		t.Error("a search without a match does not say so")
	}
	// A status filter shows that status only; removed bots show when asked for.
	for status, want := range map[string][]string{vocab.AccountPaused: f.paused, vocab.AccountNeedsRelogin: f.relogin,
		vocab.AccountDisabled: f.disabled} {
		r := b.get("/accounts?status=" + status)
		rows := rowsOf(r.body)
		slices.Sort(rows)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(rows, w) {
			t.Errorf("status %s: %v, want %v", status, rows, w)
		}
		if status == vocab.AccountNeedsRelogin {
			for _, key := range rows {
				if row := between(r.body, `data-account="`+key+`"`, "</li>"); !strings.Contains(row, `href="/enroll?account=`+key+`"`) {
					t.Errorf("the row of %s, whose token died, has no re-enroll link:\n%s", key, row)
				}
			}
		}
	}
	if r := b.get("/accounts?all=1&page=4"); len(rowsOf(r.body)) != 50 || !strings.Contains(r.body, "<strong>200 bots</strong>") {
		t.Errorf("with removed and replaced accounts: page 4 has %d rows", len(rowsOf(r.body)))
	}
	// Sorted by the last day's messages, the busiest bot comes first.
	if rows := rowsOf(b.get("/accounts?sort=messages&dir=desc").body); len(rows) == 0 || rows[0] != f.busiest {
		t.Errorf("sorted by messages: %v first, want %s", rows[:min(1, len(rows))], f.busiest)
	}
	// The holder's row keeps the held replies' summary.
	if row := between(b.get("/accounts?q="+f.holder).body, `data-account="`+f.holder+`"`, "</li>"); !strings.Contains(row, `data-held="1">1 waiting`) {
		t.Errorf("the holder's row: %s", row)
	}

	// In the browser, on a desktop screen.
	tb := newTab(t)
	tb.do("a desktop screen", chromedp.EmulateViewport(1280, 800))
	tb.login(c.url)
	rows := func() int {
		n, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](`document.querySelectorAll("li.account").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 50 {
		t.Fatalf("the browser shows %d rows, want 50", n)
	}
	// The route forms are copied into every row, each posting to its own row's account.
	tb.waitFor("the route forms in every row", `[...document.querySelectorAll("li.account")].every(li =>
		li.querySelector("form.route-webhook") && li.querySelector("form.route-mcp") &&
		li.querySelector("form.route-webhook").getAttribute("action") === "/accounts/" + li.dataset.account + "/route")`)
	tb.do("search",
		chromedp.SendKeys(chromedp.CSS("#q"), "owner137"),
		chromedp.Click(chromedp.CSS("#apply-filters")),
	)
	tb.waitFor("the search's one row", `location.search.includes("q=owner137") && document.querySelectorAll("li.account").length === 1`)
	if got := tb.text("li.account code"); got != f.bots[137].AccountKey {
		t.Errorf("the search shows %s, want %s", got, f.bots[137].AccountKey)
	}
	tb.do("filter by status",
		chromedp.Navigate(c.url+"/accounts"),
		chromedp.WaitVisible(chromedp.CSS("#status-filter")),
		chromedp.SetValue(chromedp.CSS("#status-filter"), vocab.AccountPaused),
		chromedp.Click(chromedp.CSS("#apply-filters")),
	)
	tb.waitFor("the paused bots", `location.search.includes("status=paused") && document.querySelectorAll("li.account").length === 5 &&
		[...document.querySelectorAll("li.account dd.status")].every(d => d.textContent.startsWith("paused"))`)
	tb.do("page 2",
		chromedp.Navigate(c.url+"/accounts"),
		chromedp.WaitVisible(chromedp.CSS("#pager")),
	)
	first := tb.text("li.account code")
	tb.do("next page", chromedp.Click(chromedp.CSS(`#pager a[rel="next"]`)))
	tb.waitFor("page 2", `location.search.includes("page=2") && document.querySelectorAll("li.account").length === 50`)
	if second := tb.text("li.account code"); second == first || !slices.Contains(rowsOf(b.get("/accounts?page=2").body), second) {
		t.Errorf("page 2 starts with %s (page 1 with %s)", second, first)
	}
	tb.do("sort by status", chromedp.Click(chromedp.CSS(`li.head a[href*="sort=status"]`)))
	tb.waitFor("sorted by status", `location.search.includes("sort=status") &&
		document.querySelector("li.account dd.status")?.textContent.startsWith("needs_relogin")`)
	if dir, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.querySelector('li.head a[href*="sort=status"]').className`)); err != nil || dir != "ascending" {
		t.Errorf("the status column is marked %q %v, want ascending", dir, err)
	}
	tb.docScreenshot("web-ui-accounts.png")

	// The table updates itself, in place.
	one := f.bots[137]
	tb.do("one bot", chromedp.Navigate(c.url+"/accounts?q=owner137"), chromedp.WaitVisible(chromedp.CSS("li.account")))
	if _, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.PauseAccount(c.ctx, time.Now(), one.AccountKey, one.Generation, time.Now().Add(time.Hour), "operator (test)"); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("the table shows the pause", `window.notReloaded === true && document.querySelector("li.account dd.status")?.textContent.startsWith("paused")`)
	// Not while a menu of the table is open: a refresh comes and goes, the row stays.
	tb.do("open the route forms", chromedp.Click(chromedp.CSS("li.account details.route-forms summary")))
	ticks, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.getElementById("refresh-state").dataset.ticks || "0"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.ResumeAccount(c.ctx, time.Now(), one.AccountKey, one.Generation); err != nil {
		t.Fatal(err)
	}
	tb.waitFor("a refresh while the menu is open", fmt.Sprintf(`Number(document.getElementById("refresh-state").dataset.ticks || 0) > %s`, ticks))
	if st := tb.text("li.account dd.status"); !strings.HasPrefix(st, "paused") {
		t.Errorf("the row changed under the open menu: %q", st)
	}
	tb.do("close the route forms", chromedp.Click(chromedp.CSS("li.account details.route-forms summary")))
	tb.waitFor("the table shows the resume", `window.notReloaded === true && document.querySelector("li.account dd.status")?.textContent.startsWith("active")`)

	if os.Getenv("ILINKFLOW_DOCS_SCREENSHOTS") != "" {
		tb.do("a phone screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch),
			chromedp.Navigate(c.url+"/accounts?sort=status"), chromedp.WaitVisible(chromedp.CSS("li.account")))
		tb.docScreenshot("web-ui-accounts-phone.png")
	}
}

// between is the part of s after the first from, up to the next to.
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	before, _, _ := strings.Cut(after, to)
	return before
}

// Without a Temporal UI configured, no row links to one.
func TestTheAccountsTableLinksToTheTemporalUIOnlyWhenOneIsConfigured(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t)
	key := c.register(1).AccountKey
	b := newBrowser(t, c.url)
	b.login()
	r := b.get("/accounts")
	if len(rowsOf(r.body)) != 1 || strings.Contains(r.body, `class="temporal"`) || strings.Contains(r.body, "/namespaces/") {
		t.Errorf("without a Temporal UI the row of %s links to one:\n%s", key, between(r.body, `data-account="`+key+`"`, "</li>"))
	}
	if r := b.get("/accounts/" + key + "/conversations"); r.status != http.StatusOK || strings.Contains(r.body, "/namespaces/") {
		t.Errorf("without a Temporal UI the conversations page links to one: %d", r.status)
	}
}

// conversation is a bot with two messages (the first answered, the second's reply
// rejected by iLink and given up by its agent) and another bot with a message of its own.
type conversation struct {
	bot, other                     store.Account
	answered, gaveUp, othersReport string // message keys
	texts                          []string
}

func (c *consoleUI) conversation() *conversation {
	c.t.Helper()
	v := &conversation{bot: c.register(1), other: c.register(2)}
	say := func(s string) string { v.texts = append(v.texts, s); return s }
	now := time.Now()
	at := now.Add(-2 * time.Hour)
	res := c.message(v.bot, v.bot.OwnerPeerID, at, say("where is my parcel? secret-one"))
	v.answered = res.Deliverable.MessageKey
	c.send(c.session(res, at), at, say("on its way, secret-reply-one"), replySent)
	if _, err := c.st.FinishMessage(c.ctx, at, v.answered, vocab.MessageHandled, ""); err != nil {
		c.t.Fatal(err)
	}
	at = now.Add(-time.Hour)
	res = c.message(v.bot, v.bot.OwnerPeerID, at, say("and the invoice? secret-two"))
	v.gaveUp = res.Deliverable.MessageKey
	c.send(c.session(res, at), at, say("here it is, secret-reply-two"), replyRejected)
	if _, err := c.st.FinishMessage(c.ctx, at, v.gaveUp, vocab.MessageFailed, "the agent gave up"); err != nil {
		c.t.Fatal(err)
	}
	v.othersReport = c.message(v.other, v.other.OwnerPeerID, now, say("another bot's secret-three")).Deliverable.MessageKey
	return v
}

// The conversations page lists the bot's windows (sends used and left), its messages with
// their statuses and its replies with their outcomes, and none of their text.
func TestTheConversationsPageShowsStatusesAndOutcomesButNoText(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t)
	v := c.conversation()
	b := newBrowser(t, c.url)
	b.login()
	r := b.get("/accounts/" + v.bot.AccountKey + "/conversations")
	if r.status != http.StatusOK {
		t.Fatalf("conversations page: %d %s", r.status, r.body)
	}
	for _, want := range []string{
		`id="m-` + v.answered + `"`, `id="m-` + v.gaveUp + `"`,
		`<td class="status">handled</td>`, `<td class="status">failed <small>the agent gave up</small></td>`,
		`<td class="state">open</td><td class="used">1 of 10</td><td class="left">9</td>`,
		`<td class="state">superseded <small>superseded_by_newer_message</small></td>`,
		`<td class="outcome">sent</td>`, `<td class="outcome">failed <small>rejected</small> <small>ilink_rejected</small></td>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the conversations page lacks %q", want)
		}
	}
	if strings.Index(r.body, `id="m-`+v.gaveUp+`"`) > strings.Index(r.body, `id="m-`+v.answered+`"`) {
		t.Error("the messages are not newest first")
	}
	for _, text := range v.texts {
		if strings.Contains(r.body, text) {
			t.Errorf("the conversations page shows the text %q", text)
		}
	}
	if strings.Contains(r.body, v.othersReport) || strings.Contains(r.body, `id="revealed"`) {
		t.Error("the conversations page shows another bot's message or a revealed text")
	}
	if r := b.get("/accounts/ilk_00000000000000000000000000000000/conversations"); r.status != http.StatusNotFound {
		t.Errorf("an unknown account's conversations: %d", r.status)
	}
}

// Reveal shows the text of exactly the message it names, and of no other message or
// reply; the log says who asked for which message (at INFO), never the text.
func TestRevealShowsExactlyThatMessagesTextAndLogsTheRevealWithoutTheText(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t)
	v := c.conversation()
	b := newBrowser(t, c.url)
	b.login()
	page := "/accounts/" + v.bot.AccountKey + "/conversations"
	if r := b.get(page); !strings.Contains(r.body, `href="`+page+`?reveal=`+v.gaveUp+`#revealed"`) {
		t.Fatalf("the message has no reveal link:\n%s", between(r.body, `id="m-`+v.gaveUp+`"`, "</tr>"))
	}
	r := b.get(page + "?reveal=" + v.gaveUp)
	if got := between(r.body, `<pre id="revealed-text">`, "</pre>"); got != "and the invoice? secret-two" {
		t.Errorf("the revealed text is %q", got)
	}
	for _, other := range []string{v.texts[0], v.texts[1], v.texts[3], v.texts[4]} {
		if strings.Contains(r.body, other) {
			t.Errorf("revealing %s shows %q too", v.gaveUp, other)
		}
	}
	if !strings.Contains(r.body, `class="message status-failed revealed-row" id="m-`+v.gaveUp+`"`) {
		t.Error("the revealed message's row is not marked")
	}
	logs := c.logs.String()
	line := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "webui: message text revealed") {
			line = l
		}
	}
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "account="+v.bot.AccountKey) || !strings.Contains(line, "message="+v.gaveUp) {
		t.Errorf("the reveal is not logged with the account and the message: %q", line)
	}
	for _, text := range v.texts {
		if strings.Contains(logs, text) {
			t.Errorf("the log holds the text %q", text)
		}
	}
	if n := strings.Count(logs, "message text revealed"); n != 1 {
		t.Errorf("%d reveals logged, want 1", n)
	}
	// Once the user's content is erased, the reveal says so: not absorbed, no text.
	if _, err := c.st.ForgetPeer(c.ctx, time.Now(), store.ForgetInput{PeerID: v.bot.OwnerPeerID, AccountKey: v.bot.AccountKey, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	r = b.get(page + "?reveal=" + v.gaveUp)
	if !strings.Contains(r.body, `id="revealed-erased"`) || strings.Contains(r.body, `id="revealed-absorbed"`) || strings.Contains(r.body, `id="revealed-text"`) {
		t.Errorf("the reveal of an erased message does not say it was erased:\n%s", between(r.body, `id="revealed"`, "</section>"))
	}
}

// The conversations page needs the operator's session (without one, the login form; no
// text either way); another bot's message, or a key no message has, reveals nothing and
// logs no reveal; and no bot token or operator token is in any of its answers.
func TestTheConversationsPageNeedsASessionRevealsNoOtherBotsMessageAndHoldsNoToken(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t)
	v := c.conversation()
	page := "/accounts/" + v.bot.AccountKey + "/conversations"
	var bodies []response
	for _, cookie := range []string{"", "forged-session-id"} {
		hdr := map[string]string{}
		if cookie != "" {
			hdr["Cookie"] = webui.SessionCookie + "=" + cookie
		}
		for _, p := range []string{page, page + "?reveal=" + v.gaveUp} {
			r := newBrowser(t, c.url).do(http.MethodGet, p, nil, hdr)
			bodies = append(bodies, r)
			if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
				t.Errorf("GET %s (cookie %q): %d to %q, want a redirect to the login form", p, cookie, r.status, r.header.Get("Location"))
			}
		}
	}
	b := newBrowser(t, c.url)
	b.login()
	for _, mk := range []string{v.othersReport, "im_00000000000000000000000000000000", "not-a-message-key", "<script>"} {
		r := b.get(page + "?reveal=" + url.QueryEscape(mk))
		bodies = append(bodies, r)
		if r.status != http.StatusOK || strings.Contains(r.body, `id="revealed-text"`) || !strings.Contains(r.body, `id="revealed-missing"`) {
			t.Errorf("reveal %q of another bot or of nothing: %d, want the page saying there is nothing to reveal", mk, r.status)
		}
	}
	// The other bot's own page reveals its message (the refusals were for the key's owner).
	if r := b.get("/accounts/" + v.other.AccountKey + "/conversations?reveal=" + v.othersReport); !strings.Contains(r.body, "another bot&#39;s secret-three") {
		t.Errorf("the other bot's own page does not reveal its message")
	}
	if n := strings.Count(c.logs.String(), "message text revealed"); n != 1 {
		t.Errorf("%d reveals logged, want the other bot's own only", n)
	}
	// None of these answers holds a text; none of them, nor the bot's page, nor its reveal, nor
	// the accounts table, holds a token.
	for i, r := range bodies {
		for _, text := range v.texts {
			if strings.Contains(r.body, text) {
				t.Errorf("answer %d (%d) holds the text %q", i, r.status, text)
			}
		}
	}
	bodies = append(bodies, b.get(page), b.get(page+"?reveal="+v.gaveUp), b.get("/accounts"))
	for i, r := range bodies {
		for _, secret := range []string{botToken(1), botToken(2), "bot-token-secret", operatorToken} {
			if strings.Contains(r.body, secret) {
				t.Errorf("answer %d (%d) holds a token", i, r.status)
			}
		}
	}
}

// The worker's --temporal-ui-url (ILINKFLOW_TEMPORAL_UI_URL) takes an http(s) URL only,
// and the worker hands it to its web front end with its Temporal namespace: each row of the
// accounts table it serves links to the bot's workflows in that namespace.
func TestTheWorkersTemporalUIURLAndNamespaceReachTheAccountsTable(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string {
		return func(k string) string {
			if k == sealing.EnvKeys {
				return testkit.KeySpec
			}
			return m[k]
		}
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{nil, []string{"--temporal-ui-url", "http://127.0.0.1:8233/"}, "http://127.0.0.1:8233"},
		{map[string]string{"ILINKFLOW_TEMPORAL_UI_URL": "https://temporal.example/ui"}, nil, "https://temporal.example/ui"},
	} {
		cfg, err := gateway.ConfigFromEnv(env(c.env), c.args)
		if err != nil || cfg.TemporalUIURL != c.want {
			t.Errorf("%v %v: %q %v, want %q", c.env, c.args, cfg.TemporalUIURL, err, c.want)
		}
	}
	for _, bad := range []string{"127.0.0.1:8233", "ftp://temporal.example", "http://user:pw@temporal.example", "http://temporal.example/?q=1", "javascript:alert(1)"} {
		if _, err := gateway.ConfigFromEnv(env(nil), []string{"--temporal-ui-url", bad}); err == nil {
			t.Errorf("--temporal-ui-url %q was taken", bad)
		}
	}
	var usage strings.Builder
	gateway.Usage(&usage)
	if !strings.Contains(usage.String(), "--temporal-ui-url") || !strings.Contains(usage.String(), "ILINKFLOW_TEMPORAL_UI_URL") {
		t.Error("the usage does not mention --temporal-ui-url")
	}

	// A worker serving its web front end with the setting.
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = dev.HostPort, ns, devserver.TaskQueue(t)
	cfg.ShutdownGrace, cfg.HTTPAddr = time.Second, "127.0.0.1:0"
	cfg.UIToken, cfg.TemporalUIURL = tokenSecret(), "http://temporal.example:8233"
	started := make(chan net.Addr, 2)
	ready, done := make(chan struct{}), make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler), Pool: pool, Keyring: keyring,
			HTTPStarted: func(a net.Addr) { started <- a }, Ready: func(gateway.ReconcileReport) { close(ready) }})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the worker did not start: %v", err)
	}
	st, err := store.New(pool, keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	a, err := storetest.RegisterAccount(context.Background(), st, time.Now(), store.ConfirmInput{ProviderAccountID: "c0ffee777777@im.bot",
		OwnerPeerID: "o9cq8Owner777@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(botToken(777))})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, "http://"+(<-started).String())
	if r := b.do(http.MethodPost, gateway.UIPath+"/login", url.Values{"token": {operatorToken}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("login: %d", r.status)
	}
	r := b.get(gateway.UIPath + "/accounts")
	want := `href="http://temporal.example:8233/namespaces/` + url.PathEscape(ns) + `/workflows?query=IlinkAccount%3D%22` + a.AccountKey + `%22"`
	if r.status != http.StatusOK || !strings.Contains(r.body, want) {
		t.Errorf("the worker's accounts table does not link to %s: %d\n%s", want, r.status, between(r.body, `data-account="`+a.AccountKey+`"`, "</li>"))
	}
}

// Without JavaScript a bot's route forms are on ?route=KEY (its conversations page links
// there): the server renders them in that row only, and a change made there returns to the
// table as it was (its search).
func TestWithoutJavaScriptTheRouteFormsOfOneBotAreRenderedInItsRowAndReturnToTheTable(t *testing.T) {
	t.Parallel()
	c := newConsoleUI(t)
	one, other := c.register(1), c.register(2)
	if _, err := c.st.CreateMCPAgent(c.ctx, time.Now(), "support", "test"); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, c.url)
	b.login()
	key := one.AccountKey
	if r := b.get("/accounts"); strings.Contains(between(r.body, `data-account="`+key+`"`, "</li>"), "<form method=\"post\" action=\"/accounts/"+key+"/route") {
		t.Error("the plain table renders a row's route forms (they come from the page's template)")
	}
	conv := b.get("/accounts/" + key + "/conversations")
	link := `href="/accounts?q=` + key + `&amp;route=` + key + `"`
	if !strings.Contains(conv.body, link) {
		t.Fatalf("the conversations page does not link to the route forms (%s)", link)
	}
	r := b.get("/accounts?q=" + key + "&route=" + key)
	row := between(r.body, `data-account="`+key+`"`, "</li>")
	action := `action="/accounts/` + key + `/route?q=` + key + `"`
	if strings.Count(row, action) != 5 || !strings.Contains(row, `id="webhook-url-`+key+`"`) {
		t.Fatalf("the row of %s lacks its five route forms posting to %s:\n%s", key, action, row)
	}
	if strings.Contains(r.body, `action="/accounts/`+other.AccountKey+`/route`) {
		t.Error("another row has route forms too")
	}
	csrf := csrfField.FindStringSubmatch(r.body)[1]
	res := b.do(http.MethodPost, "/accounts/"+key+"/route?q="+key, url.Values{"csrf": {csrf}, "kind": {"echo"}}, sameOrigin)
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/accounts?q="+key {
		t.Fatalf("route from the filtered table: %d to %q, want back to /accounts?q=%s", res.status, res.header.Get("Location"), key)
	}
	if rt, found, err := c.st.GetRoute(c.ctx, key); err != nil || !found || rt.Kind != vocab.RouteEcho {
		t.Fatalf("route after the form: %+v %v %v", rt, found, err)
	}
}
