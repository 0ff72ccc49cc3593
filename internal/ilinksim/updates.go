package ilinksim

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ErrNotFound is wrapped by Server methods when a bot or message is unknown.
var ErrNotFound = errors.New("ilinksim: not found")

// ErrBadRequest is wrapped by Server methods when an argument is invalid.
var ErrBadRequest = errors.New("ilinksim: bad request")

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, a...)...)
}

// longPollMS is the longpolling_timeout_ms value handed to clients.
func (s *Server) longPollMS() int {
	if s.cfg.LongPollTimeoutMS > 0 {
		return s.cfg.LongPollTimeoutMS
	}
	return int(s.cfg.LongPollHold / time.Millisecond)
}

func (s *Server) handleGetUpdates(c *call) {
	if c.r.Method != http.MethodPost {
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		GetUpdatesBuf *string `json:"get_updates_buf"`
	}
	if err := decodeBody(c.body, &req); err != nil {
		writeJSON(c.w, invalidArgs())
		return
	}
	cursor := ""
	if req.GetUpdatesBuf != nil {
		cursor = *req.GetUpdatesBuf
	}
	hold := time.NewTimer(s.cfg.LongPollHold)
	defer hold.Stop()
	expired := s.cfg.LongPollHold <= 0
	var held *bot // counted in held.pollers while waiting
	defer func() {
		if held != nil {
			s.mu.Lock()
			held.pollers--
			s.mu.Unlock()
		}
	}()
	for {
		s.mu.Lock()
		b, err := s.authBotLocked(c.r)
		if err != nil {
			s.mu.Unlock()
			writeJSON(c.w, s.staleBody())
			return
		}
		if c.r.Context().Err() != nil {
			// The client is gone: hand out nothing.
			s.mu.Unlock()
			return
		}
		msgs := s.takeLocked(b, cursor == "")
		if len(msgs) > 0 || expired {
			next := cursor
			if len(msgs) > 0 || next == "" {
				next = newCursor(b.nonce, b.offset)
			}
			if msgs == nil {
				msgs = []*wireMessage{}
			}
			s.mu.Unlock()
			writeJSON(c.w, map[string]any{
				"ret":                    0,
				"msgs":                   msgs,
				"get_updates_buf":        next,
				"longpolling_timeout_ms": s.longPollMS(),
			})
			return
		}
		wake := b.wake
		if held == nil {
			held = b
			b.pollers++
		}
		s.mu.Unlock()
		select {
		case <-wake:
		case <-hold.C:
			expired = true
		case <-c.r.Context().Done():
			return
		}
	}
}

// takeLocked hands out the visible queued messages (consuming them) and,
// for an empty cursor, prepends the configured replay of delivered ones.
func (s *Server) takeLocked(b *bot, emptyCursor bool) []*wireMessage {
	var out []*wireMessage
	if emptyCursor && s.cfg.ReplayOnEmptyCursor > 0 && len(b.delivered) > 0 {
		start := max(0, len(b.delivered)-s.cfg.ReplayOnEmptyCursor)
		for _, q := range b.delivered[start:] {
			if s.cfg.ReplayMaxAge > 0 && s.nowLocked().Sub(time.UnixMilli(q.msg.CreateTimeMS)) > s.cfg.ReplayMaxAge {
				continue
			}
			out = append(out, q.msg)
		}
	}
	fresh := 0
	rest := b.queue[:0:0]
	for _, q := range b.queue {
		if fresh < s.cfg.MaxBatch && !q.visibleAt.After(s.nowLocked()) {
			out = append(out, q.msg)
			b.delivered = append(b.delivered, q)
			fresh++
			continue
		}
		rest = append(rest, q)
	}
	if fresh == 0 {
		if len(out) > 0 {
			return out
		}
		return nil
	}
	b.queue = rest
	b.offset += uint64(fresh)
	if keep := 1000; len(b.delivered) > keep {
		b.delivered = append([]*queued(nil), b.delivered[len(b.delivered)-keep:]...)
	}
	return out
}

// enqueueLocked queues m for b, visible from visibleAt, and wakes pollers.
func (s *Server) enqueueLocked(b *bot, m *wireMessage, visibleAt time.Time) {
	b.queue = append(b.queue, &queued{msg: m, visibleAt: visibleAt})
	b.wakeLocked()
}

// Inject queues an inbound user message (the same as POST /_sim/bots/{bot}/messages).
// cdnBase is the CDN base URL used for media full_url values.
func (s *Server) Inject(botID string, req InjectRequest, cdnBase string) (Injected, error) {
	kind, enc, err := checkInject(req)
	if err != nil {
		return Injected{}, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[botID]
	if b == nil {
		return Injected{}, errNotFoundBot(botID)
	}
	from := req.From
	if from == "" {
		from = b.info.Owner
	}
	now := s.nowLocked()
	var id uint64
	switch {
	case req.NoMessageID:
	case req.MessageID != 0:
		id = req.MessageID
	default:
		id = s.nextMessageIDLocked()
	}
	p := b.peerLocked(from)
	b.seq++
	m := &wireMessage{
		Seq:          b.seq,
		MessageID:    id,
		FromUserID:   from,
		ToUserID:     b.info.BotID,
		ClientID:     randHex(16),
		CreateTimeMS: ms(now),
		UpdateTimeMS: ms(now),
		SessionID:    p.state.SessionID,
		MessageType:  1,
		MessageState: 2,
		ContextToken: newContextToken(),
	}
	item := wireItem{Type: itemText, CreateTimeMS: ms(now), UpdateTimeMS: ms(now), IsCompleted: true}
	if id != 0 {
		item.MsgID = &wireID{v: id, numeric: s.cfg.NumericItemIDs}
	}
	var media *MediaRef
	if kind == KindText {
		item.TextItem = &wireText{Text: req.Text}
	} else {
		media = s.mediaItemLocked(b, &item, kind, enc, req, cdnBase)
	}
	if req.Ref != nil {
		item.RefMsg = s.refOf(*req.Ref)
	}
	m.ItemList = []wireItem{item}

	// Each inbound message resets the reply quota and the window and brings a new token.
	p.state.LastInboundAt = now
	p.state.SendsSinceInbound = 0
	p.state.LatestContextToken = m.ContextToken
	p.tokens[m.ContextToken] = true
	if id != 0 {
		b.inbox[id] = m
	}
	s.enqueueLocked(b, m, now)
	out := injected(m, media)
	for _, d := range req.Duplicates {
		dm := s.duplicateLocked(b, m, d)
		out.Duplicates = append(out.Duplicates, injected(dm, nil))
	}
	return out, nil
}

// checkInject validates an injection before anything changes and resolves its kind
// (default text) and key encoding (default raw base64 for images, hex base64 otherwise).
func checkInject(req InjectRequest) (kind, enc string, err error) {
	kind = req.Kind
	if kind == "" {
		kind = KindText
	}
	switch kind {
	case KindText, KindImage, KindFile, KindVoice, KindVideo:
	default:
		return "", "", badRequest("unknown kind %q", req.Kind)
	}
	enc = req.KeyEncoding
	if enc == "" {
		enc = KeyHexBase64
		if kind == KindImage {
			enc = KeyRawBase64
		}
	}
	switch enc {
	case KeyRawBase64, KeyHexBase64:
	case KeyImageHex, KeyNone:
		if kind != KindImage {
			return "", "", badRequest("key encoding %q is for images only", enc)
		}
	default:
		return "", "", badRequest("unknown key encoding %q", req.KeyEncoding)
	}
	if req.NoMessageID && req.MessageID != 0 {
		return "", "", badRequest("message_id and no_message_id are exclusive")
	}
	for _, d := range req.Duplicates {
		if err := checkDup(d); err != nil {
			return "", "", err
		}
	}
	return kind, enc, nil
}

// mediaItemLocked stores the injected media on the CDN (encrypted as kind and enc say)
// and makes item the media item that references it; it returns the media's reference.
func (s *Server) mediaItemLocked(b *bot, item *wireItem, kind, enc string, req InjectRequest, cdnBase string) *MediaRef {
	wm, media, ctLen := s.storeInboundLocked(b, req.Data, enc, req.FullURL, cdnBase)
	plainLen := len(req.Data)
	if plainLen == 0 {
		plainLen = defaultMediaSize
	}
	switch kind {
	case KindImage:
		item.Type = itemImage
		item.ImageItem = &wireImageItem{Media: wm, MidSize: ctLen, HDSize: ctLen}
		if enc == KeyImageHex {
			item.ImageItem.AESKey = media.AESKeyHex
		}
	case KindFile:
		name := req.FileName
		if name == "" {
			name = "file.bin"
		}
		item.Type = itemFile
		item.FileItem = &wireFileItem{Media: wm, FileName: name, MD5: media.PlaintextMD5, Len: strconv.Itoa(plainLen)}
	case KindVoice:
		item.Type = itemVoice
		item.VoiceItem = &wireVoiceItem{Media: wm, EncodeType: 6, BitsPerSample: 16, SampleRate: 16000, Playtime: 1000 + plainLen/2, Text: req.Text}
	case KindVideo:
		item.Type = itemVideo
		item.VideoItem = &wireVideoItem{Media: wm, VideoSize: ctLen, PlayLength: 3, VideoMD5: media.PlaintextMD5}
	}
	return media
}

// refOf is the quoted message of an injection.
func (s *Server) refOf(r RefSpec) *wireRef {
	ref := &wireRef{Title: r.Title, PartialText: r.PartialText}
	if r.SvrID != 0 {
		ref.SvrID = &wireID{v: r.SvrID, numeric: s.cfg.NumericItemIDs}
	}
	if r.Text != "" {
		ref.MessageItem = &wireItem{Type: itemText, TextItem: &wireText{Text: r.Text}}
	}
	return ref
}

func checkDup(d DuplicateSpec) error {
	switch d.Mode {
	case DupSame, DupNewToken, DupNoID:
	default:
		return badRequest("unknown duplicate mode %q", d.Mode)
	}
	if d.Delay < 0 {
		return badRequest("negative duplicate delay")
	}
	return nil
}

// duplicateLocked queues a copy of m per d.
func (s *Server) duplicateLocked(b *bot, m *wireMessage, d DuplicateSpec) *wireMessage {
	cp := *m
	cp.ItemList = append([]wireItem(nil), m.ItemList...)
	switch d.Mode {
	case DupNewToken:
		cp.ContextToken = newContextToken()
		p := b.peerLocked(cp.FromUserID)
		p.tokens[cp.ContextToken] = true
		p.state.LatestContextToken = cp.ContextToken
	case DupNoID:
		cp.MessageID = 0
		for i := range cp.ItemList {
			cp.ItemList[i].MsgID = nil
		}
	}
	s.enqueueLocked(b, &cp, s.nowLocked().Add(time.Duration(d.Delay)))
	return &cp
}

// Duplicate re-queues an earlier inbound message (POST /_sim/bots/{bot}/duplicates).
func (s *Server) Duplicate(botID string, req DuplicateRequest) (Injected, error) {
	if err := checkDup(req.DuplicateSpec); err != nil {
		return Injected{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[botID]
	if b == nil {
		return Injected{}, errNotFoundBot(botID)
	}
	m := b.inbox[req.MessageID]
	if m == nil {
		return Injected{}, fmt.Errorf("%w: message_id %d on bot %q", ErrNotFound, req.MessageID, botID)
	}
	return injected(s.duplicateLocked(b, m, req.DuplicateSpec), nil), nil
}

func injected(m *wireMessage, media *MediaRef) Injected {
	raw, _ := json.Marshal(m)
	return Injected{
		MessageID:    m.MessageID,
		Seq:          m.Seq,
		ContextToken: m.ContextToken,
		ClientID:     m.ClientID,
		From:         m.FromUserID,
		Media:        media,
		Message:      raw,
	}
}

const defaultMediaSize = 1000

// storeInboundLocked encrypts data (random when empty) with a fresh key,
// stores the ciphertext in the CDN and returns the wire media object.
func (s *Server) storeInboundLocked(b *bot, data []byte, enc string, fullURL bool, cdnBase string) (*wireMedia, *MediaRef, int) {
	if len(data) == 0 {
		data = randBytes(defaultMediaSize)
	}
	sum := md5.Sum(data)
	key := randBytes(16)
	keyHex := hex.EncodeToString(key)
	obj := &cdnObject{source: "inject", botID: b.info.BotID, aesKeyHex: keyHex}
	if enc == KeyNone {
		obj.data = append([]byte(nil), data...)
		obj.aesKeyHex = ""
	} else {
		obj.data = encryptECB(key, data)
	}
	param := newOpaqueParam()
	s.objects[param] = obj
	ref := &MediaRef{EncryptQueryParam: param, AESKeyHex: obj.aesKeyHex, CiphertextSize: len(obj.data), PlaintextMD5: hex.EncodeToString(sum[:])}
	wm := &wireMedia{EncryptQueryParam: param, EncryptType: 1}
	switch enc {
	case KeyRawBase64:
		wm.AESKey = base64.StdEncoding.EncodeToString(key)
	case KeyHexBase64:
		wm.AESKey = base64.StdEncoding.EncodeToString([]byte(keyHex))
	}
	ref.AESKey = wm.AESKey
	if fullURL {
		wm.FullURL = cdnBase + "/download?encrypted_query_param=" + url.QueryEscape(param) + "&taskid=" + randHex(8)
		ref.FullURL = wm.FullURL
	}
	return wm, ref, len(obj.data)
}
