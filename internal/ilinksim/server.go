package ilinksim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the simulator: its state plus an http.Handler. Create it with
// New; it is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	mu        sync.Mutex
	now       time.Time     // the manual sim clock
	advanced  time.Duration // everything Advance added (Config.RealTime: the offset from the real clock)
	bots      map[string]*bot
	botOrder  []*bot
	tokens    map[string]*bot
	nextMsgID uint64

	qrs     map[string]*qrSession
	qrOrder []*qrSession
	qrWake  chan struct{}

	uploads map[string]*uploadSlot
	objects map[string]*cdnObject

	faults   []*Fault
	requests []RecordedRequest
	reqSeq   int
	sent     []SentMessage

	overlaps    int       // getupdates that arrived while another of their bot was outstanding
	lastOverlap time.Time // real time of the latest
}

// New returns a simulator with the given configuration. Empty string modes
// and non-positive body limits fall back to DefaultConfig's values; call
// Config.Validate first to reject bad settings instead.
func New(cfg Config) *Server {
	def := DefaultConfig()
	if cfg.ContextTokenMode == "" {
		cfg.ContextTokenMode = def.ContextTokenMode
	}
	if cfg.SendSuccessStyle == "" {
		cfg.SendSuccessStyle = def.SendSuccessStyle
	}
	if cfg.StaleTokenStyle == "" {
		cfg.StaleTokenStyle = def.StaleTokenStyle
	}
	if cfg.UploadURLStyle == "" {
		cfg.UploadURLStyle = def.UploadURLStyle
	}
	if cfg.QRImageBase == "" {
		cfg.QRImageBase = def.QRImageBase
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = def.MaxBodyBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = def.MaxUploadBytes
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = def.MaxBatch
	}
	if cfg.MaxRecordedRequests <= 0 {
		cfg.MaxRecordedRequests = def.MaxRecordedRequests
	}
	if cfg.MessageIDBase == 0 {
		cfg.MessageIDBase = def.MessageIDBase
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:       cfg,
		log:       log,
		now:       time.Now(),
		bots:      map[string]*bot{},
		tokens:    map[string]*bot{},
		nextMsgID: cfg.MessageIDBase,
		qrs:       map[string]*qrSession{},
		qrWake:    make(chan struct{}),
		uploads:   map[string]*uploadSlot{},
		objects:   map[string]*cdnObject{},
	}
	s.mux = s.routes()
	return s
}

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the http.Handler serving /ilink/bot/..., /c2c/... and /_sim/....
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	// iLink API (recorded, fault-injectable).
	m.HandleFunc("/ilink/bot/getupdates", s.api(s.handleGetUpdates, true))
	m.HandleFunc("/ilink/bot/sendmessage", s.api(s.handleSendMessage, true))
	m.HandleFunc("/ilink/bot/getuploadurl", s.api(s.handleGetUploadURL, true))
	m.HandleFunc("/ilink/bot/getconfig", s.api(s.handleGetConfig, true))
	m.HandleFunc("/ilink/bot/sendtyping", s.api(s.handleSendTyping, true))
	m.HandleFunc("/ilink/bot/msg/notifystart", s.api(s.handleNotifyStart, true))
	m.HandleFunc("/ilink/bot/msg/notifystop", s.api(s.handleNotifyStop, true))
	m.HandleFunc("/ilink/bot/get_bot_qrcode", s.api(s.handleGetBotQRCode, false))
	m.HandleFunc("/ilink/bot/get_qrcode_status", s.api(s.handleGetQRCodeStatus, false))
	m.HandleFunc("/c2c/upload", s.api(s.handleCDNUpload, false))
	m.HandleFunc("/c2c/download", s.api(s.handleCDNDownload, false))
	s.controlRoutes(m)
	return m
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// Defensive: a bug must not take the whole simulator down.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("ilinksim: handler panic", "path", r.URL.Path, "panic", v)
			http.Error(w, "internal simulator error", http.StatusInternalServerError)
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// call carries one recorded iLink request through its handler.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	body []byte
	seq  int // request log sequence number
}

type apiHandler func(c *call)

// api wraps an iLink/CDN handler: read and record the body, check headers,
// apply faults and strict mode.
func (s *Server) api(h apiHandler, authenticated bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		endpoint := endpointName(r.URL.Path)
		limit := s.cfg.MaxBodyBytes
		if endpoint == "c2c/upload" {
			limit = s.cfg.MaxUploadBytes
		}
		body, n, tooLarge, readErr := readBody(r.Body, limit)
		problems := checkRequest(r, endpoint, body, authenticated)
		seq, fault, polled, held := s.record(r, endpoint, body, n, problems, readErr == nil)
		if polled != nil {
			defer s.pollEnded(polled, held)
		}
		s.log.Debug("ilinksim request", "method", r.Method, "path", r.URL.Path, "seq", seq, "bytes", n, "problems", problems)
		if readErr != nil {
			// The client went away or sent a broken body.
			http.Error(w, "read body: "+readErr.Error(), http.StatusBadRequest)
			return
		}
		if tooLarge {
			w.Header().Set("x-error-message", "request body too large")
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if fault != nil {
			if done := s.applyFault(w, r, fault); done {
				return
			}
		}
		if s.cfg.StrictClient && len(problems) > 0 && !strings.HasPrefix(endpoint, "c2c/") {
			writeJSON(w, map[string]any{"ret": -2, "errmsg": "strict client: " + problems[0]})
			return
		}
		h(&call{w: w, r: r, body: body, seq: seq})
	}
}

// endpointName maps a path to the name used by faults and the request log.
func endpointName(path string) string {
	if rest, ok := strings.CutPrefix(path, "/ilink/bot/"); ok {
		return rest
	}
	return strings.TrimPrefix(path, "/")
}

func readBody(rc io.Reader, limit int64) (body []byte, n int64, tooLarge bool, err error) {
	if rc == nil {
		return nil, 0, false, nil
	}
	var buf bytes.Buffer
	n, err = io.Copy(&buf, io.LimitReader(rc, limit+1))
	if err != nil {
		return buf.Bytes(), n, false, err
	}
	if n > limit {
		// Drain (bounded) so keep-alive still works, but report the overflow.
		extra, _ := io.Copy(io.Discard, io.LimitReader(rc, 64<<20))
		return buf.Bytes()[:limit], n + extra, true, nil
	}
	return buf.Bytes(), n, false, nil
}

// record appends the request to the log and pops the matching fault. A getupdates of a
// known bot whose body arrived whole is counted as outstanding until its handler returns (the caller calls
// pollEnded with the bot returned); one that arrives while another is outstanding is an
// overlap (see trackPollLocked).
func (s *Server) record(r *http.Request, endpoint string, body []byte, n int64, problems []string, whole bool) (int, *Fault, *bot, *heldPoll) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqSeq++
	rr := RecordedRequest{
		Seq:        s.reqSeq,
		Received:   time.Now(),
		SimTime:    s.nowLocked(),
		Method:     r.Method,
		Path:       r.URL.Path,
		RawQuery:   r.URL.RawQuery,
		Host:       r.Host,
		RemoteAddr: r.RemoteAddr,
		Endpoint:   endpoint,
		Header:     r.Header.Clone(),
		Body:       bytes.Clone(body[:min(int64(len(body)), s.cfg.MaxBodyBytes)]),
		BodyLen:    n,
		Problems:   problems,
	}
	var polled *bot
	var held *heldPoll
	if endpoint == "getupdates" && whole {
		// Only a request that arrived whole is a poll: iLink cannot serve one whose body
		// (its cursor) never came, and neither can this server.
		var overlap string
		polled, held, overlap = s.trackPollLocked(r, rr.Received)
		if overlap != "" {
			// Recorded only: the strict-client check (on the caller's list) does not
			// refuse an overlapping poll.
			rr.Problems = append(slices.Clone(problems), overlap)
		}
	}
	f := s.popFaultLocked(endpoint)
	if f != nil {
		rr.Fault = f.Kind
	}
	s.requests = append(s.requests, rr)
	if over := len(s.requests) - s.cfg.MaxRecordedRequests; over > 0 {
		s.requests = append([]RecordedRequest(nil), s.requests[over:]...)
	}
	return s.reqSeq, f, polled, held
}

// maxOverlapTimes bounds the overlap instants a bot keeps (the newest are kept).
const maxOverlapTimes = 100

// trackPollLocked counts a getupdates arriving at at as outstanding for its bot (by
// bearer token, live or dead; nil for an unknown token). iLink expects one outstanding
// getupdates per bot (docs/simulator.md#what-it-simulates): one that arrives while
// another of the same bot is outstanding (received and not answered, its client not
// gone: see ConnContext) is an overlap, counted per bot and in total with its instant,
// and described in the returned problem.
func (s *Server) trackPollLocked(r *http.Request, at time.Time) (*bot, *heldPoll, string) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil, nil, ""
	}
	b := s.tokens[tok]
	if b == nil {
		return nil, nil, ""
	}
	var problem string
	live := 0
	for _, h := range b.outstanding {
		if !h.clientGone() {
			live++
		}
	}
	if live > 0 {
		b.overlaps++
		b.overlapsAt = append(b.overlapsAt, at)
		if over := len(b.overlapsAt) - maxOverlapTimes; over > 0 {
			b.overlapsAt = append([]time.Time(nil), b.overlapsAt[over:]...)
		}
		s.overlaps++
		s.lastOverlap = at
		problem = fmt.Sprintf("getupdates while %d other getupdates of this bot is outstanding (iLink expects one per bot)", live)
	}
	h := &heldPoll{conn: requestConn(r)}
	b.outstanding = append(b.outstanding, h)
	return b, h, problem
}

// pollEnded ends an outstanding getupdates counted by trackPollLocked.
func (s *Server) pollEnded(b *bot, h *heldPoll) {
	s.mu.Lock()
	b.outstanding = slices.DeleteFunc(b.outstanding, func(x *heldPoll) bool { return x == h })
	s.mu.Unlock()
}

// checkRequest lists deviations from the official plugin's headers and base_info envelope
// (docs/simulator.md#what-it-simulates, "Headers").
func checkRequest(r *http.Request, endpoint string, body []byte, authenticated bool) []string {
	if strings.HasPrefix(endpoint, "c2c/") {
		return nil
	}
	var p []string
	h := r.Header
	if h.Get("iLink-App-Id") == "" {
		p = append(p, "missing iLink-App-Id header")
	}
	if v := h.Get("iLink-App-ClientVersion"); v == "" {
		p = append(p, "missing iLink-App-ClientVersion header")
	} else if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		p = append(p, "iLink-App-ClientVersion is not a decimal uint32: "+strconv.Quote(v))
	}
	if r.Method == http.MethodPost {
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			p = append(p, "Content-Type is not application/json: "+strconv.Quote(ct))
		}
		if v := h.Get("AuthorizationType"); v != "ilink_bot_token" {
			p = append(p, "AuthorizationType is not ilink_bot_token: "+strconv.Quote(v))
		}
		if msg := checkUIN(h.Get("X-WECHAT-UIN")); msg != "" {
			p = append(p, msg)
		}
	}
	auth := h.Get("Authorization")
	if authenticated {
		if !strings.HasPrefix(auth, "Bearer ") || strings.TrimPrefix(auth, "Bearer ") == "" {
			p = append(p, "missing Authorization: Bearer <token>")
		}
		p = append(p, checkBaseInfo(body)...)
	} else if auth != "" {
		p = append(p, "unexpected Authorization header on an unauthenticated endpoint")
	}
	return p
}

func checkUIN(v string) string {
	if v == "" {
		return "missing X-WECHAT-UIN header"
	}
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return "X-WECHAT-UIN is not base64: " + strconv.Quote(v)
	}
	if len(raw) == 0 || raw[0] == '+' || raw[0] == '-' {
		return "X-WECHAT-UIN does not decode to a decimal uint32: " + strconv.Quote(string(raw))
	}
	if _, err := strconv.ParseUint(string(raw), 10, 32); err != nil {
		return "X-WECHAT-UIN does not decode to a decimal uint32: " + strconv.Quote(string(raw))
	}
	return ""
}

func checkBaseInfo(body []byte) []string {
	var env struct {
		BaseInfo *struct {
			ChannelVersion *string `json:"channel_version"`
			BotAgent       *string `json:"bot_agent"`
		} `json:"base_info"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return []string{"body is not a JSON object"}
	}
	if env.BaseInfo == nil {
		return []string{"missing base_info"}
	}
	var p []string
	if env.BaseInfo.ChannelVersion == nil || *env.BaseInfo.ChannelVersion == "" {
		p = append(p, "missing base_info.channel_version")
	}
	if a := env.BaseInfo.BotAgent; a != nil {
		if len(*a) > 256 {
			p = append(p, "base_info.bot_agent longer than 256 bytes")
		}
		for i := 0; i < len(*a); i++ {
			if (*a)[i] < 0x20 || (*a)[i] > 0x7e {
				p = append(p, "base_info.bot_agent is not printable ASCII")
				break
			}
		}
	}
	return p
}

// writeJSON answers HTTP 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	writeJSONStatus(w, http.StatusOK, v)
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// staleBody is the errcode -14 answer in the configured style.
func (s *Server) staleBody() map[string]any {
	m := map[string]any{"errmsg": "session timeout"}
	switch s.cfg.StaleTokenStyle {
	case StaleRet:
		m["ret"] = -14
	case StaleBoth:
		m["ret"] = -14
		m["errcode"] = -14
	default:
		m["errcode"] = -14
	}
	return m
}

var errNoToken = errors.New("no bearer token")

// authBotLocked returns the live bot for the request's bearer token, or
// errNoToken / errStale (both answer errcode -14). Caller holds s.mu.
// authedPostLocked does what every authenticated bot POST does first: 405 for another
// method, the stale-token body for a dead or unknown token, invalid arguments for a body
// that does not decode into req. It reports the bot and whether the handler goes on. The
// caller holds s.mu.
func (s *Server) authedPostLocked(c *call, req any) (*bot, bool) {
	if c.r.Method != http.MethodPost {
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, false
	}
	b, err := s.authBotLocked(c.r)
	if err != nil {
		writeJSON(c.w, s.staleBody())
		return nil, false
	}
	if err := decodeBody(c.body, req); err != nil {
		writeJSON(c.w, invalidArgs())
		return nil, false
	}
	return b, true
}

func (s *Server) authBotLocked(r *http.Request) (*bot, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil, errNoToken
	}
	b := s.tokens[tok]
	if b == nil || b.info.Dead {
		return nil, errStale
	}
	return b, nil
}

var errStale = errors.New("stale token")

// decodeBody decodes a JSON request body; unknown fields are ignored.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("empty body")
	}
	return json.Unmarshal(body, v)
}

func invalidArgs() map[string]any { return map[string]any{"ret": -2, "errmsg": "invalid arguments"} }

// baseURL is the configured API base or http://<Host>.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return strings.TrimRight(s.cfg.BaseURL, "/")
	}
	return "http://" + r.Host
}

// cdnBase is the configured CDN base or http://<Host>/c2c.
func (s *Server) cdnBase(r *http.Request) string {
	if s.cfg.CDNBaseURL != "" {
		return strings.TrimRight(s.cfg.CDNBaseURL, "/")
	}
	return "http://" + r.Host + "/c2c"
}

func ms(t time.Time) int64 { return t.UnixMilli() }
