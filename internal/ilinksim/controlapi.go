package ilinksim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Control API routes (not recorded, not subject to faults):
//
//	POST   /_sim/bots                   CreateBotRequest -> BotInfo
//	GET    /_sim/bots                   -> []BotInfo
//	GET    /_sim/bots/{bot}             -> BotState
//	POST   /_sim/bots/{bot}/kill        -> BotInfo
//	POST   /_sim/bots/{bot}/messages    InjectRequest -> Injected
//	POST   /_sim/bots/{bot}/duplicates  DuplicateRequest -> Injected
//	GET    /_sim/bots/{bot}/sent        -> []SentMessage (?after=N: Index > N only)
//	GET    /_sim/sent                   -> []SentMessage (all bots; ?after=N as above)
//	GET    /_sim/stats                  -> Stats
//	GET    /_sim/clock                  -> ClockInfo
//	POST   /_sim/clock/advance          AdvanceRequest -> ClockInfo
//	GET    /_sim/qr                     -> []QRInfo
//	POST   /_sim/qr/{action}            QRAction -> QRInfo (scan, verify, redirect, confirm, expire)
//	GET    /_sim/faults                 -> []Fault
//	POST   /_sim/faults                 Fault -> Fault
//	DELETE /_sim/faults
//	GET    /_sim/requests               -> []RecordedRequest
//	DELETE /_sim/requests
//	GET    /_sim/cdn?encrypted_query_param=P -> CDNObject
//	DELETE /_sim/cdn?encrypted_query_param=P (the object expires: downloads answer 404)
func (s *Server) controlRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /_sim/bots", s.ctlCreateBot)
	m.HandleFunc("GET /_sim/bots", s.ctlBots)
	m.HandleFunc("GET /_sim/bots/{bot}", s.ctlBotState)
	m.HandleFunc("POST /_sim/bots/{bot}/kill", s.ctlKill)
	m.HandleFunc("POST /_sim/bots/{bot}/messages", s.ctlInject)
	m.HandleFunc("POST /_sim/bots/{bot}/duplicates", s.ctlDuplicate)
	m.HandleFunc("GET /_sim/bots/{bot}/sent", s.ctlSent)
	m.HandleFunc("GET /_sim/sent", s.ctlSent)
	m.HandleFunc("GET /_sim/stats", s.ctlStats)
	m.HandleFunc("GET /_sim/clock", s.ctlClock)
	m.HandleFunc("POST /_sim/clock/advance", s.ctlAdvance)
	m.HandleFunc("GET /_sim/qr", s.ctlQRList)
	m.HandleFunc("POST /_sim/qr/{action}", s.ctlQRAct)
	m.HandleFunc("GET /_sim/faults", s.ctlFaults)
	m.HandleFunc("POST /_sim/faults", s.ctlAddFault)
	m.HandleFunc("DELETE /_sim/faults", s.ctlClearFaults)
	m.HandleFunc("GET /_sim/requests", s.ctlRequests)
	m.HandleFunc("DELETE /_sim/requests", s.ctlClearRequests)
	m.HandleFunc("GET /_sim/cdn", s.ctlCDN)
	m.HandleFunc("DELETE /_sim/cdn", s.ctlExpireCDN)
	m.HandleFunc("/_sim/", func(w http.ResponseWriter, r *http.Request) {
		ctlError(w, http.StatusNotFound, "unknown control route "+r.Method+" "+r.URL.Path)
	})
}

func ctlError(w http.ResponseWriter, status int, msg string) {
	writeJSONStatus(w, status, map[string]string{"error": msg})
}

func ctlErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		ctlError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrConflict):
		ctlError(w, http.StatusConflict, err.Error())
	default:
		ctlError(w, http.StatusBadRequest, err.Error())
	}
}

// ctlDecode reads an optional JSON control body (at most MaxBodyBytes, or
// MaxUploadBytes for injections that carry media).
func (s *Server) ctlDecode(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	body, _, tooLarge, err := readBody(r.Body, limit)
	switch {
	case err != nil:
		ctlError(w, http.StatusBadRequest, "read body: "+err.Error())
		return false
	case tooLarge:
		ctlError(w, http.StatusRequestEntityTooLarge, "body too large")
		return false
	case len(strings.TrimSpace(string(body))) == 0:
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		ctlError(w, http.StatusBadRequest, "decode body: "+err.Error())
		return false
	}
	return true
}

func (s *Server) ctlCreateBot(w http.ResponseWriter, r *http.Request) {
	var req CreateBotRequest
	if !s.ctlDecode(w, r, &req, s.cfg.MaxBodyBytes) {
		return
	}
	writeJSON(w, s.CreateBot(req, s.baseURL(r)))
}

// CreateBot creates a live bot without a QR login (POST /_sim/bots).
func (s *Server) CreateBot(req CreateBotRequest, baseURL string) BotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createBotLocked(req.Owner, baseURL, req.KillPrevious).info
}

func (s *Server) ctlBots(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := []BotInfo{}
	for _, b := range s.botOrder {
		out = append(out, b.info)
	}
	s.mu.Unlock()
	writeJSON(w, out)
}

// BotState returns a bot's bookkeeping (GET /_sim/bots/{bot}).
func (s *Server) BotState(botID string) (BotState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[botID]
	if b == nil {
		return BotState{}, errNotFoundBot(botID)
	}
	return s.botStateLocked(b), nil
}

func errNotFoundBot(id string) error { return fmt.Errorf("%w: bot %q", ErrNotFound, id) }

func (s *Server) ctlBotState(w http.ResponseWriter, r *http.Request) {
	st, err := s.BotState(r.PathValue("bot"))
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, st)
}

// KillBot makes the bot's token answer errcode -14 (POST /_sim/bots/{bot}/kill).
func (s *Server) KillBot(botID string) (BotInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[botID]
	if b == nil {
		return BotInfo{}, errNotFoundBot(botID)
	}
	s.killLocked(b)
	return b.info, nil
}

func (s *Server) ctlKill(w http.ResponseWriter, r *http.Request) {
	info, err := s.KillBot(r.PathValue("bot"))
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, info)
}

func (s *Server) ctlInject(w http.ResponseWriter, r *http.Request) {
	var req InjectRequest
	if !s.ctlDecode(w, r, &req, s.cfg.MaxUploadBytes*2) {
		return
	}
	out, err := s.Inject(r.PathValue("bot"), req, s.cdnBase(r))
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, out)
}

func (s *Server) ctlDuplicate(w http.ResponseWriter, r *http.Request) {
	var req DuplicateRequest
	if !s.ctlDecode(w, r, &req, s.cfg.MaxBodyBytes) {
		return
	}
	out, err := s.Duplicate(r.PathValue("bot"), req)
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, out)
}

func (s *Server) ctlSent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("bot")
	if id != "" {
		if _, err := s.BotState(id); err != nil {
			ctlErr(w, err)
			return
		}
	}
	after := 0
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			ctlError(w, http.StatusBadRequest, "after: want a send log index (a non-negative integer)")
			return
		}
		after = n
	}
	writeJSON(w, s.SentAfter(id, after))
}

// Stats summarises the simulator's state (GET /_sim/stats).
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Bots: len(s.botOrder), Sent: len(s.sent), GetUpdatesOverlaps: s.overlaps, LastGetUpdatesOverlap: s.lastOverlap}
	for _, b := range s.botOrder {
		if !b.info.Dead {
			st.LiveBots++
		}
		st.HeldGetUpdates += b.pollers
		if b.pollers > 0 {
			st.BotsHeld++
		}
		st.Queued += len(b.queue)
	}
	return st
}

func (s *Server) ctlStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.Stats())
}

func (s *Server) ctlClock(w http.ResponseWriter, _ *http.Request) {
	now := s.Now()
	writeJSON(w, ClockInfo{Now: now, NowMS: now.UnixMilli()})
}

func (s *Server) ctlAdvance(w http.ResponseWriter, r *http.Request) {
	var req AdvanceRequest
	if !s.ctlDecode(w, r, &req, s.cfg.MaxBodyBytes) {
		return
	}
	now, err := s.Advance(req.By.std())
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, ClockInfo{Now: now, NowMS: now.UnixMilli()})
}

func (s *Server) ctlQRList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.QRSessions())
}

func (s *Server) ctlQRAct(w http.ResponseWriter, r *http.Request) {
	var a QRAction
	if !s.ctlDecode(w, r, &a, s.cfg.MaxBodyBytes) {
		return
	}
	info, err := s.QRAct(r.PathValue("action"), a, s.baseURL(r))
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, info)
}

// Faults lists the armed faults (GET /_sim/faults).
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Fault{}
	for _, f := range s.faults {
		out = append(out, *f)
	}
	return out
}

// ClearFaults disarms every fault (DELETE /_sim/faults).
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) ctlFaults(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Faults()) }

func (s *Server) ctlAddFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if !s.ctlDecode(w, r, &f, s.cfg.MaxBodyBytes) {
		return
	}
	armed, err := s.AddFault(f)
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, armed)
}

func (s *Server) ctlClearFaults(w http.ResponseWriter, _ *http.Request) {
	s.ClearFaults()
	w.WriteHeader(http.StatusNoContent)
}

// Requests returns the request log, oldest first (GET /_sim/requests).
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RecordedRequest{}, s.requests...)
}

// ClearRequests empties the request log (DELETE /_sim/requests).
func (s *Server) ClearRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *Server) ctlRequests(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Requests()) }

func (s *Server) ctlClearRequests(w http.ResponseWriter, _ *http.Request) {
	s.ClearRequests()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) ctlExpireCDN(w http.ResponseWriter, r *http.Request) {
	if !s.ExpireCDNObject(r.URL.Query().Get("encrypted_query_param")) {
		ctlError(w, http.StatusNotFound, "no such CDN object")
		return
	}
	writeJSON(w, map[string]bool{"expired": true})
}

func (s *Server) ctlCDN(w http.ResponseWriter, r *http.Request) {
	obj, err := s.CDNObject(r.URL.Query().Get("encrypted_query_param"))
	if err != nil {
		ctlErr(w, err)
		return
	}
	writeJSON(w, obj)
}
