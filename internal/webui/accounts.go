package webui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// --- accounts ---

// The accounts table (GET /accounts) is built for hundreds of bots: it is driven by its
// query string (accountQuery), shows accountsPerPage rows a page, and keeps each row small
// (one form for pause, resume and remove; the route forms are one <template> the page's
// script copies into each row, or rendered server-side for the one row ?route=KEY names).

// accountsPerPage is how many accounts one page of the accounts table shows.
const accountsPerPage = 50

// activitySpan is the span of the accounts table's activity counts: the last 24 hours.
const activitySpan = 24 * time.Hour

// Columns the accounts table sorts by (its sort parameter), and the direction each starts
// in: the values an operator looks for first (the stalest poll, the busiest bot).
var accountSorts = []struct {
	Key, Label, Dir string
}{
	{"key", "Account", "asc"},
	{"status", "Status", "asc"},
	{"poll", "Health", "asc"},
	{"messages", "Last 24 h", "desc"},
	{"windows", "Open windows", "desc"},
	{"held_replies", "Held replies", "desc"},
	{"route", "Route", "asc"},
}

// accountQuery is the state of the accounts table, all in its query string: q (a
// case-insensitive substring of the account key, the bot's iLink id or its owner's id),
// status (one status, or every one), all (also the removed and replaced accounts, hidden
// by default), sort and dir (accountSorts; ties by account key), page (from 1), and route
// (the account whose route forms the server renders, for a browser without JavaScript).
type accountQuery struct {
	Q, Status, Sort, Dir string
	All                  bool
	Page                 int
	Route                string
}

func parseAccountQuery(v url.Values) accountQuery {
	q := accountQuery{Q: strings.TrimSpace(v.Get("q")), Sort: "key", Dir: "asc", Page: 1, All: v.Get("all") == "1"}
	for len(q.Q) > 200 { // whole characters
		_, size := utf8.DecodeLastRuneInString(q.Q)
		q.Q = q.Q[:len(q.Q)-size]
	}
	if st := v.Get("status"); slices.Contains(vocab.AccountStatuses, st) {
		q.Status = st
	}
	for _, c := range accountSorts {
		if c.Key == v.Get("sort") {
			q.Sort, q.Dir = c.Key, c.Dir
		}
	}
	if d := v.Get("dir"); d == "asc" || d == "desc" {
		q.Dir = d
	}
	if n, err := strconv.Atoi(v.Get("page")); err == nil && n > 1 {
		q.Page = n
	}
	if k := v.Get("route"); accountKeyPattern.MatchString(k) {
		q.Route = k
	}
	return q
}

// values is the query string of q without its defaults (and without route).
func (q accountQuery) values() url.Values {
	v := url.Values{}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.All {
		v.Set("all", "1")
	}
	if q.Sort != "key" || q.Dir != "asc" {
		v.Set("sort", q.Sort)
		v.Set("dir", q.Dir)
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	return v
}

// query is "?…" for q, or "" for the table's default state.
func (q accountQuery) query() string {
	if e := q.values().Encode(); e != "" {
		return "?" + e
	}
	return ""
}

// hidden reports whether the table leaves the account out by default: removed and
// replaced accounts are shown with all=1, or when their status is the one asked for.
func (q accountQuery) hidden(status string) bool {
	return !q.All && q.Status != status && (status == vocab.AccountReplaced || status == vocab.AccountDisabled)
}

func (q accountQuery) matches(a operator.Account) bool {
	if q.hidden(a.Status) || (q.Status != "" && a.Status != q.Status) {
		return false
	}
	if q.Q == "" {
		return true
	}
	needle := strings.ToLower(q.Q)
	for _, hay := range []string{a.AccountKey, a.ProviderAccountID, a.Owner} {
		if strings.Contains(strings.ToLower(hay), needle) {
			return true
		}
	}
	return false
}

// backTo is where an action of the accounts table returns: the table in the state its
// form was posted from (the form's action carries it as its query string).
func (s *server) backTo(r *http.Request) string {
	return s.url("/accounts") + parseAccountQuery(r.URL.Query()).query()
}

// statusRank orders the statuses by what needs the operator first.
var statusRank = map[string]int{vocab.AccountNeedsRelogin: 0, vocab.AccountPaused: 1, vocab.AccountActive: 2,
	vocab.AccountReplaced: 3, vocab.AccountDisabled: 4}

// accountRow is one row of the accounts table.
type accountRow struct {
	operator.Account
	Activity store.AccountActivity
	Held     heldSummary
	// Poll says when the last good poll was ("12s ago"), PollAt its time ("": never).
	Poll   string
	PollAt string
	// Until is the end of a pause ("in 45m"), UntilAt its time.
	Until, UntilAt string
	// Error says the bot's newest error of the last 24 hours ("" without one), ErrorAt
	// how long ago it was.
	Error, ErrorAt string
	// Blocked is the end of a throttle penalty still running ("in 3m"), or "".
	Blocked, BlockedAt string
	// Temporal links to the bot's workflows in the Temporal UI ("" without one).
	Temporal string
}

// accountsSummary is the summary line of the accounts table.
type accountsSummary struct {
	Bots, Active, Paused, Relogin int
	// Hidden counts the removed and replaced accounts left out.
	Hidden             int
	Messages, Replies  int64
	From, To, Matching int
}

// pageLink is one link of the accounts table's pager (Page 0: a gap).
type pageLink struct {
	Page    int
	URL     string
	Current bool
}

// sortLink is one sortable column header.
type sortLink struct {
	Label, URL string
	// Dir is the column's current direction (ascending, descending) or "" when the table
	// is sorted by another column.
	Dir string
}

// routeForms is what the route forms of one row are rendered with: a row's own (?route=)
// or the page's <template>, whose key the page's script fills in.
type routeForms struct {
	Prefix, CSRF, Key, Back string
	MinSecret               int
	Agents                  []store.MCPAgent
	Agent                   string
	Clients                 []store.ILinkClient
	Client                  string
	WorkflowType, TaskQueue string
}

// routeKeyPlaceholder stands for the account key in the page's <template> of the route
// forms (no account key has underscores around it).
const routeKeyPlaceholder = "__KEY__"

func (s *server) accountsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := parseAccountQuery(r.URL.Query())
	now := time.Now()
	var accounts []operator.Account
	var activity map[string]store.AccountActivity
	var agents []store.MCPAgent
	var clients []store.ILinkClient
	var held map[string]heldSummary
	for _, read := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"list the accounts", func(ctx context.Context) (err error) {
			accounts, err = operator.Accounts(ctx, s.cfg.Store, "", true)
			return err
		}},
		{"read the accounts' activity", func(ctx context.Context) (err error) {
			activity, err = s.cfg.Store.AccountActivity(ctx, now.Add(-activitySpan))
			return err
		}},
		{"list the MCP agents", func(ctx context.Context) (err error) {
			agents, err = s.cfg.Store.ListMCPAgents(ctx)
			return err
		}},
		{"list the iLink clients", func(ctx context.Context) (err error) {
			clients, err = s.cfg.Store.ListILinkClients(ctx)
			return err
		}},
		{"count the held replies", func(ctx context.Context) (err error) {
			held, err = s.heldPerAccount(ctx)
			return err
		}},
	} {
		if err := s.bounded(r, read.do); err != nil {
			s.internal(w, r, read.what, err)
			return
		}
	}

	var sum accountsSummary
	rows := make([]accountRow, 0, len(accounts))
	for _, a := range accounts {
		if q.hidden(a.Status) {
			sum.Hidden++
		} else {
			sum.Bots++
			switch a.Status {
			case vocab.AccountActive:
				sum.Active++
			case vocab.AccountPaused:
				sum.Paused++
			case vocab.AccountNeedsRelogin:
				sum.Relogin++
			}
			sum.Messages += int64(activity[a.AccountKey].Messages)
			sum.Replies += int64(activity[a.AccountKey].Replies)
		}
		if q.matches(a) {
			rows = append(rows, accountRow{Account: a, Activity: activity[a.AccountKey], Held: held[a.AccountKey]})
		}
	}
	sortAccounts(rows, q.Sort, q.Dir)
	pages := max(1, (len(rows)+accountsPerPage-1)/accountsPerPage)
	q.Page = min(q.Page, pages)
	from := (q.Page - 1) * accountsPerPage
	shown := rows[from:min(from+accountsPerPage, len(rows))]
	sum.Matching, sum.From, sum.To = len(rows), from+1, from+len(shown)
	for i := range shown {
		s.describe(&shown[i], now)
	}

	back := q.query()
	forms := routeForms{Prefix: s.cfg.Prefix, CSRF: sess.csrf, Key: routeKeyPlaceholder, Back: back,
		MinSecret: vocab.MinWebhookSecretBytes, Agents: agents, Clients: clients}
	var own *routeForms
	for _, row := range shown {
		if row.AccountKey == q.Route && routable(row.Status) {
			f := forms
			f.Key, f.Agent, f.WorkflowType, f.TaskQueue = row.AccountKey, row.RouteMCPAgent, row.RouteWorkflowType, row.RouteTaskQueue
			f.Client = row.RouteILinkClient
			own = &f
		}
	}
	page := func(n int) string {
		p := q
		p.Page = n
		return s.url("/accounts") + p.query()
	}
	var pager []pageLink
	for n := 1; n <= pages; n++ {
		if pages > 12 && n != 1 && n != pages && (n < q.Page-2 || n > q.Page+2) {
			if len(pager) > 0 && pager[len(pager)-1].Page != 0 {
				pager = append(pager, pageLink{})
			}
			continue
		}
		pager = append(pager, pageLink{Page: n, URL: page(n), Current: n == q.Page})
	}
	var sorts []sortLink
	for _, c := range accountSorts {
		p := q
		p.Page, p.Sort, p.Dir = 1, c.Key, c.Dir
		l := sortLink{Label: c.Label}
		if q.Sort == c.Key {
			l.Dir = map[string]string{"asc": "ascending", "desc": "descending"}[q.Dir]
			p.Dir = map[string]string{"asc": "desc", "desc": "asc"}[q.Dir]
		}
		l.URL = s.url("/accounts") + p.query()
		sorts = append(sorts, l)
	}
	data := map[string]any{"Rows": shown, "Query": q, "Back": back, "Summary": sum, "Total": len(accounts),
		"Statuses": vocab.AccountStatuses, "Sorts": sorts, "Pager": pager, "Pages": pages,
		"PrevPage": pageIf(q.Page > 1, page(q.Page-1)), "NextPage": pageIf(q.Page < pages, page(q.Page+1)),
		"PauseChoices": pauseChoices, "RouteForms": forms, "OwnRouteForms": own}
	s.render(w, http.StatusOK, "accounts", sess, data)
}

// bounded runs one read of a page, bounded by Config.Timeout.
func (s *server) bounded(r *http.Request, read func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	return read(ctx)
}

func pageIf(ok bool, u string) string {
	if ok {
		return u
	}
	return ""
}

// routable reports whether an account's route may be changed.
func routable(status string) bool {
	return status == vocab.AccountActive || status == vocab.AccountPaused || status == vocab.AccountNeedsRelogin
}

// sortAccounts sorts the rows by column (accountSorts) in direction dir, ties by key.
func sortAccounts(rows []accountRow, column, dir string) {
	cmpOf := map[string]func(a, b *accountRow) int{
		"status": func(a, b *accountRow) int { return cmp.Compare(statusRank[a.Status], statusRank[b.Status]) },
		"poll": func(a, b *accountRow) int {
			return cmp.Compare(unixOrZero(a.LastPollAt), unixOrZero(b.LastPollAt))
		},
		"messages": func(a, b *accountRow) int {
			return cmp.Or(cmp.Compare(a.Activity.Messages, b.Activity.Messages), cmp.Compare(a.Activity.Replies, b.Activity.Replies))
		},
		"windows":      func(a, b *accountRow) int { return cmp.Compare(a.Activity.OpenWindows, b.Activity.OpenWindows) },
		"held_replies": func(a, b *accountRow) int { return cmp.Compare(a.Held.Replies, b.Held.Replies) },
		"route":        func(a, b *accountRow) int { return strings.Compare(a.RouteState(), b.RouteState()) },
	}[column]
	slices.SortStableFunc(rows, func(a, b accountRow) int {
		c := 0
		if cmpOf != nil {
			c = cmpOf(&a, &b)
			if dir == "desc" {
				c = -c
			}
		}
		if c != 0 {
			return c
		}
		if column == "key" && dir == "desc" {
			return strings.Compare(b.AccountKey, a.AccountKey)
		}
		return strings.Compare(a.AccountKey, b.AccountKey)
	})
}

func unixOrZero(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

// describe fills in what a row says in words.
func (s *server) describe(row *accountRow, now time.Time) {
	if row.LastPollAt != nil {
		row.Poll, row.PollAt = relative(*row.LastPollAt, now), stamp(*row.LastPollAt)
	}
	if row.PauseUntil != nil {
		row.Until, row.UntilAt = relative(*row.PauseUntil, now), stamp(*row.PauseUntil)
	}
	if b := row.SendsBlockedUntil; b != nil && b.After(now) {
		row.Blocked, row.BlockedAt = relative(*b, now), stamp(*b)
	}
	if e := row.Activity.LastError; e != nil {
		row.Error, row.ErrorAt = errorWords(e.Kind), relative(e.At, now)
		if e.Code != "" {
			row.Error += " (" + e.Code + ")"
		}
	}
	row.Temporal = s.temporalLink(row.AccountKey)
}

// errorWords says an store.ActivityError's kind.
func errorWords(kind string) string {
	switch kind {
	case vocab.FailRejected:
		return "iLink rejected a send"
	case vocab.FailThrottled:
		return "iLink throttled a send"
	case vocab.FailStaleToken:
		return "iLink refused the bot token"
	case vocab.FailTransport:
		return "a send did not reach iLink"
	case store.ActivityUnknownOutcome:
		return "a send's outcome is unknown"
	case store.ActivityQuarantined:
		return "a page was quarantined"
	}
	return "a send failed"
}

// temporalLink is the Temporal UI's list of the bot's workflows (every workflow of a bot
// carries its key as the search attribute wfapi.AccountAttribute), or "" when no Temporal
// UI is configured (Config.TemporalUIURL; New leaves it empty when it is not a BaseURL).
func (s *server) temporalLink(key string) string {
	base := s.cfg.TemporalUIURL
	if base == "" {
		return ""
	}
	return base + "/namespaces/" + url.PathEscape(s.cfg.Namespace) + "/workflows?query=" +
		url.QueryEscape(wfapi.AccountAttribute.GetName()+`="`+key+`"`)
}

// relative says t from now in a few characters: "12s ago", "in 3h", "2d ago".
func relative(t, now time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// stamp is t as a <time> element's datetime and a status's JSON time ("" for the zero
// time).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// heldSummary is what one bot holds still to send: replies its windows could not carry,
// waiting for their conversations' next windows.
type heldSummary struct {
	Replies       int64
	Bytes         int64
	Conversations int
}

// heldPerAccount sums the held replies still to send per bot (the accounts page shows the
// zero summary of a bot that holds none).
func (s *server) heldPerAccount(ctx context.Context) (map[string]heldSummary, error) {
	counts, err := s.cfg.Store.WaitingHeldCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]heldSummary{}
	for _, c := range counts {
		h := out[c.AccountKey]
		h.Replies += int64(c.Replies)
		h.Bytes += c.Bytes
		h.Conversations++
		out[c.AccountKey] = h
	}
	return out, nil
}

func (s *server) steer(w http.ResponseWriter, r *http.Request, sess *session) {
	key, verb := r.PathValue("key"), r.PathValue("verb")
	if !accountKeyPattern.MatchString(key) || (verb != operator.Pause && verb != operator.Resume && verb != operator.Remove) {
		s.fail(w, r, http.StatusNotFound, "No such account or operation.")
		return
	}
	req := operator.SteerRequest{Verb: verb, AccountKey: key, Reason: "operator (web UI)"}
	if verb == operator.Pause {
		for _, c := range pauseChoices {
			if c.Value == r.PostFormValue("for") {
				req.PauseFor = c.D
			}
		}
		if req.PauseFor == 0 {
			s.fail(w, r, http.StatusBadRequest, "Choose how long to pause.")
			return
		}
	}
	res, err := operator.Steer(r.Context(), s.cfg.Store, s.cfg.Temporal, req)
	if errors.Is(err, store.ErrAccountNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		s.log.Warn("webui: "+verb, "account", key, "error", err)
		s.setFailure(sess, fmt.Sprintf("%s %s failed: %s", verb, key, steerFailure(err)))
		http.Redirect(w, r, s.backTo(r), http.StatusSeeOther)
		return
	}
	msg := fmt.Sprintf("%s is now %s", res.AccountKey, res.Status)
	if !res.PollerSignalled {
		msg += " (no running poller to tell)"
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.backTo(r), http.StatusSeeOther)
}

// steerFailure says why a pause, resume or removal failed, by the store's code, in a
// short, stable message; the error itself (the store's or Temporal's text) is logged.
func steerFailure(err error) string {
	switch store.CodeOf(err) {
	case vocab.CodeAccountNotActive:
		return "the account is not active (it may be removed or need a new login)."
	case vocab.CodeGenerationConflict:
		return "the account changed meanwhile (it was enrolled again): reload the page and try again."
	case vocab.CodeInvalidInput:
		return "the account's state does not allow it."
	case vocab.CodeUnavailable:
		return "the database is unavailable: try again in a moment."
	}
	return "the server log has the details."
}

// RouteBy is who the web UI records as the author of the route changes it makes (the
// route audit's changed_by), as its enrollments are requested by "webui".
const RouteBy = "webui"

// route sets a bot's route, or puts it back on the default route, from the accounts
// page's route forms: field kind is a vocab.RouteKinds kind or "default", and only the
// fields of that kind are read (an ilink route's login code approves that login,
// setRoute). The store validates the input (a refused change writes
// nothing) and audits the change. The webhook's secret is sealed by the store and never
// shown, logged or sent back; the page shows the webhook's host only.
func (s *server) route(w http.ResponseWriter, r *http.Request, sess *session) {
	key, kind := r.PathValue("key"), r.PostFormValue("kind")
	if !accountKeyPattern.MatchString(key) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if kind != operator.RouteDefault && !store.ValidRouteKind(kind) {
		s.fail(w, r, http.StatusBadRequest, "Choose a route.")
		return
	}
	now := time.Now()
	var msg string
	var err error
	if kind == operator.RouteDefault {
		var cleared bool
		if cleared, err = s.cfg.Store.ClearRoute(r.Context(), now, key, RouteBy); err == nil {
			msg = key + " is back on the default route (the worker's handler) from its next message"
			if !cleared {
				msg = key + " is on the default route already"
			}
		}
	} else {
		var rt store.Route
		var approved string
		if rt, approved, err = s.setRoute(r, now, key, kind); err == nil {
			shown := operator.Account{Route: rt.Kind, RouteWebhookHost: rt.WebhookHost, RouteWorkflowType: rt.WorkflowType,
				RouteTaskQueue: rt.TaskQueue, RouteMCPAgent: rt.MCPAgent, RouteILinkClient: rt.ILinkClient}
			msg = fmt.Sprintf("%s routes to %s from its next message", key, shown.RouteState())
			if approved != "" {
				msg += fmt.Sprintf("; login %s approved: the client's next poll of it collects this bot", approved)
			}
		}
	}
	if errors.Is(err, store.ErrAccountNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		// The store's error text holds neither the secret nor the webhook's URL.
		s.log.Warn("webui: route", "account", key, "kind", kind, "error", err)
		s.setFailure(sess, fmt.Sprintf("route %s failed: %s", key, routeFailure(err)))
		http.Redirect(w, r, s.backTo(r), http.StatusSeeOther)
		return
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.backTo(r), http.StatusSeeOther)
}

// routeInput reads the fields of one route kind from a route form.
func routeInput(r *http.Request, key, kind string) store.RouteInput {
	in := store.RouteInput{AccountKey: key, Kind: kind, By: RouteBy}
	switch kind {
	case vocab.RouteWebhook:
		in.WebhookURL = strings.TrimSpace(r.PostFormValue("webhook_url"))
		if v := r.PostFormValue("webhook_secret"); v != "" {
			in.WebhookSecret = sealing.NewSecret(v)
		}
		if v := strings.TrimSpace(r.PostFormValue("webhook_timeout")); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				d = -1 // refused by the store with the rule for a timeout
			}
			in.WebhookTimeout = d
		}
	case vocab.RouteWorkflow:
		in.WorkflowType = strings.TrimSpace(r.PostFormValue("workflow_type"))
		in.TaskQueue = strings.TrimSpace(r.PostFormValue("task_queue"))
	case vocab.RouteMCP:
		in.MCPAgent = r.PostFormValue("mcp_agent")
	case vocab.RouteILink:
		in.ILinkClient = r.PostFormValue("ilink_client")
	}
	return in
}

// routeFailure says why a route change failed: bad input in the store's own words (its
// validation messages name the fault, never the secret or the URL), anything else in a
// short, stable message by the store's code; the error itself is logged.
func routeFailure(err error) string {
	var se *store.Error
	switch store.CodeOf(err) {
	case vocab.CodeInvalidInput:
		if errors.As(err, &se) && se.Err == nil && se.Msg != "" {
			return se.Msg + "."
		}
		return "the database refused the input."
	case vocab.CodeMCPAgentNotFound:
		return "no MCP agent has that name (starter mcp-agent add NAME creates one)."
	case vocab.CodeILinkClientNotFound, vocab.CodeILinkLoginNotFound:
		return iLinkRouteFailure(store.CodeOf(err))
	case vocab.CodeUnavailable:
		return "the database is unavailable: try again in a moment."
	}
	return "the server log has the details."
}

// --- a bot's conversations ---

// conversationRows is how many of a bot's latest messages, replies and held replies its
// conversations page lists.
const conversationRows = 100

// messageKeyPattern is the form of a message key (store.Message.MessageKey).
var messageKeyPattern = regexp.MustCompile(`^im_[0-9a-f]{32}$`)

// convMessage is one inbound message of the conversations page (never its text).
type convMessage struct {
	store.ConversationMessage
	Received, ReceivedAt string
	// Window is the window the message opened (0: none).
	Window int64
	// Replies counts the attempts of the page that answer it.
	Replies int
	// Revealed marks the message whose text the page shows.
	Revealed bool
}

// convWindow is one reply window of the conversations page.
type convWindow struct {
	store.Window
	Used, Left       int32
	Issued, IssuedAt string
	// Expires says when the window ends or ended ("in 3h", "2h ago").
	Expires, ExpiresAt string
}

// convReply is one send attempt of the conversations page (never its content).
type convReply struct {
	store.ConversationReply
	When, WhenAt string
}

// convHeld is one held reply of the conversations page (never its content).
type convHeld struct {
	store.HeldReply
	When, WhenAt       string
	Expires, ExpiresAt string
}

// revealed is the one message whose text the operator asked to see.
type revealed struct {
	MessageKey string
	// Found: the bot has a message of that key; Absorbed: it has no text of its own any
	// more (a later message absorbed it); Erased: its content was erased.
	Found, Absorbed, Erased bool
	Text                    string
}

// conversationsPage shows one bot's open and recent reply windows, its latest messages
// with their statuses, its replies with their outcomes and its held replies: never a
// message's or a reply's text, but for the one message ?reveal=<message key> names, if it
// is the bot's. A reveal is logged at INFO with the account and the message key, never
// the text.
func (s *server) conversationsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	key := r.PathValue("key")
	if !accountKeyPattern.MatchString(key) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	var acct store.Account
	err := s.bounded(r, func(ctx context.Context) (err error) {
		acct, err = s.cfg.Store.GetAccount(ctx, key)
		return err
	})
	if errors.Is(err, store.ErrAccountNotFound) || store.CodeOf(err) == vocab.CodeInvalidInput {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		s.internal(w, r, "read the account", err)
		return
	}
	var conv store.Conversations
	if err := s.bounded(r, func(ctx context.Context) (err error) {
		conv, err = s.cfg.Store.Conversations(ctx, key, conversationRows)
		return err
	}); err != nil {
		s.internal(w, r, "read the bot's conversations", err)
		return
	}
	var shown *revealed
	if mk := r.URL.Query().Get("reveal"); mk != "" {
		shown = &revealed{MessageKey: mk}
		if messageKeyPattern.MatchString(mk) {
			var c store.MessageContent
			var found bool
			err := s.bounded(r, func(ctx context.Context) (err error) {
				c, found, err = s.cfg.Store.MessageText(ctx, key, mk)
				return err
			})
			if err != nil {
				s.internal(w, r, "read the message", err)
				return
			}
			if found {
				s.log.Info("webui: message text revealed", "account", key, "message", mk)
				shown.Found, shown.Absorbed, shown.Erased = true, c.Payload == nil && !c.Erased, c.Erased
				if c.Payload != nil {
					shown.Text = c.Payload.Summary
				}
			}
		}
	}

	now := time.Now()
	windowOf := map[string]int64{}
	var windows []convWindow
	for _, w := range conv.Windows {
		windowOf[w.SourceMessageKey] = w.ReplyWindowID
		windows = append(windows, convWindow{Window: w, Used: w.Reserved + w.Transmitted, Left: w.SendsLeft(),
			Issued: relative(w.IssuedAt, now), IssuedAt: stamp(w.IssuedAt),
			Expires: relative(w.ExpiresAt, now), ExpiresAt: stamp(w.ExpiresAt)})
	}
	repliesOf := map[string]int{}
	var replies []convReply
	for _, a := range conv.Replies {
		repliesOf[a.SourceMessageKey]++
		replies = append(replies, convReply{ConversationReply: a, When: relative(a.CreatedAt, now), WhenAt: stamp(a.CreatedAt)})
	}
	var messages []convMessage
	for _, m := range conv.Messages {
		messages = append(messages, convMessage{ConversationMessage: m, Received: relative(m.ReceivedAt, now),
			ReceivedAt: stamp(m.ReceivedAt), Window: windowOf[m.MessageKey], Replies: repliesOf[m.MessageKey],
			Revealed: shown != nil && shown.Found && shown.MessageKey == m.MessageKey})
	}
	var held []convHeld
	for _, h := range conv.Held {
		held = append(held, convHeld{HeldReply: h, When: relative(h.CreatedAt, now), WhenAt: stamp(h.CreatedAt),
			Expires: relative(h.ExpiresAt, now), ExpiresAt: stamp(h.ExpiresAt)})
	}
	s.render(w, http.StatusOK, "conversations", sess, map[string]any{"Account": acct, "Temporal": s.temporalLink(key),
		"Windows": windows, "Messages": messages, "Replies": replies, "Held": held, "Revealed": shown,
		"Peers": peersOf(conv, now), "Limit": conversationRows})
}
