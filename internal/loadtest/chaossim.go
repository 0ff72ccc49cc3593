package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pollSpan is one getupdates call of a bot at the simulator: from its arrival until it
// was answered or its client went away (end zero: still in flight), and the worker
// process that sent it (0: not known).
type pollSpan struct {
	start, end time.Time
	pid        int
	stray      bool // a thawed worker's poll of a bot whose lease it did not hold
}

// pageOut is a getupdates answer that carried messages: when it was about to be written,
// to which bot and process, and the context tokens of its messages.
type pageOut struct {
	at     time.Time
	bot    int
	pid    int
	tokens []string
}

// strayPoll is a getupdates a thawed worker sent for a bot whose lease another process
// (or none) held at that moment.
type strayPoll struct {
	at        time.Time
	bot       int
	pid       int
	holderPID int
}

// simWatch wraps the simulator's handler: it records every getupdates per bot (when it
// arrived, when it ended, which process sent it) and every answer that carried
// messages, and lets the page-leaves kill act on such an answer before it is written.
type simWatch struct {
	next http.Handler
	c    *chaosRun
	pids *pidResolver

	mu       sync.Mutex
	spans    [][]pollSpan // by bot index
	inflight []int
	pages    []pageOut
	thawed   map[int]bool // pids whose getupdates are checked against the lease holder
	strays   []strayPoll
	changed  chan struct{}
}

func newSimWatch(c *chaosRun, next http.Handler, bots int) *simWatch {
	return &simWatch{next: next, c: c, spans: make([][]pollSpan, bots), inflight: make([]int, bots),
		thawed: map[int]bool{}, changed: make(chan struct{}, 1)}
}

// notify wakes a waiter of the watch (a getupdates arrived or a process exited).
func (w *simWatch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *simWatch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ilink/bot/getupdates" {
		w.next.ServeHTTP(rw, r)
		return
	}
	bot, ok := w.c.botByToken[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		w.next.ServeHTTP(rw, r)
		return
	}
	pid := w.pids.pidOf(r.RemoteAddr)
	now := time.Now()
	w.mu.Lock()
	check := pid != 0 && w.thawed[pid]
	w.mu.Unlock()
	stray := check && w.stray(r.Context(), bot, pid, now)
	w.mu.Lock()
	idx := len(w.spans[bot])
	w.spans[bot] = append(w.spans[bot], pollSpan{start: now, pid: pid, stray: stray})
	w.inflight[bot]++
	w.mu.Unlock()
	w.notify()

	var once sync.Once
	end := func() {
		once.Do(func() {
			w.mu.Lock()
			w.spans[bot][idx].end = time.Now()
			w.inflight[bot]--
			w.mu.Unlock()
		})
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-r.Context().Done(): // the worker went away
			end()
		case <-done:
		}
	}()
	w.next.ServeHTTP(&pageWriter{ResponseWriter: rw, w: w, bot: bot, pid: pid, ctx: r.Context()}, r)
	end()
	close(done)
}

// stray tells whether a thawed worker's getupdates of bot (arrived at at) is for a bot
// whose lease it does not hold, and records it.
func (w *simWatch) stray(ctx context.Context, bot, pid int, at time.Time) bool {
	holder, err := w.c.holderPID(ctx, w.c.bots[bot].accountKey)
	if err != nil || holder == pid {
		return false
	}
	w.mu.Lock()
	w.strays = append(w.strays, strayPoll{at: at, bot: bot, pid: pid, holderPID: holder})
	w.mu.Unlock()
	return true
}

// watchThawed checks every later getupdates of pid against the lease holder.
func (w *simWatch) watchThawed(pid int) {
	w.mu.Lock()
	w.thawed[pid] = true
	w.mu.Unlock()
}

// pageWriter sees the simulator's answer to a getupdates before it is written.
type pageWriter struct {
	http.ResponseWriter
	w    *simWatch
	bot  int
	pid  int
	ctx  context.Context
	seen bool
}

func (pw *pageWriter) Write(b []byte) (int, error) {
	if !pw.seen {
		pw.seen = true
		if tokens := pageTokens(b); len(tokens) > 0 {
			pw.w.pageLeaving(pw.ctx, pw.bot, pw.pid, tokens)
		}
	}
	return pw.ResponseWriter.Write(b)
}

// pageTokens returns the context tokens of the messages of a getupdates answer (none when
// it carries none or is not one).
func pageTokens(body []byte) []string {
	var page struct {
		Msgs []struct {
			ContextToken string `json:"context_token"`
		} `json:"msgs"`
	}
	if json.Unmarshal(body, &page) != nil {
		return nil
	}
	var out []string
	for _, m := range page.Msgs {
		if m.ContextToken != "" {
			out = append(out, m.ContextToken)
		}
	}
	return out
}

// pageLeaving records an answer with messages about to be written, then lets an armed
// page-leaves kill act on it (before it is written).
func (w *simWatch) pageLeaving(ctx context.Context, bot, pid int, tokens []string) {
	at := time.Now()
	if pid == 0 { // not known from the connection: the lease holder is the poller
		pid, _ = w.c.holderPID(ctx, w.c.bots[bot].accountKey)
	}
	w.mu.Lock()
	w.pages = append(w.pages, pageOut{at: at, bot: bot, pid: pid, tokens: tokens})
	w.mu.Unlock()
	w.c.onPageLeaving(ctx, bot)
}

// inFlightAt reports whether bot had a getupdates in flight at t from a known process
// other than pid.
func (w *simWatch) inFlightAt(bot int, t time.Time, pid int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.spans[bot] {
		if s.pid != 0 && s.pid != pid && !s.start.After(t) && (s.end.IsZero() || s.end.After(t)) {
			return true
		}
	}
	return false
}

// nextArrival is the first getupdates of bot that arrived after t (false: none yet).
func (w *simWatch) nextArrival(bot int, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.spans[bot] {
		if s.start.After(t) && !s.stray {
			return s.start, true
		}
	}
	return time.Time{}, false
}

// repolledAfter is the time from t until bot was polled again, the process pid (killed or
// frozen at t) put aside: 0 when another known process had a getupdates of the bot in
// flight at t, else until the bot's next getupdates arrived (from any process: a killed
// one sends none, a frozen one none until it is thawed, and then its polls of a bot whose
// lease it no longer holds do not count; false: none yet).
func (w *simWatch) repolledAfter(bot int, t time.Time, pid int) (time.Duration, bool) {
	if w.inFlightAt(bot, t, pid) {
		return 0, true
	}
	next, ok := w.nextArrival(bot, t)
	if !ok {
		return 0, false
	}
	return next.Sub(t), true
}

// polledNow counts the bots with a getupdates in flight.
func (w *simWatch) polledNow() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, k := range w.inflight {
		if k > 0 {
			n++
		}
	}
	return n
}

// longestGap is the longest time within [from, to] that bot had no getupdates in flight,
// a gap that began before from counted from its start.
func (w *simWatch) longestGap(bot int, from, to time.Time) time.Duration {
	w.mu.Lock()
	spans := append([]pollSpan(nil), w.spans[bot]...)
	w.mu.Unlock()
	return longestGap(spans, from, to)
}

// longestGap is the longest time without a span in flight among the gaps that end within
// (from, to] (one still open at to ends at to), each counted from its beginning, also when
// that is before from. The time before the first span is no gap; a bot with no span by to
// counts the whole window. Spans are in the order of their starts (end zero: open).
func longestGap(spans []pollSpan, from, to time.Time) time.Duration {
	type iv struct{ s, e time.Time }
	var ivs []iv
	for _, s := range spans {
		e := s.end
		if e.IsZero() || e.After(to) {
			e = to
		}
		if s.start.After(to) {
			continue
		}
		ivs = append(ivs, iv{s.start, e})
	}
	if len(ivs) == 0 {
		return to.Sub(from)
	}
	// Spans arrive in start order; merge them.
	var worst time.Duration
	covered := ivs[0].e
	for _, v := range ivs[1:] {
		if v.s.After(covered) { // a gap from covered to v.s
			if v.s.After(from) {
				worst = max(worst, v.s.Sub(covered))
			}
		}
		if v.e.After(covered) {
			covered = v.e
		}
	}
	if covered.Before(to) { // idle at the end
		worst = max(worst, to.Sub(covered))
	}
	return worst
}

// pidResolver tells which worker process a connection to the simulator comes from: the
// client's socket is found by its port in /proc/net/tcp, and its inode among the worker
// processes' file descriptors. Resolved once per connection (on its first getupdates)
// and forgotten when it closes.
type pidResolver struct {
	simPort int
	pids    func() []int // the worker processes that may hold connections

	mu    sync.Mutex
	live  map[string]bool // remote addresses of the open connections
	cache map[string]int  // remote address -> pid
}

func newPIDResolver(pids func() []int) *pidResolver {
	return &pidResolver{pids: pids, live: map[string]bool{}, cache: map[string]int{}}
}

// connState tracks the open connections (http.Server.ConnState).
func (p *pidResolver) connState(c net.Conn, s http.ConnState) {
	addr := c.RemoteAddr().String()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.live[addr] = true
	case http.StateClosed, http.StateHijacked:
		delete(p.live, addr)
		delete(p.cache, addr)
	}
}

// pidOf returns the pid of the worker process on the other end of the connection from
// remote (0: not found).
func (p *pidResolver) pidOf(remote string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid, ok := p.cache[remote]; ok {
		return pid
	}
	byPort, err := clientSockets(p.simPort)
	if err != nil {
		return 0
	}
	inodes := map[uint64]int{}
	for _, pid := range p.pids() {
		for _, ino := range socketInodes(pid) {
			inodes[ino] = pid
		}
	}
	// Every open connection not resolved yet is resolved from this one reading (a port is
	// unique among open sockets).
	for addr := range p.live {
		if _, ok := p.cache[addr]; ok {
			continue
		}
		if port := addrPort(addr); port > 0 {
			if pid := inodes[byPort[port]]; pid != 0 && byPort[port] != 0 {
				p.cache[addr] = pid
			}
		}
	}
	return p.cache[remote]
}

func addrPort(addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// clientSockets reads /proc/net/tcp and tcp6: the inode of each socket connected to
// serverPort, by its local port.
func clientSockets(serverPort int) (map[int]uint64, error) {
	out := map[int]uint64{}
	found := false
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		found = true
		parseProcNetTCP(bufio.NewScanner(f), serverPort, out)
		f.Close()
	}
	if !found {
		return nil, fmt.Errorf("no /proc/net/tcp")
	}
	return out, nil
}

// parseProcNetTCP adds the sockets whose remote port is serverPort to out (local port ->
// inode).
func parseProcNetTCP(sc *bufio.Scanner, serverPort int, out map[int]uint64) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] == "sl" {
			continue
		}
		lport := hexPort(f[1])
		rport := hexPort(f[2])
		if rport != serverPort || lport <= 0 {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		out[lport] = ino
	}
}

// hexPort reads the port of a /proc/net/tcp address ("0100007F:1F90").
func hexPort(a string) int {
	_, p, ok := strings.Cut(a, ":")
	if !ok {
		return -1
	}
	n, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// socketInodes lists the inodes of the sockets among a process's file descriptors.
func socketInodes(pid int) []uint64 {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
				out = append(out, ino)
			}
		}
	}
	return out
}

// unpolledFor is how long bot has had no getupdates in flight at now, counted from
// since at the earliest (0: one is in flight).
func (w *simWatch) unpolledFor(bot int, since, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := since
	for _, s := range w.spans[bot] {
		if s.stray {
			continue
		}
		if s.end.IsZero() {
			return 0
		}
		if s.end.After(last) {
			last = s.end
		}
	}
	return now.Sub(last)
}
