package webui

import (
	"fmt"
	"html/template"
	"net/http"
	"time"
)

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
