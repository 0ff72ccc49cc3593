package webui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"
)

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
