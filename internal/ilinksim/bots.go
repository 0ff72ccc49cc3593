package ilinksim

import (
	"net/http"
	"slices"
	"sort"
	"time"
)

// bot is one bot account's state. All fields are guarded by Server.mu.
type bot struct {
	info          BotInfo
	nonce         []byte
	queue         []*queued // not handed out yet, in order
	delivered     []*queued // handed out (kept for the empty-cursor replay)
	offset        uint64    // messages handed out so far
	seq           uint64
	peers         map[string]*peer
	attempts      []time.Time // send attempt times (sim) for the burst detector
	penaltyUntil  time.Time   // sim; zero = none
	wake          chan struct{}
	pollers       int         // getupdates calls currently held
	outstanding   []*heldPoll // getupdates calls received and not answered (their client not gone)
	overlaps      int         // getupdates that arrived while another was outstanding
	overlapsAt    []time.Time
	online        bool
	notifyStarted bool
	inbox         map[uint64]*wireMessage // by message_id, for duplicates
	clientIDs     map[string]int          // client_id -> message_state of its first accepted use
	connSends     map[string]int          // accepted sends per remote address (RequireNotifyStart)
}

type queued struct {
	msg       *wireMessage
	visibleAt time.Time // sim
}

type peer struct {
	state  PeerState
	tokens map[string]bool
}

func (b *bot) wakeLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

func (b *bot) peerLocked(user string) *peer {
	p := b.peers[user]
	if p == nil {
		p = &peer{state: PeerState{UserID: user, SessionID: randHex(16)}, tokens: map[string]bool{}}
		b.peers[user] = p
	}
	return p
}

// createBotLocked makes a new live bot for owner ("" = new user). With
// killPrevious, the owner's other live bots die (-14).
func (s *Server) createBotLocked(owner, baseURL string, killPrevious bool) *bot {
	if owner == "" {
		owner = newUserID()
	}
	if killPrevious {
		for _, o := range s.botOrder {
			if o.info.Owner == owner && !o.info.Dead {
				s.killLocked(o)
			}
		}
	}
	id := newBotID()
	for s.bots[id] != nil {
		id = newBotID()
	}
	b := &bot{
		info:      BotInfo{BotID: id, Token: newBotToken(id), Owner: owner, BaseURL: baseURL},
		nonce:     randBytes(8),
		peers:     map[string]*peer{},
		wake:      make(chan struct{}),
		inbox:     map[uint64]*wireMessage{},
		clientIDs: map[string]int{},
		connSends: map[string]int{},
	}
	s.bots[id] = b
	s.botOrder = append(s.botOrder, b)
	s.tokens[b.info.Token] = b
	return b
}

func (s *Server) killLocked(b *bot) {
	b.info.Dead = true
	b.online = false
	b.wakeLocked()
}

func (s *Server) botStateLocked(b *bot) BotState {
	st := BotState{
		BotInfo:       b.info,
		Online:        b.online,
		NotifyStarted: b.notifyStarted,
		Queued:        len(b.queue),
		Pollers:       b.pollers,
		Outstanding:   len(b.outstanding),
		Overlaps:      b.overlaps,
		OverlapsAt:    slices.Clone(b.overlapsAt),
		Peers:         []PeerState{},
	}
	if b.penaltyUntil.After(s.nowLocked()) {
		st.PenaltyUntil = b.penaltyUntil
	}
	for _, p := range b.peers {
		st.Peers = append(st.Peers, p.state)
	}
	sort.Slice(st.Peers, func(i, j int) bool { return st.Peers[i].UserID < st.Peers[j].UserID })
	return st
}

// nextMessageIDLocked issues the next server message id (wrapping back to
// just above 2^53 instead of overflowing).
func (s *Server) nextMessageIDLocked() uint64 {
	id := s.nextMsgID
	if id == ^uint64(0) {
		s.nextMsgID = 1<<53 + 1
	} else {
		s.nextMsgID++
	}
	return id
}

func (s *Server) handleNotifyStart(c *call) { s.notify(c, true) }
func (s *Server) handleNotifyStop(c *call)  { s.notify(c, false) }

func (s *Server) notify(c *call, start bool) {
	if c.r.Method != http.MethodPost {
		http.Error(c.w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	b, err := s.authBotLocked(c.r)
	if err != nil {
		s.mu.Unlock()
		writeJSON(c.w, s.staleBody())
		return
	}
	b.online = start
	if start {
		b.notifyStarted = true
	}
	s.mu.Unlock()
	writeJSON(c.w, map[string]any{"ret": 0, "errmsg": ""})
}
