package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// --- rendering ---

func (s *server) parseTemplates() error {
	funcs := template.FuncMap{
		// submission is a fresh submission id for a form that starts an enrollment.
		"submission": func() string { return randomID(16) },
	}
	s.pages = map[string]*template.Template{}
	for _, name := range []string{"login", "accounts", "enroll_start", "enrollment", "error", "owner", "conversations", "forget"} {
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
	// Flash is the one-shot message of the page, FlashError true when it says something
	// failed (it then looks like an error and is announced at once).
	Flash      string
	FlashError bool
	// Lang is the page's language (en, or zh on an owner's page).
	Lang string
	Data any
}

func (s *server) render(w http.ResponseWriter, status int, page string, sess *session, data any) {
	s.renderLang(w, status, page, sess, langEN, data)
}

func (s *server) renderLang(w http.ResponseWriter, status int, page string, sess *session, lang string, data any) {
	v := view{Prefix: s.cfg.Prefix, Data: data, Lang: lang}
	if sess != nil {
		v.LoggedIn, v.CSRF, v.Flash, v.FlashError = true, sess.csrf, sess.flash, sess.flashKind == store.FlashError
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages[page].Execute(w, v); err != nil {
		s.log.Error("webui: render", "page", page, "error", err)
	}
}

// fail answers an error page (or plain text to a script).
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, status, "error", s.loggedIn(r), map[string]any{"Status": status, "Message": msg})
}

// The services a page may fail to reach.
const (
	backendTemporal = "Temporal"
	backendPostgres = "PostgreSQL"
)

// unreachable answers a page that could not reach Temporal or PostgreSQL (503).
// It asks nothing more of either (the page does not look up the session again).
func (s *server) unreachable(w http.ResponseWriter, _ *http.Request, backend string) {
	s.render(w, http.StatusServiceUnavailable, "error", nil,
		map[string]any{"Status": http.StatusServiceUnavailable, "Message": unreachableMessage(backend)})
}

func unreachableMessage(backend string) string {
	return "Cannot reach " + backend + " right now. Nothing was changed; try again in a moment."
}

// unreachableJSON answers a script's request that could not reach Temporal or PostgreSQL
// (503 with {"error", "message"}): the page shows it as a lost connection and retries.
func (s *server) unreachableJSON(w http.ResponseWriter, backend string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "unreachable", "backend": backend,
		"message": unreachableMessage(backend)})
}

func (s *server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if b := unreachableBackend(err); b != "" {
		s.log.Warn("webui: "+what, "error", err)
		s.unreachable(w, r, b)
		return
	}
	s.log.Error("webui: "+what, "error", err)
	s.fail(w, r, http.StatusInternalServerError, "Could not "+what+". The server log has the details.")
}

// unreachableBackend names the service an error says could not be reached in time, or "".
func unreachableBackend(err error) string {
	var se *store.Error
	switch {
	case errors.As(err, &se):
		if se.Code == vocab.CodeUnavailable || errors.Is(err, context.DeadlineExceeded) {
			return backendPostgres
		}
		return ""
	case errors.Is(err, context.DeadlineExceeded), isUnavailable(err):
		return backendTemporal
	}
	return ""
}

// isUnavailable reports a Temporal call that failed because the server could not be
// reached (gRPC Unavailable or DeadlineExceeded).
func isUnavailable(err error) bool {
	var u *serviceerror.Unavailable
	var d *serviceerror.DeadlineExceeded
	if errors.As(err, &u) || errors.As(err, &d) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
