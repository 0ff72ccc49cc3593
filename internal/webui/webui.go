// Package webui is the operator's web front end: log in with the operator
// token, start an Enrollment and show its QR code to the bot's owner, follow its status
// live, send iLink's verification code and cancel it as the workflow's signals, list
// the accounts with pause, resume and remove (package operator, as the CLI does) and the
// replies each bot holds for its conversations' next windows (as `starter held list`
// counts them; never their content), and show and change each bot's route (the store's
// SetRoute and ClearRoute, as `starter route` does; a webhook shows its host only, and
// its signing secret is never shown; the iLink route's form also approves an iLink
// client's QR login, as `starter ilink-client approve` does), and forget a WeChat user
// from a bot's conversations page (operator.Forget, as `starter forget` does: a dry run
// first, then the erasure on confirmation).
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
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// TokenEnv is the environment variable that conventionally holds the operator token.
const TokenEnv = "ILINKFLOW_UI_TOKEN"

// MinTokenLength is the shortest operator token New accepts.
const MinTokenLength = 16

// SessionCookie is the name of the session cookie.
const SessionCookie = "ilinkflow_ui_session"

// Defaults of Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	// DefaultLifetime gives the bot's owner time for the first QR code and the
	// enrollment's refreshed ones (iLink's QR codes live about two minutes).
	DefaultLifetime = 8 * time.Minute
	// DefaultTimeout bounds each read of Temporal or PostgreSQL a page makes: a page says
	// it cannot reach them instead of waiting.
	DefaultTimeout = 2 * time.Second
)

// Config configures the front end.
type Config struct {
	// Temporal is the client enrollments are started, queried and signalled with.
	Temporal client.Client
	// TaskQueue of the Enrollment workflows it starts (default wfapi.DefaultTaskQueue).
	TaskQueue string
	// TemporalUIURL is the base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233):
	// the accounts table and a bot's conversations page link to the bot's workflows there
	// (its list filtered by the search attribute IlinkAccount). Empty: no such links.
	// Namespace is the Temporal namespace of those workflows, the namespace of the
	// Temporal client (default "default"): "Forget this user" deletes the user's
	// workflows there.
	TemporalUIURL string
	Namespace     string
	// Store lists the accounts and holds the operator's changes to them.
	Store Store
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
	// Lifetime of the enrollments it starts (default 8m); PollGap between their QR polls
	// (0: the workflow's default).
	Lifetime time.Duration
	PollGap  time.Duration
	// FailedLoginEvery is how often one more wrong token is let through once LoginBurst
	// of them were tried (default LoginEvery; between 1ms and 24h).
	FailedLoginEvery time.Duration
	// Logger receives the errors behind the pages' generic error messages (default:
	// slog.Default()).
	Logger *slog.Logger
	// Timeout bounds each read of Temporal or PostgreSQL a page or an action makes
	// (default DefaultTimeout): past it the page says which one it cannot reach.
	Timeout time.Duration
	// ClientAddressHeader names the header a trusted reverse proxy sets to the client's
	// address (e.g. X-Forwarded-For: its last address counts); logins are throttled per
	// client address. Empty: the connection's peer address. Never set it without such a
	// proxy in front: a client could then pick its own address.
	ClientAddressHeader string
	// PublicURL is the origin and prefix owners reach the front end at (e.g.
	// https://bots.example.com/ui), for the owner links the enrollment page hands out.
	// Empty: the request's own scheme and host.
	PublicURL string
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
	throttle  *loginThrottle
}

// BaseURL trims v and checks that it is an http(s) base URL: a host and an optional path,
// without user, query or fragment (e.g. https://bots.example.com/ui); empty stays empty.
// The front end's public URL and the Temporal UI's URL follow it.
func BaseURL(v string) (string, error) {
	v = strings.TrimRight(strings.TrimSpace(v), "/")
	if v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("want http(s)://host[:port][/path], e.g. https://bots.example.com/ui")
	}
	return v, nil
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
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
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
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	var err error
	if cfg.PublicURL, err = BaseURL(cfg.PublicURL); err != nil {
		return nil, fmt.Errorf("webui: public URL: %w", err)
	}
	// A Temporal UI URL that is not a base URL gives no links (the worker's flag refuses it).
	cfg.TemporalUIURL, _ = BaseURL(cfg.TemporalUIURL)
	if cfg.FailedLoginEvery <= 0 {
		cfg.FailedLoginEvery = LoginEvery
	}
	if cfg.FailedLoginEvery < time.Millisecond || cfg.FailedLoginEvery > 24*time.Hour {
		return nil, fmt.Errorf("webui: FailedLoginEvery %v is not between 1ms and 24h", cfg.FailedLoginEvery)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &server{cfg: cfg, tokenHash: sha256.Sum256([]byte(cfg.OperatorToken.Reveal())), log: cfg.Logger,
		cop: http.NewCrossOriginProtection(), throttle: newLoginThrottle(cfg.Store, cfg.FailedLoginEvery)}
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
	mux.HandleFunc("GET /accounts/{key}/conversations", s.page(s.conversationsPage))
	mux.HandleFunc("POST /accounts/{key}/{verb}", s.action(s.steer))
	mux.HandleFunc("POST /accounts/{key}/route", s.action(s.route))
	mux.HandleFunc("POST /accounts/{key}/forget", s.action(s.forgetDryRunPage))
	mux.HandleFunc("POST /accounts/{key}/forget/confirm", s.action(s.forgetConfirmed))
	mux.HandleFunc("GET /enroll", s.page(s.enrollStartPage))
	mux.HandleFunc("POST /enroll", s.action(s.startEnrollment))
	mux.HandleFunc("GET /enroll/{offer}", s.page(s.enrollmentPage))
	mux.HandleFunc("GET /enroll/{offer}/status", s.api(s.enrollmentStatus))
	mux.HandleFunc("GET /enroll/{offer}/qr.png", s.api(s.qrPNG))
	mux.HandleFunc("POST /enroll/{offer}/code", s.action(s.verifyCode))
	mux.HandleFunc("POST /enroll/{offer}/cancel", s.action(s.cancel))
	mux.HandleFunc("POST /enroll/{offer}/owner-link", s.action(s.ownerLink))
	// The owner's pages: the link's token is the only credential, and it opens nothing
	// but its one enrollment.
	mux.HandleFunc("GET /o/{token}", s.owner(s.ownerPage))
	mux.HandleFunc("GET /o/{token}/status", s.owner(s.ownerStatus))
	mux.HandleFunc("GET /o/{token}/qr.png", s.owner(s.ownerQR))
	mux.HandleFunc("POST /o/{token}/code", s.owner(s.ownerCode))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "There is no such page.")
	})

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
