package ilinksim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// qrSession is one QR login attempt. Guarded by Server.mu.
type qrSession struct {
	code        string
	img         string
	created     time.Time
	localTokens []string
	status      string // wait, scaned, need_verifycode, verify_code_blocked, expired, binded_redirect, confirmed
	user        string
	verifyCode  string // set while a code is required and not yet given
	verified    bool
	wrong       int
	redirect    string // redirect_host to announce once
	redirected  string // redirect_host announced
	bot         *BotInfo
}

func (s *Server) wakeQRLocked() {
	close(s.qrWake)
	s.qrWake = make(chan struct{})
}

// expireLocked moves a live session past its TTL to expired.
func (s *Server) expireLocked(q *qrSession) {
	switch q.status {
	case QRConfirmed, QRBindedRedirect, QRVerifyBlocked, QRExpired:
		return
	}
	if s.cfg.QRTTL > 0 && !s.nowLocked().Before(q.created.Add(s.cfg.QRTTL)) {
		q.status = QRExpired
	}
}

func (s *Server) qrInfoLocked(q *qrSession) QRInfo {
	s.expireLocked(q)
	info := QRInfo{
		QRCode: q.code, ImgContent: q.img, CreatedAt: q.created, Status: q.status, UserID: q.user,
		VerifyCode: q.verifyCode, WrongCodes: q.wrong, RedirectHost: q.redirect, RedirectPending: q.redirect != "",
		LocalTokens: len(q.localTokens),
	}
	if info.RedirectHost == "" {
		info.RedirectHost = q.redirected
	}
	if s.cfg.QRTTL > 0 {
		info.ExpiresAt = q.created.Add(s.cfg.QRTTL)
	}
	if q.bot != nil {
		cp := *q.bot
		info.Bot = &cp
	}
	return info
}

func (s *Server) handleGetBotQRCode(c *call) {
	var tokens []string
	switch c.r.Method {
	case http.MethodGet:
	case http.MethodPost:
		var req struct {
			LocalTokenList []string `json:"local_token_list"`
		}
		if len(c.body) > 0 {
			if err := json.Unmarshal(c.body, &req); err != nil {
				writeJSON(c.w, invalidArgs())
				return
			}
		}
		tokens = req.LocalTokenList
	default:
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if bt := c.r.URL.Query().Get("bot_type"); bt != "3" {
		writeJSON(c.w, map[string]any{"ret": -2, "errmsg": "invalid bot_type"})
		return
	}
	code := randHex(16)
	q := &qrSession{code: code, img: s.cfg.QRImageBase + code + "?bot_type=3", localTokens: tokens, status: QRWait}
	s.mu.Lock()
	q.created = s.nowLocked()
	s.qrs[code] = q
	s.qrOrder = append(s.qrOrder, q)
	s.mu.Unlock()
	writeJSON(c.w, map[string]any{"qrcode": q.code, "qrcode_img_content": q.img})
}

func (s *Server) handleGetQRCodeStatus(c *call) {
	if c.r.Method != http.MethodGet {
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	qv := c.r.URL.Query()
	code := qv.Get("qrcode")
	verify, hasVerify := qv.Get("verify_code"), qv.Has("verify_code")
	var hold *time.Timer
	if s.cfg.QRPollHold > 0 {
		hold = time.NewTimer(s.cfg.QRPollHold)
		defer hold.Stop()
	}
	first := ""
	for {
		s.mu.Lock()
		q := s.qrs[code]
		if q == nil {
			s.mu.Unlock()
			writeJSON(c.w, map[string]any{"status": QRExpired})
			return
		}
		if hasVerify {
			s.applyVerifyLocked(q, verify)
			hasVerify = false
		}
		resp := s.pollLocked(q, c.r)
		wake := s.qrWake
		s.mu.Unlock()
		status, _ := resp["status"].(string)
		if first == "" {
			first = status
		}
		if hold == nil || status != first || status != QRWait && status != QRScaned {
			writeJSON(c.w, resp)
			return
		}
		select {
		case <-wake:
		case <-hold.C:
			writeJSON(c.w, resp)
			return
		case <-c.r.Context().Done():
			return
		}
	}
}

// applyVerifyLocked checks a verify_code sent with a poll.
func (s *Server) applyVerifyLocked(q *qrSession, code string) {
	s.expireLocked(q)
	if q.status != QRNeedVerifyCode || q.verifyCode == "" {
		return
	}
	if code == q.verifyCode {
		q.verified, q.verifyCode, q.status = true, "", QRScaned
		return
	}
	q.wrong++
	if s.cfg.VerifyMaxWrong > 0 && q.wrong >= s.cfg.VerifyMaxWrong {
		q.status = QRVerifyBlocked
	}
}

// pollLocked is the get_qrcode_status answer for q's current state.
func (s *Server) pollLocked(q *qrSession, r *http.Request) map[string]any {
	s.expireLocked(q)
	if q.redirect != "" && q.status != QRExpired && q.status != QRVerifyBlocked {
		host := q.redirect
		q.redirected, q.redirect = host, ""
		if host == "-" {
			host = r.Host
		}
		return map[string]any{"status": QRRedirect, "redirect_host": host}
	}
	switch q.status {
	case QRConfirmed:
		return map[string]any{
			"status": QRConfirmed, "bot_token": q.bot.Token, "ilink_bot_id": q.bot.BotID,
			"baseurl": q.bot.BaseURL, "ilink_user_id": q.bot.Owner,
		}
	default:
		return map[string]any{"status": q.status}
	}
}

// QR control actions.

func (s *Server) findQRLocked(code string) (*qrSession, error) {
	if code == "" {
		if len(s.qrOrder) == 0 {
			return nil, fmt.Errorf("%w: no QR session yet", ErrNotFound)
		}
		return s.qrOrder[len(s.qrOrder)-1], nil
	}
	q := s.qrs[code]
	if q == nil {
		return nil, fmt.Errorf("%w: QR code %q", ErrNotFound, code)
	}
	return q, nil
}

// ErrConflict is wrapped when a QR action does not fit the session's state.
var ErrConflict = errors.New("ilinksim: conflict")

func conflict(q *qrSession, action string) error {
	return fmt.Errorf("%w: cannot %s a QR session in status %q", ErrConflict, action, q.status)
}

// QRAct performs a scripted QR action: "scan", "verify", "redirect",
// "confirm" or "expire" (the same as POST /_sim/qr/{action}). baseURL is the
// baseurl handed to a newly confirmed bot.
func (s *Server) QRAct(action string, a QRAction, baseURL string) (QRInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.findQRLocked(a.QRCode)
	if err != nil {
		return QRInfo{}, err
	}
	s.expireLocked(q)
	live := q.status == QRWait || q.status == QRScaned || q.status == QRNeedVerifyCode
	switch action {
	case "scan":
		if q.status != QRWait {
			return QRInfo{}, conflict(q, action)
		}
		s.scanLocked(q, a.UserID)
	case "verify":
		if !live || q.verified {
			return QRInfo{}, conflict(q, action)
		}
		if q.status == QRWait {
			s.scanLocked(q, a.UserID)
			if q.status != QRScaned {
				return s.qrInfoLocked(q), nil
			}
		}
		code := a.Code
		if code == "" {
			code = strconv.Itoa(100000 + int(binary.BigEndian.Uint32(randBytes(4))%900000))
		}
		q.verifyCode, q.status = code, QRNeedVerifyCode
	case "redirect":
		if !live {
			return QRInfo{}, conflict(q, action)
		}
		if q.status == QRWait {
			s.scanLocked(q, a.UserID)
		}
		host := a.Host
		if host == "" {
			host = s.cfg.RedirectHost
		}
		if host == "" {
			host = "-" // the polling request's own Host
		}
		q.redirect = host
	case "confirm":
		if q.status != QRScaned {
			return QRInfo{}, conflict(q, action)
		}
		b := s.createBotLocked(q.user, baseURL, true)
		info := b.info
		q.bot, q.status = &info, QRConfirmed
	case "expire":
		if !live {
			return QRInfo{}, conflict(q, action)
		}
		q.status = QRExpired
	default:
		return QRInfo{}, fmt.Errorf("%w: unknown QR action %q", ErrBadRequest, action)
	}
	s.wakeQRLocked()
	return s.qrInfoLocked(q), nil
}

// scanLocked marks q scanned by user; binded_redirect when the scanner's
// live bot is in the session's local_token_list.
func (s *Server) scanLocked(q *qrSession, user string) {
	if user == "" {
		user = newUserID()
	}
	q.user, q.status = user, QRScaned
	for _, tok := range q.localTokens {
		if b := s.tokens[tok]; b != nil && !b.info.Dead && b.info.Owner == user {
			info := b.info
			q.bot, q.status = &info, QRBindedRedirect
			return
		}
	}
}

// QRSessions lists the QR sessions, oldest first.
func (s *Server) QRSessions() []QRInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []QRInfo{}
	for _, q := range s.qrOrder {
		out = append(out, s.qrInfoLocked(q))
	}
	return out
}
