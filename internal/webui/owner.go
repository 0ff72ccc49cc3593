package webui

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// --- the bot owner's link ---
//
// An operator hands the bot's owner a link to one enrollment: /o/<token>, where the token
// is 256 random bits whose hash the store keeps with the enrollment's offer until the
// enrollment's own expiry. The link shows that enrollment's QR code, its status in plain
// words (Chinese, or English with ?lang=en) and the verification code form, and nothing
// else: it carries no operator session and opens no other page.

// ownerLink makes a link for the enrollment's owner and shows it on the enrollment page
// (once: only its hash is kept).
func (s *server) ownerLink(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	expires, err := time.Parse(time.RFC3339, st.ExpiresAt)
	if st.Done || err != nil || !expires.After(time.Now()) {
		s.setFailure(sess, "The enrollment has ended or has not started yet: no link for its owner was made.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	token, err := s.cfg.Store.NewOwnerLink(ctx, time.Now(), offer, expires)
	if err != nil {
		s.internal(w, r, "make the owner's link", err)
		return
	}
	s.log.Info("webui: owner link made", "offer", offer, "expires_at", expires)
	s.render(w, http.StatusOK, "enrollment", sess, enrollmentView{Status: st, W: wordsFor(langEN), Retry: s.newStartForm(),
		OwnerLink: s.publicBase(r) + "/o/" + token.Reveal()})
}

// publicBase is the origin and prefix an owner reaches the front end at.
func (s *server) publicBase(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || s.cfg.Secure {
		scheme = "https"
	}
	return scheme + "://" + r.Host + s.cfg.Prefix
}

// ownerRequest is an owner's request: the link's token, the offer it opens, the page's
// language.
type ownerRequest struct {
	token, offer, lang string
}

// owner wraps an owner's handler: an unknown or expired link is 404 in the owner's
// language, a store that cannot be reached 503.
func (s *server) owner(h func(http.ResponseWriter, *http.Request, ownerRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o := ownerRequest{token: r.PathValue("token"), lang: ownerLang(r)}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
		offer, _, found, err := s.cfg.Store.OwnerLink(ctx, time.Now(), o.token)
		cancel()
		script := strings.HasSuffix(r.URL.Path, "/status") || strings.HasSuffix(r.URL.Path, ".png")
		switch {
		case err != nil && script:
			s.log.Warn("webui: reading an owner link failed", "error", err)
			s.unreachableJSON(w, backendPostgres)
			return
		case err != nil:
			s.log.Warn("webui: reading an owner link failed", "error", err)
			s.ownerMessage(w, http.StatusServiceUnavailable, o.lang, wordsFor(o.lang).Unreachable)
			return
		case !found && script:
			http.Error(w, "no such link", http.StatusNotFound)
			return
		case !found:
			msg := "This link is not valid or has expired. Ask the person who sent it to you for a new one."
			if o.lang == langZH {
				msg = "这个链接无效或已过期。请联系发给你链接的人，要一个新链接。"
			}
			s.ownerMessage(w, http.StatusNotFound, o.lang, msg)
			return
		}
		o.offer = offer
		if r.Method == http.MethodPost {
			if err := s.cop.Check(r); err != nil {
				s.ownerMessage(w, http.StatusForbidden, o.lang, "Cross-site requests are refused.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		}
		h(w, r, o)
	}
}

// ownerMessage answers an owner's page with a message only.
func (s *server) ownerMessage(w http.ResponseWriter, status int, lang, msg string) {
	s.renderLang(w, status, "owner", nil, lang, ownerView{W: wordsFor(lang), Message: msg, Lang: lang})
}

// ownerView is what the owner's page template gets.
type ownerView struct {
	Status
	W    words
	Lang string
	// Base is the link's path (/o/<token>); Other the same page in the other language.
	Base, Other string
	// Message replaces the page when the link cannot be shown; Sent says a code was sent.
	Message string
	Sent    bool
}

func (s *server) ownerState(ctx context.Context, o ownerRequest) (Status, string, error) {
	st, content, err := s.state(ctx, o.offer)
	return st.worded(wordsFor(o.lang), true), content, err
}

func (s *server) ownerPage(w http.ResponseWriter, r *http.Request, o ownerRequest) {
	st, _, err := s.ownerState(r.Context(), o)
	if err != nil {
		msg := wordsFor(o.lang).Failed
		if unreachableBackend(err) != "" {
			msg = wordsFor(o.lang).Unreachable
		}
		s.log.Warn("webui: owner page", "offer", o.offer, "error", err)
		s.ownerMessage(w, http.StatusServiceUnavailable, o.lang, msg)
		return
	}
	other := langEN
	if o.lang == langEN {
		other = langZH
	}
	base := s.url("/o/" + o.token)
	s.renderLang(w, http.StatusOK, "owner", nil, o.lang, ownerView{Status: st, W: wordsFor(o.lang), Lang: o.lang,
		Base: base, Other: base + "?lang=" + other, Sent: r.URL.Query().Get("codesent") == "1"})
}

func (s *server) ownerStatus(w http.ResponseWriter, r *http.Request, o ownerRequest) {
	st, _, err := s.ownerState(r.Context(), o)
	s.writeStatus(w, o.offer, st, err)
}

func (s *server) ownerQR(w http.ResponseWriter, r *http.Request, o ownerRequest) {
	s.writeQR(w, r, o.offer)
}

// ownerCode sends the owner's verification code, while iLink asks for one.
func (s *server) ownerCode(w http.ResponseWriter, r *http.Request, o ownerRequest) {
	back := s.url("/o/"+o.token) + "?lang=" + o.lang
	code := strings.TrimSpace(r.PostFormValue("code"))
	st, _, err := s.ownerState(r.Context(), o)
	if err != nil {
		s.ownerMessage(w, http.StatusServiceUnavailable, o.lang, wordsFor(o.lang).Unreachable)
		return
	}
	if !codePattern.MatchString(code) || !st.NeedsCode {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	err = s.cfg.Temporal.SignalWorkflow(ctx, wfapi.EnrollmentID(o.offer), "", wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code})
	if err != nil && !isNotFound(err) {
		s.log.Warn("webui: owner's code", "offer", o.offer, "error", err)
		msg := wordsFor(o.lang).Failed
		if unreachableBackend(err) != "" {
			msg = wordsFor(o.lang).Unreachable
		}
		s.ownerMessage(w, http.StatusServiceUnavailable, o.lang, msg)
		return
	}
	if err == nil {
		back += "&codesent=1"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
