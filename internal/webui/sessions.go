package webui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// --- sessions ---
//
// A login is a row of the store (webui_sessions): the cookie carries a random token whose
// hash the store keeps with the session's CSRF token and its one-shot message, so that a
// login survives a worker restart and works on every worker behind a load balancer.

// session is the request's live login.
type session struct {
	token string
	csrf  string
	// ctx is the request's context, for the store calls that set a message.
	ctx context.Context
	// flash is the message the page shows (taken from the store by page, when hasFlash
	// says there is one) and its kind.
	flash, flashKind string
	hasFlash         bool
}

// errNoStore is a session lookup that failed: the page says PostgreSQL cannot be reached.
var errNoStore = errors.New("webui: the session store is unreachable")

// sessionOf returns the request's live session, or nil without one; an error means the
// store could not be asked.
func (s *server) sessionOf(r *http.Request) (*session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	live, found, err := s.cfg.Store.WebUISession(ctx, time.Now(), c.Value)
	if err != nil {
		s.log.Warn("webui: reading the session failed", "error", err)
		return nil, errNoStore
	}
	if !found {
		return nil, nil
	}
	return &session{token: c.Value, csrf: live.CSRF, hasFlash: live.HasFlash, ctx: r.Context()}, nil
}

// loggedIn is the request's session for a page that may be shown either way (an error
// page): nil without one or when the store cannot be asked.
func (s *server) loggedIn(r *http.Request) *session {
	sess, _ := s.sessionOf(r)
	return sess
}

func (s *server) cookie(value string, maxAge int) *http.Cookie {
	path := s.cfg.Prefix + "/"
	return &http.Cookie{Name: SessionCookie, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode}
}

// page wraps a GET handler: without a session it redirects to the login form, which
// comes back to the page asked for; the page gets the session's one-shot message.
func (s *server) page(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.sessionOf(r)
		if err != nil {
			s.unreachable(w, r, backendPostgres)
			return
		}
		if sess == nil {
			http.Redirect(w, r, s.url("/login")+"?next="+url.QueryEscape(s.url(r.URL.RequestURI())), http.StatusSeeOther)
			return
		}
		if sess.hasFlash {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
			sess.flashKind, sess.flash, err = s.cfg.Store.TakeWebUIFlash(ctx, sess.token)
			cancel()
			if err != nil {
				s.log.Warn("webui: reading the session's message failed", "error", err)
			}
		}
		h(w, r, sess)
	}
}

// api wraps a GET handler read by the page's script or an <img>: 401 without a session,
// 503 when the store cannot be asked.
func (s *server) api(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.sessionOf(r)
		if err != nil {
			s.unreachableJSON(w, backendPostgres)
			return
		}
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
		sess, err := s.sessionOf(r)
		if err != nil {
			s.unreachable(w, r, backendPostgres)
			return
		}
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

// setFlash gives the session's next page a success message.
func (s *server) setFlash(sess *session, msg string) { s.flashOf(sess, store.FlashOK, msg) }

// setFailure gives the session's next page an error message.
func (s *server) setFailure(sess *session, msg string) { s.flashOf(sess, store.FlashError, msg) }

func (s *server) flashOf(sess *session, kind, msg string) {
	ctx, cancel := context.WithTimeout(sess.ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.cfg.Store.SetWebUIFlash(ctx, sess.token, kind, msg); err != nil {
		s.log.Warn("webui: keeping the message for the next page failed", "error", err)
	}
}

// --- login ---

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := s.next(r.URL.Query().Get("next"))
	if sess, _ := s.sessionOf(r); sess != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "login", nil, map[string]any{"Next": next})
}

// next is where a login goes: the page asked for when it is one of this handler's pages,
// else the accounts page.
func (s *server) next(v string) string {
	home := s.url("/accounts")
	if v == "" || !strings.HasPrefix(v, s.cfg.Prefix+"/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return home
	}
	u, err := url.Parse(v)
	if err != nil || u.IsAbs() || u.Host != "" || strings.HasPrefix(u.Path, s.url("/login")) || strings.HasPrefix(u.Path, s.url("/o/")) {
		return home
	}
	return u.RequestURI()
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.cop.Check(r); err != nil {
		s.fail(w, r, http.StatusForbidden, "Cross-site requests are refused.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := s.next(r.PostFormValue("next"))
	addr := s.clientAddress(r)
	got := sha256.Sum256([]byte(r.PostFormValue("token")))
	wrong := subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1
	tctx, tcancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	allowed, err := s.throttle.attempt(tctx, addr, wrong)
	tcancel()
	if err != nil {
		// Never a login the throttle did not look at.
		s.log.Warn("webui: the login throttle could not be asked", "error", err)
		s.unreachable(w, r, backendPostgres)
		return
	}
	if !allowed {
		s.render(w, http.StatusTooManyRequests, "login", nil, map[string]any{"Next": next,
			"Error": "Too many wrong tokens from this address: try again in a minute."})
		return
	}
	if wrong {
		s.log.Warn("webui: failed login", "remote", addr)
		s.render(w, http.StatusUnauthorized, "login", nil, map[string]any{"Next": next, "Error": "Wrong token."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	now := time.Now()
	if _, err := s.cfg.Store.ForgetExpiredWebUIState(ctx, now); err != nil {
		s.log.Warn("webui: forgetting expired sessions failed", "error", err)
	}
	sess, err := s.cfg.Store.NewWebUISession(ctx, now, s.cfg.SessionTTL)
	if err != nil {
		s.log.Error("webui: opening a session failed", "error", err)
		s.unreachable(w, r, backendPostgres)
		return
	}
	// A session the browser had before is ended (no fixation).
	if c, err := r.Cookie(SessionCookie); err == nil {
		if err := s.cfg.Store.EndWebUISession(ctx, c.Value); err != nil {
			s.log.Warn("webui: ending the previous session failed", "error", err)
		}
	}
	http.SetCookie(w, s.cookie(sess.Token.Reveal(), int(s.cfg.SessionTTL/time.Second)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if err := s.cfg.Store.EndWebUISession(ctx, sess.token); err != nil {
		s.log.Warn("webui: ending the session failed", "error", err)
	}
	http.SetCookie(w, s.cookie("", -1))
	http.Redirect(w, r, s.url("/login"), http.StatusSeeOther)
}

// randomID is n random bytes, base64url.
func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
