package ilinksim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// outboundMsg is the sendmessage "msg" as the simulator reads it.
type outboundMsg struct {
	ToUserID     string         `json:"to_user_id"`
	ClientID     string         `json:"client_id"`
	MessageType  int            `json:"message_type"`
	MessageState *int           `json:"message_state"`
	ContextToken string         `json:"context_token"`
	ItemList     []outboundItem `json:"item_list"`
}

type outboundItem struct {
	Type     int `json:"type"`
	TextItem *struct {
		Text string `json:"text"`
	} `json:"text_item"`
	ImageItem *struct {
		Media *outboundMedia `json:"media"`
	} `json:"image_item"`
	VoiceItem *struct {
		Media *outboundMedia `json:"media"`
	} `json:"voice_item"`
	FileItem *struct {
		Media    *outboundMedia  `json:"media"`
		FileName string          `json:"file_name"`
		Len      json.RawMessage `json:"len"`
	} `json:"file_item"`
	VideoItem *struct {
		Media *outboundMedia `json:"media"`
	} `json:"video_item"`
}

type outboundMedia struct {
	EncryptQueryParam string `json:"encrypt_query_param"`
	AESKey            string `json:"aes_key"`
	EncryptType       int    `json:"encrypt_type"`
}

const prepareFailed = "prepare failed"

func refusedBody() map[string]any { return map[string]any{"ret": -2, "errmsg": prepareFailed} }

func (s *Server) handleSendMessage(c *call) {
	if c.r.Method != http.MethodPost {
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	msg, rec, parseErr := parseSend(c.body)

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	rec.At, rec.Received = now, time.Now()
	b, authErr := s.authBotLocked(c.r)
	if b != nil {
		rec.BotID = b.info.BotID
	} else if bb := s.tokens[strings.TrimPrefix(c.r.Header.Get("Authorization"), "Bearer ")]; bb != nil {
		rec.BotID = bb.info.BotID
	}
	finish := func(body map[string]any, reason string) {
		if reason != "" {
			rec.Outcome, rec.Reason = OutcomeRefused, reason
		} else {
			rec.Outcome = OutcomeAccepted
		}
		rec.Response, _ = json.Marshal(body)
		rec.Index = len(s.sent) + 1
		s.sent = append(s.sent, rec)
		writeJSON(c.w, body)
	}
	if authErr != nil {
		finish(s.staleBody(), ReasonStaleToken)
		return
	}
	// Validation first (it does not count toward the throttle), then the bot-wide burst
	// throttle, then the reply policy of the (bot, peer) pair.
	if body, reason := s.invalidSendLocked(b, msg, parseErr); reason != "" {
		finish(body, reason)
		return
	}
	if body, reason := s.throttleLocked(b, now); reason != "" {
		finish(body, reason)
		return
	}
	if body, reason := s.replyPolicyLocked(b, msg, now); reason != "" {
		finish(body, reason)
		return
	}

	// Accepted.
	b.peers[msg.ToUserID].state.SendsSinceInbound++
	if msg.ClientID != "" {
		if _, seen := b.clientIDs[msg.ClientID]; !seen {
			b.clientIDs[msg.ClientID] = rec.MessageState
		}
	}
	rec.MessageID = s.nextMessageIDLocked()
	rec.Rendered, rec.RenderNote = true, ""
	if note := s.renderNoteLocked(b, c.r, msg, msg.ItemList[0], rec.MessageState); note != "" {
		rec.Rendered, rec.RenderNote = false, note
	}
	b.connSends[c.r.RemoteAddr]++
	switch s.cfg.SendSuccessStyle {
	case SendSuccessEmpty:
		finish(map[string]any{}, "")
	case SendSuccessRet0:
		finish(map[string]any{"ret": 0}, "")
	default:
		finish(map[string]any{"ret": 0, "message_id": rec.MessageID}, "")
	}
}

// parseSend decodes a sendmessage body and the record of it (everything but the outcome
// and the bot); parseErr is set when the body is not a message.
func parseSend(body []byte) (msg outboundMsg, rec SentMessage, parseErr error) {
	var req struct {
		Msg json.RawMessage `json:"msg"`
	}
	parseErr = decodeBody(body, &req)
	if parseErr == nil {
		if len(req.Msg) == 0 || bytes.Equal(req.Msg, []byte("null")) {
			parseErr = errEmptyMsg
		} else {
			parseErr = json.Unmarshal(req.Msg, &msg)
		}
	}
	rec.Msg = req.Msg
	rec.ToUserID, rec.ClientID, rec.ContextToken = msg.ToUserID, msg.ClientID, msg.ContextToken
	rec.MessageState = 2
	if msg.MessageState != nil {
		rec.MessageState = *msg.MessageState
	}
	rec.ItemTypes = []int{}
	for _, it := range msg.ItemList {
		rec.ItemTypes = append(rec.ItemTypes, it.Type)
		if it.TextItem != nil && rec.Text == "" {
			rec.Text = it.TextItem.Text
		}
	}
	return msg, rec, parseErr
}

// invalidSendLocked is the answer and reason of a message iLink refuses as malformed
// ("" when it is well formed): one item whose payload matches its type, a recipient, text
// within the limit, a decimal file length, and no second state for one client id.
func (s *Server) invalidSendLocked(b *bot, msg outboundMsg, parseErr error) (map[string]any, string) {
	if parseErr != nil || len(msg.ItemList) != 1 {
		return invalidArgs(), ReasonInvalid
	}
	if msg.ToUserID == "" {
		return map[string]any{"ret": -2, "errmsg": "to_user_id required"}, ReasonInvalid
	}
	item := msg.ItemList[0]
	if !payloadMatches(item) {
		return invalidArgs(), ReasonInvalid
	}
	if item.Type == itemText && len(item.TextItem.Text) > s.cfg.MaxTextBytes && s.cfg.MaxTextBytes > 0 {
		return map[string]any{"ret": -2}, ReasonTextTooLong
	}
	if item.Type == itemFile && !decimalString(item.FileItem.Len) {
		return invalidArgs(), ReasonInvalid
	}
	if msg.ClientID != "" {
		if st, seen := b.clientIDs[msg.ClientID]; seen && st == 1 {
			// GENERATING then FINISH with the same client_id: no editing/streaming.
			return refusedBody(), ReasonInvalid
		}
	}
	return nil, ""
}

// throttleLocked applies the bot-wide burst throttle to one more send attempt: refused
// while a penalty runs (an attempt may extend it), and a burst of ThrottleBurst attempts
// within ThrottleInterval starts one.
func (s *Server) throttleLocked(b *bot, now time.Time) (map[string]any, string) {
	if !b.penaltyUntil.IsZero() && now.Before(b.penaltyUntil) {
		if s.cfg.ThrottleExtendOnAttempt {
			b.penaltyUntil = now.Add(s.cfg.ThrottlePenalty)
		}
		return refusedBody(), ReasonThrottle
	}
	if s.cfg.ThrottleBurst > 0 {
		cut := now.Add(-s.cfg.ThrottleInterval)
		kept := b.attempts[:0]
		for _, t := range b.attempts {
			if t.After(cut) {
				kept = append(kept, t)
			}
		}
		b.attempts = append(kept, now)
		if len(b.attempts) >= s.cfg.ThrottleBurst {
			b.penaltyUntil = now.Add(s.cfg.ThrottlePenalty)
			b.attempts = b.attempts[:0]
			return refusedBody(), ReasonThrottle
		}
	}
	return nil, ""
}

// replyPolicyLocked applies the reply policy of the (bot, peer) pair: an inbound message
// first, within the idle and reply windows, within the quota, with a valid context token.
func (s *Server) replyPolicyLocked(b *bot, msg outboundMsg, now time.Time) (map[string]any, string) {
	p := b.peers[msg.ToUserID]
	if p == nil || p.state.LastInboundAt.IsZero() {
		return refusedBody(), ReasonNoInbound
	}
	since := now.Sub(p.state.LastInboundAt)
	if s.cfg.IdleStaleAfter > 0 && since >= s.cfg.IdleStaleAfter {
		return s.staleBody(), ReasonIdle
	}
	if s.cfg.ReplyWindow > 0 && since >= s.cfg.ReplyWindow {
		return refusedBody(), ReasonWindow
	}
	if s.cfg.ReplyQuota > 0 && p.state.SendsSinceInbound >= s.cfg.ReplyQuota {
		return refusedBody(), ReasonQuota
	}
	switch s.cfg.ContextTokenMode {
	case TokenPresent:
		if msg.ContextToken == "" || !p.tokens[msg.ContextToken] {
			return refusedBody(), ReasonContextToken
		}
	case TokenLatest:
		if msg.ContextToken == "" || msg.ContextToken != p.state.LatestContextToken {
			return refusedBody(), ReasonContextToken
		}
	}
	return nil, ""
}

type sendError string

func (e sendError) Error() string { return string(e) }

const errEmptyMsg = sendError("missing msg")

// payloadMatches checks that the item carries the payload of its type.
func payloadMatches(it outboundItem) bool {
	switch it.Type {
	case itemText:
		return it.TextItem != nil
	case itemImage:
		return it.ImageItem != nil && it.ImageItem.Media != nil
	case itemVoice:
		return it.VoiceItem != nil || it.VideoItem != nil // a video sent as type 3 is accepted (and not shown)
	case itemFile:
		return it.FileItem != nil && it.FileItem.Media != nil
	case itemVideo:
		return it.VideoItem != nil && it.VideoItem.Media != nil
	case itemToolStart, itemToolResult:
		return true
	default:
		return false
	}
}

func decimalString(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil || s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// renderNoteLocked explains why an accepted message would not show on the
// phone ("" = it would render).
func (s *Server) renderNoteLocked(b *bot, r *http.Request, msg outboundMsg, it outboundItem, state int) string {
	switch {
	case it.Type == itemVoice:
		return "bot-sent voice (type 3) is accepted but not rendered"
	case it.Type == itemToolStart || it.Type == itemToolResult:
		return "tool items are accepted but not rendered"
	case state != 2:
		return "message_state is not FINISH: a placeholder bubble that never resolves"
	case msg.MessageType != 2:
		return "message_type is not 2 (BOT)"
	}
	var media *outboundMedia
	switch it.Type {
	case itemImage:
		media = it.ImageItem.Media
	case itemFile:
		media = it.FileItem.Media
	case itemVideo:
		media = it.VideoItem.Media
	}
	if media != nil {
		if note := s.mediaNoteLocked(media); note != "" {
			return note
		}
	}
	if s.cfg.RequireNotifyStart && !b.notifyStarted && b.connSends[r.RemoteAddr] > 0 {
		return "no msg/notifystart: only the first reply per connection is shown"
	}
	return ""
}

func (s *Server) mediaNoteLocked(m *outboundMedia) string {
	if _, isUpload := s.uploads[m.EncryptQueryParam]; isUpload {
		return "encrypt_query_param is an upload_param, not the x-encrypted-param download reference"
	}
	obj := s.objects[m.EncryptQueryParam]
	if obj == nil {
		return "encrypt_query_param names no CDN object"
	}
	raw, err := base64.StdEncoding.DecodeString(m.AESKey)
	if err != nil {
		return "aes_key is not base64"
	}
	switch {
	case len(raw) == 16:
		return "aes_key is base64 of the raw key, not of its hex form (grey box)"
	case len(raw) != 32 || !hex32.Match(raw):
		return "aes_key does not decode to a 32-character hex key"
	case !strings.EqualFold(string(raw), obj.aesKeyHex):
		return "aes_key does not match the uploaded object's key"
	}
	return ""
}

// hasUserID answers a getconfig or sendtyping call that names no user, and reports
// whether it names one.
func hasUserID(c *call, userID string) bool {
	if userID == "" {
		writeJSON(c.w, map[string]any{"ret": -2, "errcode": 0, "errmsg": "ilink_user_id required"})
		return false
	}
	return true
}

func (s *Server) handleGetConfig(c *call) {
	var req struct {
		UserID string `json:"ilink_user_id"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.authedPostLocked(c, &req)
	if !ok || !hasUserID(c, req.UserID) {
		return
	}
	p := b.peerLocked(req.UserID)
	if p.state.TypingTicket == "" {
		p.state.TypingTicket = newTypingTicket()
	}
	writeJSON(c.w, map[string]any{"ret": 0, "typing_ticket": p.state.TypingTicket})
}

func (s *Server) handleSendTyping(c *call) {
	var req struct {
		UserID       string `json:"ilink_user_id"`
		TypingTicket string `json:"typing_ticket"`
		Status       int    `json:"status"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.authedPostLocked(c, &req)
	if !ok || !hasUserID(c, req.UserID) {
		return
	}
	if req.Status != 1 && req.Status != 2 {
		writeJSON(c.w, invalidArgs())
		return
	}
	p := b.peerLocked(req.UserID)
	if req.TypingTicket != "" && req.TypingTicket == p.state.TypingTicket {
		p.state.Typing = req.Status
	}
	writeJSON(c.w, map[string]any{"ret": 0})
}

// Sent returns the send log of one bot ("" = all), oldest first.
func (s *Server) Sent(botID string) []SentMessage { return s.SentAfter(botID, 0) }

// SentAfter returns the entries of the send log of one bot ("" = all) whose Index is
// greater than after, oldest first: a watcher reads only what is new.
func (s *Server) SentAfter(botID string, after int) []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []SentMessage{}
	after = min(max(after, 0), len(s.sent))
	for _, m := range s.sent[after:] {
		if botID == "" || m.BotID == botID {
			out = append(out, m)
		}
	}
	return out
}
