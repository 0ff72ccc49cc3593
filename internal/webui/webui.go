// Package webui is the operator's web front end: log in with the operator
// token, start an Enrollment and show its QR code to the bot's owner, follow its status
// live, send iLink's verification code and cancel it as the workflow's signals, list
// the accounts with pause, resume and remove (package operator, as the CLI does) and the
// replies each bot holds for its conversations' next windows (as `starter held list`
// counts them; never their content), and show and change each bot's route (the store's
// SetRoute and ClearRoute, as `starter route` does; a webhook shows its host only, and
// its signing secret is never shown).
//
// It is one http.Handler with server-rendered pages (html/template, embedded assets, a
// little JavaScript), meant to be mounted on the worker's HTTP server or any other:
// see docs/web-ui.md. Its security: a login form compares the operator token in constant
// time and opens a server-side session (random id in an HttpOnly, SameSite=Strict cookie,
// Secure when configured); every POST needs the session's CSRF token and is refused when
// the browser says it is cross-site (Sec-Fetch-Site, Origin); pages are never cached,
// never framed and load nothing but their own assets; no secret ever reaches a URL or a
// page (the store's account list carries no bot token), and neither does an internal
// detail: an error's text (an activity's, naming the worker's identity; the store's;
// Temporal's) goes to the log, the page says a short, stable message.
package webui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/time/rate"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// TokenEnv is the environment variable that conventionally holds the operator token.
const TokenEnv = "ILINKFLOW_UI_TOKEN"

// MinTokenLength is the shortest operator token New accepts.
const MinTokenLength = 16

// Wrong operator tokens are throttled (for everyone: a proxy hides the client's address):
// after LoginBurst of them, one more per LoginEvery (Config.FailedLoginEvery); the login
// form answers 429 meanwhile.
const (
	LoginBurst = 10
	LoginEvery = 6 * time.Second
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "ilinkflow_ui_session"

// Defaults of Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultLifetime   = 5 * time.Minute
)

// Config configures the front end.
type Config struct {
	// Temporal is the client enrollments are started, queried and signalled with.
	Temporal client.Client
	// TaskQueue of the Enrollment workflows it starts (default wfapi.DefaultTaskQueue).
	TaskQueue string
	// Store lists the accounts and holds the operator's changes to them.
	Store *store.Store
	// OperatorToken is the secret an operator logs in with (e.g. from ILINKFLOW_UI_TOKEN);
	// at least MinTokenLength characters.
	OperatorToken sealing.Secret
	// Secure marks the session cookie Secure: set it when the page is served over TLS,
	// directly or behind a TLS-terminating proxy.
	Secure bool
	// Prefix is the path the handler is mounted under, e.g. "/ui" (default: the root).
	// The handler strips it itself: mount it as mux.Handle("/ui/", h).
	Prefix string
	// TrustedOrigins are origins (scheme://host[:port]) allowed to POST besides the
	// request's own Host, e.g. the public origin of a reverse proxy that rewrites Host.
	TrustedOrigins []string
	// SessionTTL is how long a login lasts (default 12h).
	SessionTTL time.Duration
	// Lifetime of the enrollments it starts (default 5m); PollGap between their QR polls
	// (0: the workflow's default).
	Lifetime time.Duration
	PollGap  time.Duration
	// FailedLoginEvery is how often one more wrong token is let through once LoginBurst
	// of them were tried (default LoginEvery).
	FailedLoginEvery time.Duration
	// Logger receives the errors behind the pages' generic error messages (default:
	// slog.Default()).
	Logger *slog.Logger
}

//go:embed assets templates
var files embed.FS

var (
	offerIDPattern    = regexp.MustCompile(`^qo_[0-9a-f]{8,64}$`)
	accountKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.@:-]{1,128}$`)
	codePattern       = regexp.MustCompile(`^[0-9A-Za-z]{1,16}$`)
)

// pauseChoices are the pause lengths the accounts page offers.
var pauseChoices = []struct {
	Value string
	Label string
	D     time.Duration
}{
	{"15m", "15 minutes", 15 * time.Minute},
	{"1h", "1 hour", time.Hour},
	{"24h", "24 hours", 24 * time.Hour},
	{"168h", "7 days", 7 * 24 * time.Hour},
}

type server struct {
	cfg       Config
	tokenHash [32]byte
	log       *slog.Logger
	pages     map[string]*template.Template
	cop       *http.CrossOriginProtection
	// failedLogins throttles wrong tokens: a burst of LoginBurst, then one per LoginEvery.
	failedLogins *rate.Limiter

	mu       sync.Mutex
	sessions map[string]*session
	expiries map[string]time.Time // offer id -> expiry (read once from the workflow's memo)
}

type session struct {
	csrf    string
	expires time.Time
	flash   string
}

// New returns the front end's handler.
func New(cfg Config) (http.Handler, error) {
	if cfg.Temporal == nil {
		return nil, errors.New("webui: no Temporal client")
	}
	if cfg.Store == nil {
		return nil, errors.New("webui: no store")
	}
	if len(cfg.OperatorToken.Reveal()) < MinTokenLength {
		return nil, fmt.Errorf("webui: the operator token (%s) must have at least %d characters", TokenEnv, MinTokenLength)
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = wfapi.DefaultTaskQueue
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Prefix != "" && !strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("webui: prefix %q must start with /", cfg.Prefix)
	}
	if cfg.FailedLoginEvery <= 0 {
		cfg.FailedLoginEvery = LoginEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &server{cfg: cfg, tokenHash: sha256.Sum256([]byte(cfg.OperatorToken.Reveal())), log: cfg.Logger,
		sessions: map[string]*session{}, expiries: map[string]time.Time{}, cop: http.NewCrossOriginProtection(),
		failedLogins: rate.NewLimiter(rate.Every(cfg.FailedLoginEvery), LoginBurst)}
	for _, o := range cfg.TrustedOrigins {
		if err := s.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("webui: trusted origin: %w", err)
		}
	}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	assets, _ := fs.Sub(files, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.action(s.logout))
	mux.HandleFunc("GET /{$}", s.page(func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
	}))
	mux.HandleFunc("GET /accounts", s.page(s.accountsPage))
	mux.HandleFunc("POST /accounts/{key}/{verb}", s.action(s.steer))
	mux.HandleFunc("POST /accounts/{key}/route", s.action(s.route))
	mux.HandleFunc("GET /enroll", s.page(s.enrollStartPage))
	mux.HandleFunc("POST /enroll", s.action(s.startEnrollment))
	mux.HandleFunc("GET /enroll/{offer}", s.page(s.enrollmentPage))
	mux.HandleFunc("GET /enroll/{offer}/status", s.api(s.enrollmentStatus))
	mux.HandleFunc("GET /enroll/{offer}/qr.png", s.api(s.qrPNG))
	mux.HandleFunc("POST /enroll/{offer}/code", s.action(s.verifyCode))
	mux.HandleFunc("POST /enroll/{offer}/cancel", s.action(s.cancel))

	var h http.Handler = mux
	if cfg.Prefix != "" {
		h = http.StripPrefix(cfg.Prefix, mux)
	}
	return headers(h), nil
}

// headers sets the security headers of every response.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; script-src 'self'; style-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func (s *server) url(path string) string { return s.cfg.Prefix + path }

// --- sessions ---

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionOf returns the request's live session, or nil.
func (s *server) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[c.Value]
	if sess == nil {
		return nil
	}
	if !time.Now().Before(sess.expires) {
		delete(s.sessions, c.Value)
		return nil
	}
	return sess
}

func (s *server) cookie(value string, maxAge int) *http.Cookie {
	path := s.cfg.Prefix + "/"
	return &http.Cookie{Name: SessionCookie, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode}
}

// page wraps a GET handler: without a session it redirects to the login form.
func (s *server) page(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.sessionOf(r)
		if sess == nil {
			http.Redirect(w, r, s.url("/login"), http.StatusSeeOther)
			return
		}
		h(w, r, sess)
	}
}

// api wraps a GET handler read by the page's script or an <img>: 401 without a session.
func (s *server) api(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.sessionOf(r)
		if sess == nil {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		h(w, r, sess)
	}
}

// action wraps a POST handler: a cross-site request is refused (403), then one without
// a session (401), then one without the session's CSRF token (403).
func (s *server) action(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			s.fail(w, r, http.StatusForbidden, "Cross-site requests are refused.")
			return
		}
		sess := s.sessionOf(r)
		if sess == nil {
			s.fail(w, r, http.StatusUnauthorized, "Log in first.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		got := r.PostFormValue("csrf")
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			s.fail(w, r, http.StatusForbidden, "The form is stale or was not sent by this site: reload the page and try again.")
			return
		}
		h(w, r, sess)
	}
}

func (s *server) setFlash(sess *session, msg string) {
	s.mu.Lock()
	sess.flash = msg
	s.mu.Unlock()
}

func (s *server) takeFlash(sess *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := sess.flash
	sess.flash = ""
	return f
}

// --- login ---

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.sessionOf(r) != nil {
		http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "login", nil, nil)
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.cop.Check(r); err != nil {
		s.fail(w, r, http.StatusForbidden, "Cross-site requests are refused.")
		return
	}
	if s.failedLogins.Tokens() < 1 {
		s.render(w, http.StatusTooManyRequests, "login", nil, map[string]any{"Error": "Too many wrong tokens: try again in a minute."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	got := sha256.Sum256([]byte(r.PostFormValue("token")))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		s.failedLogins.Allow()
		s.log.Warn("webui: failed login", "remote", r.RemoteAddr)
		s.render(w, http.StatusUnauthorized, "login", nil, map[string]any{"Error": "Wrong token."})
		return
	}
	id := randomID(32)
	now := time.Now()
	s.mu.Lock()
	for k, v := range s.sessions {
		if !now.Before(v.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = &session{csrf: randomID(32), expires: now.Add(s.cfg.SessionTTL)}
	s.mu.Unlock()
	// A session id the browser had before is dropped (no fixation).
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, s.cookie(id, int(s.cfg.SessionTTL/time.Second)))
	http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, s.cookie("", -1))
	http.Redirect(w, r, s.url("/login"), http.StatusSeeOther)
}

// --- rendering ---

func (s *server) parseTemplates() error {
	funcs := template.FuncMap{
		"ts": func(t *time.Time) string {
			if t == nil || t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"ago": func(t *time.Time) string {
			if t == nil || t.IsZero() {
				return "never"
			}
			return time.Since(*t).Round(time.Second).String() + " ago"
		},
	}
	s.pages = map[string]*template.Template{}
	for _, name := range []string{"login", "accounts", "enroll_start", "enrollment", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("webui: template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

// view is what every page's template gets.
type view struct {
	Prefix   string
	LoggedIn bool
	CSRF     string
	Flash    string
	Data     any
}

func (s *server) render(w http.ResponseWriter, status int, page string, sess *session, data any) {
	v := view{Prefix: s.cfg.Prefix, Data: data}
	if sess != nil {
		v.LoggedIn, v.CSRF, v.Flash = true, sess.csrf, s.takeFlash(sess)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages[page].Execute(w, v); err != nil {
		s.log.Error("webui: render", "page", page, "error", err)
	}
}

// fail answers an error page (or plain text to a script).
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, status, "error", s.sessionOf(r), map[string]any{"Status": status, "Message": msg})
}

func (s *server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("webui: "+what, "error", err)
	s.fail(w, r, http.StatusInternalServerError, "Could not "+what+". The server log has the details.")
}

// --- accounts ---

func (s *server) accountsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	rows, err := operator.Accounts(r.Context(), s.cfg.Store, "", true)
	if err != nil {
		s.internal(w, r, "list the accounts", err)
		return
	}
	agents, err := s.cfg.Store.ListMCPAgents(r.Context())
	if err != nil {
		s.internal(w, r, "list the MCP agents", err)
		return
	}
	held, err := s.heldPerAccount(r.Context())
	if err != nil {
		s.internal(w, r, "count the held replies", err)
		return
	}
	s.render(w, http.StatusOK, "accounts", sess, map[string]any{"Accounts": rows, "PauseChoices": pauseChoices,
		"MCPAgents": agents, "MinSecret": store.MinWebhookSecretBytes, "Held": held})
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
		s.setFlash(sess, fmt.Sprintf("%s %s failed: %s", verb, key, steerFailure(err)))
		http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
		return
	}
	msg := fmt.Sprintf("%s is now %s", res.AccountKey, res.Status)
	if !res.PollerSignalled {
		msg += " (no running poller to tell)"
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
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
// page's route forms: field kind is a store.RouteKinds kind or "default", and only the
// fields of that kind are read. The store validates the input (a refused change writes
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
		if rt, err = s.cfg.Store.SetRoute(r.Context(), now, routeInput(r, key, kind)); err == nil {
			shown := operator.Account{Route: rt.Kind, RouteWebhookHost: rt.WebhookHost, RouteWorkflowType: rt.WorkflowType,
				RouteTaskQueue: rt.TaskQueue, RouteMCPAgent: rt.MCPAgent}
			msg = fmt.Sprintf("%s routes to %s from its next message", key, shown.RouteState())
		}
	}
	if errors.Is(err, store.ErrAccountNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		// The store's error text holds neither the secret nor the webhook's URL.
		s.log.Warn("webui: route", "account", key, "kind", kind, "error", err)
		msg = fmt.Sprintf("route %s failed: %s", key, routeFailure(err))
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
}

// routeInput reads the fields of one route kind from a route form.
func routeInput(r *http.Request, key, kind string) store.RouteInput {
	in := store.RouteInput{AccountKey: key, Kind: kind, By: RouteBy}
	switch kind {
	case store.RouteWebhook:
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
	case store.RouteWorkflow:
		in.WorkflowType = strings.TrimSpace(r.PostFormValue("workflow_type"))
		in.TaskQueue = strings.TrimSpace(r.PostFormValue("task_queue"))
	case store.RouteMCP:
		in.MCPAgent = r.PostFormValue("mcp_agent")
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
	case vocab.CodeUnavailable:
		return "the database is unavailable: try again in a moment."
	}
	return "the server log has the details."
}

// --- enrollments ---

func (s *server) enrollStartPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.render(w, http.StatusOK, "enroll_start", sess, map[string]any{"Lifetime": s.cfg.Lifetime.String()})
}

func (s *server) startEnrollment(w http.ResponseWriter, r *http.Request, _ *session) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		s.internal(w, r, "start the enrollment", err)
		return
	}
	offer := "qo_" + hex.EncodeToString(raw[:])
	expires := time.Now().Add(s.cfg.Lifetime)
	_, err := s.cfg.Temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID: wfapi.EnrollmentID(offer), TaskQueue: s.cfg.TaskQueue, Memo: map[string]any{"expires_at": expires},
	}, wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "webui", Lifetime: wfapi.Duration(s.cfg.Lifetime), PollGap: wfapi.Duration(s.cfg.PollGap)})
	if err != nil {
		s.internal(w, r, "start the enrollment", err)
		return
	}
	s.mu.Lock()
	for o, t := range s.expiries { // forget the enrollments long over
		if time.Since(t) > time.Hour {
			delete(s.expiries, o)
		}
	}
	s.expiries[offer] = expires
	s.mu.Unlock()
	http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
}

// Status is the JSON answer of an enrollment's status endpoint.
type Status struct {
	OfferID    string   `json:"offer_id"`
	Status     string   `json:"status"`
	Done       bool     `json:"done"`
	QR         bool     `json:"qr"` // a QR code to show (qr.png)
	NeedsCode  bool     `json:"needs_code"`
	ExpiresAt  string   `json:"expires_at,omitempty"`
	AccountKey string   `json:"account_key,omitempty"`
	Generation int32    `json:"generation,omitempty"`
	Replaced   []string `json:"replaced,omitempty"`
	// Error is a short, stable message when the enrollment reported an error (never the
	// error's text, which the log has).
	Error string `json:"error,omitempty"`
}

var errNoEnrollment = errors.New("no such enrollment")

// What an enrollment's page says about its error, by how it ended.
const (
	msgEnrollmentFailed   = "The enrollment failed. The server log has the details."
	msgEnrollmentStopped  = "The enrollment was stopped before it finished."
	msgEnrollmentTimedOut = "The enrollment ran out of time."
	msgPollerNotStarted   = "The bot is enrolled, but its poller did not start: it starts when a worker starts. The server log has the details."
	msgTooManyCodes       = "Too many wrong verification codes."
)

// enrollmentFailure is the page's message for an enrollment that reported an error, by
// its status: never the error's text.
func enrollmentFailure(status string) string {
	switch status {
	case vocab.EnrollmentConfirmed:
		return msgPollerNotStarted
	case vocab.EnrollmentBlocked:
		return msgTooManyCodes
	}
	return msgEnrollmentFailed
}

// state reads an enrollment: its workflow's query while it runs, its result once done.
// qrContent is the QR code's content while it may be scanned (it is no secret of ours,
// but it only ever leaves as an image).
func (s *server) state(ctx context.Context, offer string) (st Status, qrContent string, err error) {
	id := wfapi.EnrollmentID(offer)
	d, err := s.cfg.Temporal.DescribeWorkflow(ctx, id, "")
	if err != nil {
		if isNotFound(err) {
			return st, "", errNoEnrollment
		}
		return st, "", err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != wfapi.EnrollmentWorkflow {
		return st, "", errNoEnrollment
	}
	st = Status{OfferID: offer, Status: vocab.EnrollmentStarting}
	if exp, ok := s.expiry(offer, info.GetMemo().GetFields()["expires_at"]); ok {
		st.ExpiresAt = exp.UTC().Format(time.RFC3339)
	}
	var es wfapi.EnrollmentState
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := s.cfg.Temporal.QueryWorkflow(ctx, id, "", wfapi.QueryEnrollmentState)
		if err != nil {
			return st, "", nil // its first workflow task has not run yet
		}
		if err := v.Get(&es); err != nil {
			return st, "", err
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		st.Done = true
		if err := s.cfg.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &es); err != nil {
			return st, "", err
		}
	default:
		st.Done, st.Status, st.Error = true, vocab.EnrollmentFailed, msgEnrollmentFailed
		switch info.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
			st.Status, st.Error = vocab.EnrollmentCancelled, msgEnrollmentStopped
		case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
			st.Error = msgEnrollmentTimedOut
		}
		s.log.Warn("webui: the enrollment workflow did not complete", "offer", offer, "workflow_status", info.GetStatus().String())
		return st, "", nil
	}
	if es.Status != "" {
		st.Status = es.Status
	}
	st.NeedsCode = es.NeedsCode && !st.Done
	st.AccountKey, st.Generation, st.Replaced = es.AccountKey, es.Generation, es.Replaced
	if es.Error != "" {
		// The workflow's error text is an activity's (it names the worker's identity) or
		// the store's: the log has it, the page a message by the status.
		st.Error = enrollmentFailure(st.Status)
		s.log.Warn("webui: the enrollment reported an error", "offer", offer, "status", st.Status, "error", es.Error)
	}
	if !st.Done && es.QRContent != "" {
		st.QR, qrContent = true, es.QRContent
	}
	return st, qrContent, nil
}

// expiry is the enrollment's expiry: the one this server started it with, or the one in
// its workflow's memo (an enrollment started elsewhere may have none).
func (s *server) expiry(offer string, memo *commonpb.Payload) (time.Time, bool) {
	s.mu.Lock()
	t, ok := s.expiries[offer]
	s.mu.Unlock()
	if ok {
		return t, true
	}
	if memo == nil {
		return time.Time{}, false
	}
	if err := converter.GetDefaultDataConverter().FromPayload(memo, &t); err != nil || t.IsZero() {
		return time.Time{}, false
	}
	s.mu.Lock()
	s.expiries[offer] = t
	s.mu.Unlock()
	return t, true
}

func (s *server) offer(w http.ResponseWriter, r *http.Request) (string, bool) {
	offer := r.PathValue("offer")
	if !offerIDPattern.MatchString(offer) {
		http.NotFound(w, r)
		return "", false
	}
	return offer, true
}

// enrollment reads an enrollment's state for a page, or answers the failure (404 for an
// unknown enrollment) and reports false.
func (s *server) enrollment(w http.ResponseWriter, r *http.Request, offer string) (Status, bool) {
	st, _, err := s.state(r.Context(), offer)
	if errors.Is(err, errNoEnrollment) {
		s.fail(w, r, http.StatusNotFound, "No such enrollment.")
		return Status{}, false
	}
	if err != nil {
		s.internal(w, r, "read the enrollment", err)
		return Status{}, false
	}
	return st, true
}

func (s *server) enrollmentPage(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	s.render(w, http.StatusOK, "enrollment", sess, st)
}

func (s *server) enrollmentStatus(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, _, err := s.state(r.Context(), offer)
	if errors.Is(err, errNoEnrollment) {
		http.Error(w, "no such enrollment", http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Error("webui: enrollment status", "offer", offer, "error", err)
		http.Error(w, "could not read the enrollment", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *server) qrPNG(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	_, content, err := s.state(r.Context(), offer)
	if err != nil || content == "" {
		http.Error(w, "no QR code to show", http.StatusNotFound)
		return
	}
	png, err := qrcode.Encode(content, qrcode.Medium, 320)
	if err != nil {
		s.log.Error("webui: QR code", "error", err)
		http.Error(w, "could not draw the QR code", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(png)
}

func (s *server) verifyCode(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	code := strings.TrimSpace(r.PostFormValue("code"))
	if !codePattern.MatchString(code) {
		s.setFlash(sess, "The verification code is the number WeChat shows: type it again.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	// A code is only sent while iLink asks for one: the workflow would keep a stray one
	// for the next time it asks.
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	if !st.NeedsCode {
		s.setFlash(sess, "iLink is not asking for a verification code now.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code}, "Verification code sent.")
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalCancel, nil, "Cancelling the enrollment.")
}

func (s *server) signal(w http.ResponseWriter, r *http.Request, sess *session, offer, name string, arg any, done string) {
	err := s.cfg.Temporal.SignalWorkflow(r.Context(), wfapi.EnrollmentID(offer), "", name, arg)
	switch {
	case isNotFound(err):
		s.setFlash(sess, "The enrollment has already ended.")
	case err != nil:
		s.internal(w, r, "signal the enrollment", err)
		return
	default:
		s.setFlash(sess, done)
	}
	http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
