package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/loadtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Shape of the crash run. The stream of 1,000 messages lasts about 75 seconds; the
// killer kills at random moments while it runs (and until crashMinKills kills happened),
// restarting the worker each time with the same configuration. Two faults come at their
// own moments, when no kill is under way: a PostgreSQL outage of crashOutage (the
// worker's connections go through a proxy the test cuts) once crashOutageAt messages were
// injected, and a restart of the Temporal dev server (down for crashTemporalDown, then up
// on the same address with its state) once crashTemporalAt were.
const (
	crashMessages      = 1000
	crashMinKills      = 5
	crashMaxBatch      = 4
	crashGapMin        = 50 * time.Millisecond // between batches: crashGapMin + [0, crashGapRand)
	crashGapRand       = 250 * time.Millisecond
	crashOutage        = 20 * time.Second
	crashOutageAt      = 300
	crashTemporalDown  = 5 * time.Second
	crashTemporalAt    = 650
	crashRecoverWithin = 2 * time.Minute
	crashQuietWithin   = 3 * time.Minute
	crashReadyWithin   = time.Minute
	crashCallTimeout   = 10 * time.Second
	crashWindowLife    = time.Hour
	crashSeedEnv       = "ILINKFLOW_CRASH_SEED"
	crashLogsEnv       = "ILINKFLOW_CRASH_LOGS" // set: print the workers' stderr even when the test passes
	crashReadyLogLine  = "msg=reconciled"
)

// crashRands are the random sources of a crash test's stream and kills, from a seed that
// is logged (and taken from ILINKFLOW_CRASH_SEED when set) so that a run can be repeated.
func crashRands(t *testing.T) (stream, kill *mrand.Rand) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(crashSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, v, err)
		}
		seed = n
	}
	t.Logf("random seed %d (rerun with %s=%d)", seed, crashSeedEnv, seed)
	return mrand.New(mrand.NewPCG(seed, 1)), mrand.New(mrand.NewPCG(seed, 2))
}

// TestCrashKilledWorkerLosesNothingAndNeverDoubleSends: a real worker process (the worker command, with the echo
// hand-off) is SIGKILLed at random moments while a stream of 1,000 user messages arrives
// and an agent replies, and restarted each time; meanwhile PostgreSQL is cut off from
// the worker for 20 s and the Temporal dev server is restarted. At the end every message
// the simulator handed out is in the inbox exactly once, no client message id reached the
// simulator twice, no window exceeded its quota, no attempt is left pending or sending,
// and no message is handled without an accepted send (no false `handled`).
//
// Kills come after a random uptime or, for two in three, a random few milliseconds after
// the next page hand-out or sendmessage the simulator sees: before, during or after a
// page commit, and between a transmission and the record of its outcome.
//
// One allowance, and only one: iLink consumes messages when it hands them out and never
// replays them (ilink-protocol.md §4.1), so the messages of the last getupdates response
// a killed process received cannot be in the inbox if the kill came before that page's
// commit. The simulator tap below knows which response was the last one of each process
// (a poller fetches again only after it committed), so such messages are told apart from
// a loss by the gateway and logged; any other missing message fails the test, and so does
// a page of which only some messages were committed.
func TestCrashKilledWorkerLosesNothingAndNeverDoubleSends(t *testing.T) {
	t.Parallel()
	began := time.Now()
	streamRand, killRand := crashRands(t)

	// Real parts: the worker binary, the shared dev server (own namespace and task queue),
	// a fresh schema, the simulator in this process behind a tap that records getupdates
	// responses, and a bot registered directly.
	limits := store.DefaultLimits()
	limits.WindowLifetime = crashWindowLife
	rig := newProcRigWith(t, 500*time.Millisecond, limits, procRigOptions{Restartable: true, DBProxy: true})
	s, pool, st, ctl, tap, bot, acct, bin := rig.system, rig.pool, rig.store, rig.ctl, rig.tap, rig.bot, rig.acct, rig.bin
	tc := s.tc

	w := &crashWorker{t: t, bin: bin, tap: tap, env: rig.baseEnv(map[string]string{
		"ILINKFLOW_SEND_GAP":         "5ms",
		"ILINKFLOW_POLL_SESSION":     "3s",
		"ILINKFLOW_HEARTBEAT":        "1s",
		"ILINKFLOW_WINDOW_LIFETIME":  crashWindowLife.String(),
		"ILINKFLOW_MAX_SENDS":        strconv.Itoa(int(limits.MaxSends)),
		"ILINKFLOW_SHUTDOWN_GRACE":   "2s",
		"ILINKFLOW_LOG_LEVEL":        "info",
		"ILINKFLOW_THROTTLE_PENALTY": "1m",
		// The echo agent answers from the hand-off and marks the message handled: the
		// path on which a refused reply could leave a message falsely handled.
		"ILINKFLOW_HANDLER": "echo",
		// A short poll lease: a killed worker's bot is resumed within seconds.
		"ILINKFLOW_POLL_LEASE_TTL": "6s",
	})}
	w.launch()
	s.eventually("the account's poller running", 30*time.Second, func() (bool, error) {
		return s.running(s.pollerWF(acct.AccountKey)), nil
	})
	ready := time.Now()

	// The agent replies once to every window that gets an agent session.
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agent := &crashAgent{tc: tc, st: st, inst: s.installation(), account: acct.AccountKey, seen: map[int64]bool{},
		done: map[int64]string{}, lastErr: map[int64]string{}}
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); agent.run(agentCtx) }()
	defer func() { stopAgent(); <-agentDone }()

	// The stream and the killer run together.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	injected := make(chan []ilinksim.Injected, 1)
	streamErr := make(chan error, 1)
	streamOver := make(chan struct{})
	var count atomic.Int64
	go func() {
		defer close(streamOver)
		msgs, err := crashStream(streamCtx, ctl, bot.BotID, streamRand, &count)
		injected <- msgs
		streamErr <- err
	}()
	killErr := make(chan error, 1)
	go func() { killErr <- w.killLoop(streamCtx, killRand, streamOver) }()
	var faults crashFaults
	faultErr := make(chan error, 1)
	go func() { faultErr <- w.faultLoop(streamCtx, rig, &count, &faults) }()

	for pending := 2; pending > 0; pending-- {
		var err error
		what := "killer"
		select {
		case err = <-killErr:
		case err = <-faultErr:
			what = "faults"
		}
		if err != nil {
			stopStream()
			<-streamOver
			t.Fatalf("%s: %v", what, err)
		}
	}
	msgs := <-injected
	if err := <-streamErr; err != nil {
		t.Fatalf("stream: %v (after %d messages)", err, len(msgs))
	}
	streamed := time.Now()
	kills := w.killCount()
	t.Logf("stream over: %d messages injected, %d kills, worker process #%d running", len(msgs), kills, w.current().index)

	// Wait until the system is quiet: everything handed out and committed, every send
	// finished, the agent idle with the open window answered.
	var quiet crashQuiet
	s.eventually("a quiet system after the last restart", crashQuietWithin, func() (bool, error) {
		if p := w.current(); p.hasExited() {
			t.Fatalf("worker process #%d (pid %d) exited by itself: %v", p.index, p.pid, p.exitErr)
		}
		var err error
		quiet, err = crashCheckQuiet(s.ctx, ctl, pool, st, tap, agent, bot.BotID, acct.AccountKey)
		return err == nil, err
	})
	quieted := time.Now()
	stopAgent()
	<-agentDone

	// The assertions, on the final state.
	sent, err := ctl.Sent(s.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	inbox := crashInbox(t, pool)
	windows := crashWindows(t, pool)
	attempts := crashAttempts(t, pool)
	excused, lost := crashAssertInbox(t, msgs, inbox, tap, w.killedEpochs())
	doubles := crashAssertClientIDs(t, sent, attempts)
	crashAssertQuota(t, windows, attempts, sent, ilinksim.DefaultConfig().ReplyQuota)
	crashAssertNothingInFlight(t, attempts)
	handled, falseHandled := crashAssertHandled(t, pool, sent)

	// The numbers.
	byStatus := func(rows map[string]string) map[string]int {
		out := map[string]int{}
		for _, v := range rows {
			out[v]++
		}
		return out
	}
	windowStates, attemptStatus := map[string]int{}, map[string]int{}
	for _, win := range windows {
		windowStates[win.state]++
	}
	unknown := 0
	for _, a := range attempts {
		attemptStatus[a.status]++
		if a.status == vocab.AttemptUnknown {
			unknown++
		}
	}
	accepted := 0
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeAccepted {
			accepted++
		}
	}
	t.Logf("messages: %d injected, %d in the inbox %v, %d lost in flight at a kill (consumed by iLink, never received)",
		len(msgs), len(inbox), byStatus(inbox), len(excused))
	t.Logf("windows: %d %v; the agent answered %d windows %v", len(windows), windowStates, len(agent.outcomes()), agent.summary())
	t.Logf("replies: %d attempts %v, %d sent; simulator got %d sendmessage calls (%d accepted); %d unknown attempts",
		len(attempts), attemptStatus, attemptStatus[vocab.AttemptSent], len(sent), accepted, unknown)
	t.Logf("kills: %d SIGKILLs, %d worker processes; getupdates: %d requests, %d non-empty pages; quiet: %v", kills, w.processes(),
		tap.requests(), tap.nonEmptyPages(), quiet)
	t.Logf("faults: %s", faults.String())
	t.Logf("timings: build+setup %v, stream %v, quiet after %v, total %v", ready.Sub(began).Round(time.Millisecond),
		streamed.Sub(ready).Round(time.Millisecond), quieted.Sub(streamed).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("COUNTS: %d messages, %d kills, in-flight allowance used %d, %d lost, %d doubles, %d handled of which %d false; "+
		"PostgreSQL outage %v (cut at a page of %d messages, %d connections refused, %d more messages handed out during it, recovered %v after), Temporal restart down %v (recovered %v after); total %v",
		len(msgs), kills, len(excused), lost, doubles, handled, falseHandled, faults.outage.Round(time.Millisecond), faults.cutPage, faults.refusals, faults.heldMsgs,
		faults.outageRecovery.Round(time.Millisecond), faults.temporalDown.Round(time.Millisecond),
		faults.temporalRecovery.Round(time.Millisecond), time.Since(began).Round(time.Second))
}

// crashDatabaseURL adds search_path=schema to a PostgreSQL URL or DSN.
func crashDatabaseURL(base, schema string) (string, error) {
	if !strings.Contains(base, "://") {
		return base + " search_path=" + schema, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("database URL does not parse: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// crashEnv is the test's environment without any worker setting, plus the given ones.
func crashEnv(set map[string]string) []string { return loadtest.WorkerEnviron(set) }

// crashStream injects crashMessages user messages, a few at a time with random gaps,
// counting them in count.
func crashStream(ctx context.Context, ctl *ilinksim.Control, botID string, r *mrand.Rand, count *atomic.Int64) ([]ilinksim.Injected, error) {
	var out []ilinksim.Injected
	for len(out) < crashMessages {
		n := min(1+r.IntN(crashMaxBatch), crashMessages-len(out))
		for range n {
			in, err := ctl.InjectText(ctx, botID, "", fmt.Sprintf("crash message %d", len(out)+1))
			if err != nil {
				return out, err
			}
			out = append(out, in)
			count.Add(1)
		}
		if err := crashPause(ctx, crashGapMin+crashRandDur(r, crashGapRand)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// crashRandDur is a random duration in [0, d).
func crashRandDur(r *mrand.Rand, d time.Duration) time.Duration {
	return time.Duration(r.Int64N(int64(d)))
}

// crashPause waits d or until ctx is done (a pacing pause, never a wait for a condition).
func crashPause(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---------------------------------------------------------------------------------------
// The simulator tap: which getupdates response went to which worker process.

// crashPage is one getupdates response: the request's arrival number, the worker
// process (epoch) that was running when it arrived, and the message ids it handed out.
type crashPage struct {
	seq, epoch int
	ids        []uint64
	at         time.Time // the request's arrival
}

type crashTap struct {
	next http.Handler

	mu           sync.Mutex
	epoch        int               // the worker process now running (1, 2, ...)
	seq          int               // getupdates requests arrived
	lastNonEmpty int               // seq of the latest request answered with messages
	pages        []crashPage       // non-empty responses
	last         map[int]crashPage // per epoch, the response to its latest request
	armed        string            // the kill trigger armed, if any
	trigger      chan struct{}     // closed when the armed trigger fires
	faultPage    chan crashPage    // the fault trigger: gets the next non-empty page, if armed
	inflight     map[int]time.Time // getupdates requests not answered yet, by seq, with arrival
	lastArrival  time.Time         // of the latest getupdates request
	uploads      int               // CDN uploads answered
}

func (c *crashTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ilink/bot/sendmessage":
		c.fire(crashOnSend) // the request is in: the simulator handles it whatever happens next
		c.next.ServeHTTP(w, r)
		return
	case "/c2c/upload":
		c.next.ServeHTTP(w, r)
		c.mu.Lock()
		c.uploads++
		c.mu.Unlock()
		c.fire(crashOnUpload) // answered: the worker is about to record the upload and send
		return
	case "/ilink/bot/getupdates":
	default:
		c.next.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.seq++
	c.lastArrival = time.Now()
	page := crashPage{seq: c.seq, epoch: c.epoch, at: c.lastArrival}
	if c.inflight == nil {
		c.inflight = map[int]time.Time{}
	}
	c.inflight[page.seq] = time.Now()
	c.mu.Unlock()
	rec := &crashBody{ResponseWriter: w}
	c.next.ServeHTTP(rec, r)
	page.ids = pageMessageIDs(rec.buf.Bytes())
	c.mu.Lock()
	delete(c.inflight, page.seq)
	if prev, ok := c.last[page.epoch]; !ok || page.seq > prev.seq {
		c.last[page.epoch] = page
	}
	if len(page.ids) > 0 {
		c.pages = append(c.pages, page)
		c.lastNonEmpty = max(c.lastNonEmpty, page.seq)
		if c.faultPage != nil {
			c.faultPage <- page // before the response leaves this handler
			c.faultPage = nil
		}
	}
	c.mu.Unlock()
	if len(page.ids) > 0 {
		c.fire(crashOnPage) // handed out: the worker is about to commit it
	}
}

// Kill triggers: the killer may wait for one of these moments instead of a plain timer.
const (
	crashOnTimer  = "timer"
	crashOnPage   = "page"        // a getupdates response with messages was handed out
	crashOnSend   = "sendmessage" // a sendmessage request reached the simulator
	crashOnUpload = "upload"      // a CDN upload was answered
)

// arm returns a channel closed at the next event of the given kind.
func (c *crashTap) arm(kind string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.trigger = kind, make(chan struct{})
	return c.trigger
}

// armFault returns a channel that gets the next non-empty page, before its response
// reaches the worker (the fault then hits that page's commit).
func (c *crashTap) armFault() <-chan crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faultPage = make(chan crashPage, 1)
	return c.faultPage
}

func (c *crashTap) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.trigger = "", nil
}

func (c *crashTap) fire(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == kind {
		close(c.trigger)
		c.armed, c.trigger = "", nil
	}
}

func (c *crashTap) setEpoch(e int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = e
}

// caughtUp reports whether a getupdates request arrived after the latest one that was
// answered with messages (a poller fetches again only after it committed the page), and
// no request still being answered may carry messages. The simulator answers at once
// when it has messages, so a request held longer than crashHeldEmpty is an empty
// long-poll hold; a younger one may be handing out a page not yet recorded here.
func (c *crashTap) caughtUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, since := range c.inflight {
		if time.Since(since) < crashHeldEmpty {
			return false
		}
	}
	return c.seq > c.lastNonEmpty
}

// crashHeldEmpty is how long an unanswered getupdates must be held before the tap takes
// it for an empty long poll (the simulator's hold in this test is 500 ms).
const crashHeldEmpty = 300 * time.Millisecond

// handedOut maps each message id to the responses that carried it.
func (c *crashTap) handedOut() map[uint64][]crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64][]crashPage{}
	for _, p := range c.pages {
		for _, id := range p.ids {
			out[id] = append(out[id], p)
		}
	}
	return out
}

// lastPageOf is the response to the latest getupdates request of a worker process.
func (c *crashTap) lastPageOf(epoch int) (crashPage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.last[epoch]
	return p, ok
}

// allPages are the responses that handed out messages.
func (c *crashTap) allPages() []crashPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]crashPage(nil), c.pages...)
}

// pagesBetween counts the non-empty responses to requests that arrived between from and
// to, and their messages.
func (c *crashTap) pagesBetween(from, to time.Time) (pages, msgs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pages {
		if !p.at.Before(from) && p.at.Before(to) {
			pages++
			msgs += len(p.ids)
		}
	}
	return pages, msgs
}

// fetchedSince reports whether a getupdates request arrived after t.
func (c *crashTap) fetchedSince(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastArrival.After(t)
}

func (c *crashTap) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// uploadCount is the number of CDN uploads the simulator answered.
func (c *crashTap) uploadCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uploads
}

func (c *crashTap) nonEmptyPages() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pages)
}

// crashBody copies a response body while it is written.
type crashBody struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (b *crashBody) Write(p []byte) (int, error) {
	b.buf.Write(p)
	return b.ResponseWriter.Write(p)
}

// ---------------------------------------------------------------------------------------
// The worker processes.

// crashProc is one worker process.
type crashProc struct {
	index, pid int
	cmd        *exec.Cmd
	log        *crashLog
	exited     chan struct{} // closed when the process is gone
	exitErr    error         // set before exited closes
	killed     bool          // SIGKILLed by the test
}

func (p *crashProc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// crashLog keeps a process's stderr and notices the line that says it is ready.
type crashLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	ready   chan struct{}
	isReady bool
}

func (l *crashLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.isReady {
		l.partial = append(l.partial, p...)
		if bytes.Contains(l.partial, []byte(crashReadyLogLine)) {
			l.isReady = true
			close(l.ready)
			l.partial = nil
		} else if i := bytes.LastIndexByte(l.partial, '\n'); i >= 0 {
			l.partial = append([]byte(nil), l.partial[i+1:]...)
		}
	}
	return len(p), nil
}

func (l *crashLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type crashWorker struct {
	t   *testing.T
	bin string
	env []string
	tap *crashTap

	mu    sync.Mutex
	procs []*crashProc
	kills int

	// faults is held by a kill and its restart, and by a fault (outage, Temporal restart)
	// until the worker recovered from it, so that each comes at a moment of its own.
	faults sync.Mutex
}

// start runs a new worker process with the same configuration and waits until it has
// reconciled (its ready point).
func (w *crashWorker) start() error {
	w.mu.Lock()
	p := &crashProc{index: len(w.procs) + 1, log: &crashLog{ready: make(chan struct{})}, exited: make(chan struct{})}
	p.cmd = exec.Command(w.bin)
	p.cmd.Env = w.env
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	w.tap.setEpoch(p.index)
	if err := p.cmd.Start(); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("start worker process #%d: %w", p.index, err)
	}
	p.pid = p.cmd.Process.Pid
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()

	tm := time.NewTimer(crashReadyWithin)
	defer tm.Stop()
	select {
	case <-p.log.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("worker process #%d (pid %d) exited before it was ready: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	case <-tm.C:
		return fmt.Errorf("worker process #%d (pid %d) not ready within %v", p.index, p.pid, crashReadyWithin)
	}
}

func (w *crashWorker) current() *crashProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.procs[len(w.procs)-1]
}

// kill SIGKILLs the running process and waits until it is gone.
func (w *crashWorker) kill() error {
	p := w.current()
	if p.hasExited() {
		return fmt.Errorf("worker process #%d (pid %d) exited by itself before the kill: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	}
	w.mu.Lock()
	p.killed = true
	w.kills++
	w.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL worker process #%d: %w", p.index, err)
	}
	<-p.exited
	return nil
}

// killLoop kills the worker at random moments and restarts it each time, until the
// stream is over and at least crashMinKills kills happened. A kill comes after a random
// uptime, or, for two kills in three, earlier: a few milliseconds (random) after the next
// page hand-out or sendmessage, where a crash hurts most (before a commit, between a
// transmission and its outcome).
func (w *crashWorker) killLoop(ctx context.Context, r *mrand.Rand, streamOver <-chan struct{}) error {
	for {
		over := false
		select {
		case <-streamOver:
			over = true
		default:
		}
		if over && w.killCount() >= crashMinKills {
			return nil
		}
		// Uptimes both shorter and longer than the poll activity's heartbeat timeout
		// (20s): a kill often lands before the killed poll was even retried.
		const minUp = 1500 * time.Millisecond
		up := minUp + crashRandDur(r, 20*time.Second)
		if over {
			up = minUp + crashRandDur(r, 3500*time.Millisecond)
		}
		// A triggered kill waits longer for its moment: after a kill nothing is fetched
		// (so nothing is sent) until the killed poll's heartbeat times out.
		kind := []string{crashOnTimer, crashOnPage, crashOnSend}[r.IntN(3)]
		if over {
			kind = crashOnTimer // no more messages: no page or send may come
		}
		var offset time.Duration
		switch kind {
		case crashOnPage:
			// Before, during or just after the page's commit (about 1ms a message).
			offset, up = crashRandDur(r, 150*time.Millisecond), up+10*time.Second
		case crashOnSend:
			offset, up = crashRandDur(r, 3*time.Millisecond), up+10*time.Second
		}
		started := time.Now()
		if err := crashPause(ctx, minUp); err != nil {
			return err
		}
		// Once the stream is over and enough kills happened, the last restart stands.
		var enough <-chan struct{}
		if w.killCount() >= crashMinKills {
			enough = streamOver
		}
		moment, err := w.awaitKillMoment(ctx, kind, up-minUp, offset, enough)
		if err != nil || moment == momentStopped {
			return err
		}
		how := fmt.Sprintf("after %v up", up.Round(time.Millisecond))
		if moment == momentTriggered {
			how = fmt.Sprintf("%v after a %s, %v up", offset, kind, time.Since(started).Round(time.Millisecond))
		}
		if !w.faults.TryLock() {
			w.t.Logf("kill skipped (%s): a fault is under way", how)
			continue
		}
		if err := w.killAndRestart(ctx, r, how); err != nil {
			w.faults.Unlock()
			return err
		}
		w.faults.Unlock()
	}
}

// crashMoment is how the wait for a kill's moment ended.
type crashMoment int

const (
	momentTimer     crashMoment = iota // the wait elapsed (a triggered kill's moment did not come)
	momentTriggered                    // the kind's trigger fired, and the offset passed
	momentStopped                      // stop was closed: no kill
)

// awaitKillMoment arms the tap for kind (nothing for crashOnTimer) and waits for what comes
// first: the trigger (then offset more), wait elapsing, or stop closing (nil: never). The
// tap is disarmed when it returns.
func (w *crashWorker) awaitKillMoment(ctx context.Context, kind string, wait, offset time.Duration, stop <-chan struct{}) (crashMoment, error) {
	var trigger <-chan struct{}
	if kind != crashOnTimer {
		trigger = w.tap.arm(kind)
	}
	defer w.tap.disarm()
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-stop:
		return momentStopped, nil
	case <-tm.C:
		return momentTimer, nil
	case <-trigger:
		return momentTriggered, crashPause(ctx, offset)
	case <-ctx.Done():
		return momentStopped, ctx.Err()
	}
}

// killAndRestart SIGKILLs the running worker and starts the next one after a short random
// pause.
func (w *crashWorker) killAndRestart(ctx context.Context, r *mrand.Rand, how string) error {
	if err := w.kill(); err != nil {
		return err
	}
	p := w.current()
	w.t.Logf("kill %d: SIGKILLed worker process #%d (pid %d) %s", w.killCount(), p.index, p.pid, how)
	if err := crashPause(ctx, crashRandDur(r, 1500*time.Millisecond)); err != nil {
		return err
	}
	return w.start()
}

// crashFaults is what the faults did.
type crashFaults struct {
	outage, outageRecovery         time.Duration // cut for; first getupdates after the restore
	refusals                       int64         // connections the proxy refused while cut
	cutPage                        int           // messages of the page whose commit the cut hit
	heldPages, heldMsgs            int           // handed out while PostgreSQL was cut off
	temporalDown, temporalRecovery time.Duration // halted for (until it answered again); first getupdates after
}

func (f crashFaults) String() string {
	return fmt.Sprintf("PostgreSQL cut for %v at the hand-out of a page of %d messages (%d connections refused; %d more pages of %d messages handed out meanwhile), "+
		"the worker fetched again %v after the restore; Temporal dev server down for %v, the worker fetched again %v after it was back",
		f.outage.Round(time.Millisecond), f.cutPage, f.refusals, f.heldPages, f.heldMsgs, f.outageRecovery.Round(time.Millisecond),
		f.temporalDown.Round(time.Millisecond), f.temporalRecovery.Round(time.Millisecond))
}

// faultLoop cuts PostgreSQL off from the worker for crashOutage once crashOutageAt
// messages were injected, then restarts the Temporal dev server once crashTemporalAt
// were; each time it waits until the worker fetches again, and no kill happens meanwhile.
func (w *crashWorker) faultLoop(ctx context.Context, rig *procRig, count *atomic.Int64, out *crashFaults) error {
	if err := crashAwait(ctx, crashRecoverWithin+3*time.Minute, func() bool { return count.Load() >= crashOutageAt }); err != nil {
		return fmt.Errorf("waiting for message %d: %w", crashOutageAt, err)
	}
	w.faults.Lock()
	// The cut comes as a page is handed out, before the worker has it: its commit meets
	// the outage (the case a gateway must not lose).
	var page crashPage
	select {
	case page = <-w.tap.armFault():
	case <-time.After(crashRecoverWithin):
		w.faults.Unlock()
		return fmt.Errorf("no page handed out within %v after message %d", crashRecoverWithin, crashOutageAt)
	case <-ctx.Done():
		w.faults.Unlock()
		return ctx.Err()
	}
	refusedBefore := rig.dbProxy.Refusals()
	rig.dbProxy.Cut()
	cut := time.Now()
	out.cutPage = len(page.ids)
	w.t.Logf("PostgreSQL outage: the worker's connections are cut as getupdates #%d hands out %d messages (message %d injected, worker process #%d)",
		page.seq, len(page.ids), count.Load(), w.current().index)
	if err := crashPause(ctx, crashOutage); err != nil {
		rig.dbProxy.Restore()
		w.faults.Unlock()
		return err
	}
	rig.dbProxy.Restore()
	restored := time.Now()
	out.outage, out.refusals = restored.Sub(cut), rig.dbProxy.Refusals()-refusedBefore
	out.heldPages, out.heldMsgs = w.tap.pagesBetween(cut, restored)
	w.t.Logf("PostgreSQL outage over after %v (%d connections refused; %d pages of %d messages handed out meanwhile)",
		out.outage.Round(time.Millisecond), out.refusals, out.heldPages, out.heldMsgs)
	err := w.awaitFetch(ctx, restored)
	out.outageRecovery = time.Since(restored)
	w.faults.Unlock()
	if err != nil {
		return fmt.Errorf("after the PostgreSQL outage: %w", err)
	}
	w.t.Logf("the worker fetched again %v after PostgreSQL came back", out.outageRecovery.Round(time.Millisecond))

	if err := crashAwait(ctx, crashRecoverWithin+3*time.Minute, func() bool { return count.Load() >= crashTemporalAt }); err != nil {
		return fmt.Errorf("waiting for message %d: %w", crashTemporalAt, err)
	}
	w.faults.Lock()
	defer w.faults.Unlock()
	halted := time.Now()
	w.t.Logf("Temporal restart: halting the dev server (message %d injected, worker process #%d)", count.Load(), w.current().index)
	if err := rig.dev.Halt(); err != nil {
		return fmt.Errorf("halt the dev server: %w", err)
	}
	if err := crashPause(ctx, crashTemporalDown); err != nil {
		return err
	}
	if err := rig.dev.Restart(ctx); err != nil {
		return fmt.Errorf("restart the dev server: %w", err)
	}
	back := time.Now()
	out.temporalDown = back.Sub(halted)
	w.t.Logf("Temporal dev server back after %v on %s", out.temporalDown.Round(time.Millisecond), rig.dev.HostPort)
	err = w.awaitFetch(ctx, back)
	out.temporalRecovery = time.Since(back)
	if err != nil {
		return fmt.Errorf("after the Temporal restart: %w", err)
	}
	w.t.Logf("the worker fetched again %v after the Temporal dev server was back", out.temporalRecovery.Round(time.Millisecond))
	return nil
}

// awaitFetch waits until the running worker makes a getupdates request after since.
func (w *crashWorker) awaitFetch(ctx context.Context, since time.Time) error {
	p := w.current()
	err := crashAwait(ctx, crashRecoverWithin, func() bool { return w.tap.fetchedSince(since) || p.hasExited() })
	if p.hasExited() {
		return fmt.Errorf("worker process #%d (pid %d) exited: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	}
	if err != nil {
		return fmt.Errorf("no getupdates within %v: %w", crashRecoverWithin, err)
	}
	return nil
}

// crashAwait waits until cond holds, checking it every 50 ms, for at most within.
func crashAwait(ctx context.Context, within time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func (w *crashWorker) killCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kills
}

func (w *crashWorker) processes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.procs)
}

// killedEpochs are the processes the test SIGKILLed.
func (w *crashWorker) killedEpochs() map[int]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int]bool{}
	for _, p := range w.procs {
		if p.killed {
			out[p.index] = true
		}
	}
	return out
}

// stop ends the running process gracefully (SIGTERM), as an operator would.
func (w *crashWorker) stop() {
	w.mu.Lock()
	if len(w.procs) == 0 {
		w.mu.Unlock()
		return
	}
	p := w.procs[len(w.procs)-1]
	w.mu.Unlock()
	if p.hasExited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	tm := time.NewTimer(30 * time.Second)
	defer tm.Stop()
	select {
	case <-p.exited:
		if p.exitErr != nil {
			w.t.Errorf("worker process #%d did not stop cleanly on SIGTERM: %v\n%s", p.index, p.exitErr, crashTail(p.log.String(), 40))
		}
	case <-tm.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		w.t.Errorf("worker process #%d did not stop within 30s of SIGTERM", p.index)
	}
}

// launch starts the worker for the test: it is stopped when the test ends (before the
// server, the schema and the namespace go away), and its processes' logs are printed when
// the test failed or crashLogsEnv is set.
func (w *crashWorker) launch() {
	w.t.Helper()
	w.t.Cleanup(w.stop)
	w.t.Cleanup(func() {
		if w.t.Failed() || os.Getenv(crashLogsEnv) != "" {
			w.dumpLogs()
		}
	})
	if err := w.start(); err != nil {
		w.t.Fatal(err)
	}
}

// dumpLogs prints the stderr of every process (the tail of each).
func (w *crashWorker) dumpLogs() {
	w.mu.Lock()
	procs := append([]*crashProc(nil), w.procs...)
	killed := map[*crashProc]bool{}
	for _, p := range procs {
		killed[p] = p.killed
	}
	w.mu.Unlock()
	for _, p := range procs {
		how := "running"
		switch {
		case killed[p]:
			how = "SIGKILLed"
		case p.hasExited():
			how = fmt.Sprintf("exited: %v", p.exitErr)
		}
		w.t.Logf("===== worker process #%d (pid %d, %s) stderr (tail) =====\n%s", p.index, p.pid, how, crashTail(p.log.String(), 200))
	}
}

func crashTail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = append([]string{fmt.Sprintf("... (%d earlier lines)", len(parts)-lines)}, parts[len(parts)-lines:]...)
	}
	return strings.Join(parts, "\n")
}

// ---------------------------------------------------------------------------------------
// The agent.

// crashAgent replies once to every window that gets an agent session. The update id and
// the request id are derived from the window, so a retry after a kill is idempotent.
type crashAgent struct {
	tc      client.Client
	st      *store.Store
	inst    wfapi.Installation
	account string

	mu       sync.Mutex
	seen     map[int64]bool   // windows a reply was started for
	done     map[int64]string // outcome of each finished reply
	lastErr  map[int64]string // the latest transient error of a reply still retrying
	inflight int
	wg       sync.WaitGroup
}

func (a *crashAgent) run(ctx context.Context) {
	defer a.wg.Wait()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		open, err := a.st.ListWindows(ctx, store.WindowFilter{AccountKey: a.account, State: vocab.WindowOpen})
		if err != nil {
			continue
		}
		for _, w := range open {
			a.mu.Lock()
			seen := a.seen[w.ReplyWindowID]
			a.mu.Unlock()
			if seen || !a.hasSession(ctx, w.ReplyWindowID) {
				continue
			}
			a.mu.Lock()
			a.seen[w.ReplyWindowID] = true
			a.inflight++
			a.mu.Unlock()
			a.wg.Add(1)
			go func(id int64) {
				defer a.wg.Done()
				a.reply(ctx, id)
			}(w.ReplyWindowID)
		}
	}
}

// windowWF is the workflow id of a reply window of the agent's installation.
func (a *crashAgent) windowWF(windowID int64) string { return a.inst.WindowWorkflowID(windowID) }

func (a *crashAgent) hasSession(ctx context.Context, windowID int64) bool {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := a.tc.QueryWorkflow(cctx, a.windowWF(windowID), "", wfapi.QueryWindowState)
	if err != nil {
		return false
	}
	var ws wfapi.WindowState
	return v.Get(&ws) == nil && ws.SessionID != ""
}

// reply sends the window's one reply, retrying while the worker is down.
func (a *crashAgent) reply(ctx context.Context, windowID int64) {
	id := fmt.Sprintf("reply-%d", windowID)
	outcome := ""
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.inflight--
		if outcome != "" {
			a.done[windowID] = outcome
			delete(a.lastErr, windowID)
		}
	}()
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
		var res wfapi.SendResult
		h, err := a.tc.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
			UpdateID: id, WorkflowID: a.windowWF(windowID), UpdateName: wfapi.UpdateSend,
			Args:         []any{wfapi.SendRequest{Type: "text", Text: fmt.Sprintf("reply to window %d", windowID), RequestID: id}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(cctx, &res)
		}
		cancel()
		if outcome = crashOutcome(res, err); outcome != "" {
			return
		}
		a.mu.Lock()
		a.lastErr[windowID] = err.Error()
		a.mu.Unlock()
		if crashPause(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// crashOutcome names the final outcome of a reply, or "" when the call must be retried
// (the worker is down, the call timed out).
func crashOutcome(res wfapi.SendResult, err error) string {
	var nf *serviceerror.NotFound
	var act *temporal.ActivityError
	switch {
	case err == nil:
		if res.ErrorCode != "" {
			return res.Status + ":" + res.ErrorCode
		}
		return res.Status
	case refusalCode(err) != "":
		return "refused:" + refusalCode(err)
	case errors.As(err, &nf):
		return "window workflow closed"
	case errors.As(err, &act):
		return "activity failed"
	}
	return ""
}

// idle reports whether no reply is in flight and every given window was answered.
func (a *crashAgent) idle(open []int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight > 0 {
		var retrying []string
		for id, e := range a.lastErr {
			retrying = append(retrying, fmt.Sprintf("window %d: %s", id, e))
		}
		sort.Strings(retrying)
		return fmt.Errorf("%d replies in flight (retrying: %v)", a.inflight, retrying)
	}
	for _, id := range open {
		if _, ok := a.done[id]; !ok {
			return fmt.Errorf("open window %d not answered by the agent yet (no agent session seen)", id)
		}
	}
	return nil
}

// describe says what the agent can see of a window's workflow (for a failure message).
func (a *crashAgent) describe(ctx context.Context, windowID int64) string {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	id := a.windowWF(windowID)
	d, err := a.tc.DescribeWorkflow(cctx, id, "")
	if err != nil {
		return fmt.Sprintf("%s: describe: %v", id, err)
	}
	status := d.RawResponse.GetWorkflowExecutionInfo().GetStatus().String()
	v, err := a.tc.QueryWorkflow(cctx, id, "", wfapi.QueryWindowState)
	if err != nil {
		return fmt.Sprintf("%s: %s, query: %v", id, status, err)
	}
	var ws wfapi.WindowState
	if err := v.Get(&ws); err != nil {
		return fmt.Sprintf("%s: %s, query result: %v", id, status, err)
	}
	return fmt.Sprintf("%s: %s, state %s, session %q", id, status, ws.State, ws.SessionID)
}

func (a *crashAgent) outcomes() map[int64]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int64]string, len(a.done))
	for k, v := range a.done {
		out[k] = v
	}
	return out
}

func (a *crashAgent) summary() map[string]int {
	out := map[string]int{}
	for _, v := range a.outcomes() {
		out[v]++
	}
	return out
}

// ---------------------------------------------------------------------------------------
// Quiet, and the final state.

type crashQuiet struct {
	Open, Attempts int
}

// crashCheckQuiet is nil when the system is quiet: the simulator has nothing queued, the
// poller fetched again after the latest non-empty page (so it committed it), no attempt
// is pending or sending, and the agent is idle with every open window answered.
func crashCheckQuiet(ctx context.Context, ctl *ilinksim.Control, pool *pgxpool.Pool, st *store.Store, tap *crashTap,
	agent *crashAgent, botID, account string) (crashQuiet, error) {
	var q crashQuiet
	bs, err := ctl.BotState(ctx, botID)
	if err != nil {
		return q, err
	}
	if bs.Queued > 0 {
		return q, fmt.Errorf("the simulator still holds %d messages not handed out", bs.Queued)
	}
	if !tap.caughtUp() {
		return q, errors.New("no getupdates since the latest non-empty page (its commit is not confirmed)")
	}
	rows, err := pool.Query(ctx, "SELECT attempt_id, status, reply_window_id FROM send_attempts WHERE status IN ('pending', 'sending') ORDER BY attempt_id")
	if err != nil {
		return q, err
	}
	var busy []string
	for rows.Next() {
		var id, status string
		var win int64
		if err := rows.Scan(&id, &status, &win); err != nil {
			rows.Close()
			return q, err
		}
		busy = append(busy, fmt.Sprintf("%s %s (window %d)", id, status, win))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return q, err
	}
	if len(busy) > 0 {
		return q, fmt.Errorf("attempts still in flight: %v", busy)
	}
	open, err := st.ListWindows(ctx, store.WindowFilter{AccountKey: account, State: vocab.WindowOpen})
	if err != nil {
		return q, err
	}
	var ids []int64
	for _, w := range open {
		ids = append(ids, w.ReplyWindowID)
	}
	if err := agent.idle(ids); err != nil {
		var about []string
		for _, id := range ids {
			about = append(about, agent.describe(ctx, id))
		}
		return q, fmt.Errorf("%w; open windows: %v", err, about)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM send_attempts").Scan(&q.Attempts); err != nil {
		return q, err
	}
	q.Open = len(ids)
	return q, nil
}

type crashWindow struct {
	id                              int64
	reserved, transmitted, maxSends int32
	state                           string
}

type crashAttempt struct {
	id, clientID, status, failType, errorCode string
	window                                    int64
}

// crashInbox maps provider message id → status; a provider id stored twice fails.
func crashInbox(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT provider_message_id, status FROM inbound_messages ORDER BY inbox_seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		if prev, dup := out[id]; dup {
			t.Errorf("inbox: provider message %s is stored twice (%s and %s)", id, prev, status)
		}
		out[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func crashWindows(t *testing.T, pool *pgxpool.Pool) []crashWindow {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT reply_window_id, reserved, transmitted, max_sends, state FROM reply_windows ORDER BY reply_window_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []crashWindow
	for rows.Next() {
		var w crashWindow
		if err := rows.Scan(&w.id, &w.reserved, &w.transmitted, &w.maxSends, &w.state); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func crashAttempts(t *testing.T, pool *pgxpool.Pool) []crashAttempt {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT attempt_id, client_message_id, status, fail_type, error_code, reply_window_id FROM send_attempts ORDER BY attempt_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []crashAttempt
	for rows.Next() {
		var a crashAttempt
		if err := rows.Scan(&a.id, &a.clientID, &a.status, &a.failType, &a.errorCode, &a.window); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// crashAssertInbox: every message the simulator handed out is in the inbox exactly once,
// and nothing else is. It returns the messages excused as lost in flight at a kill: in the
// last getupdates response a SIGKILLed process received (iLink consumed them on hand-out).
func crashAssertInbox(t *testing.T, msgs []ilinksim.Injected, inbox map[string]string, tap *crashTap, killed map[int]bool) (excused []uint64, lost int) {
	t.Helper()
	handed := tap.handedOut()
	injected := map[string]bool{}
	var missing []string
	for _, m := range msgs {
		id := strconv.FormatUint(m.MessageID, 10)
		injected[id] = true
		if _, ok := inbox[id]; ok {
			continue
		}
		pages := handed[m.MessageID]
		if len(pages) == 0 {
			missing = append(missing, fmt.Sprintf("%s (never in a getupdates response the tap saw)", id))
			continue
		}
		p := pages[len(pages)-1]
		last, _ := tap.lastPageOf(p.epoch)
		switch {
		case killed[p.epoch] && last.seq == p.seq:
			excused = append(excused, m.MessageID)
		case !killed[p.epoch]:
			missing = append(missing, fmt.Sprintf("%s (handed out in getupdates #%d to worker process #%d, which was not killed)", id, p.seq, p.epoch))
		default:
			missing = append(missing, fmt.Sprintf("%s (handed out in getupdates #%d to worker process #%d, which fetched again in getupdates #%d before it was killed)",
				id, p.seq, p.epoch, last.seq))
		}
	}
	if len(missing) > 0 {
		shown := missing
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("... and %d more", len(missing)-20))
		}
		t.Errorf("inbox: %d of %d messages the simulator handed out are not in the inbox: %v", len(missing), len(msgs), shown)
	}
	for id, pages := range handed {
		if len(pages) > 1 {
			t.Errorf("simulator: message %d was handed out %d times (the simulator never replays)", id, len(pages))
		}
	}
	var extra []string
	for id, status := range inbox {
		if !injected[id] {
			extra = append(extra, id+" ("+status+")")
		}
	}
	if len(extra) > 0 {
		t.Errorf("inbox: %d messages that were never injected: %v", len(extra), extra)
	}
	// A page is committed atomically: all of its messages are in the inbox or none.
	for _, p := range tap.allPages() {
		in := 0
		for _, id := range p.ids {
			if _, ok := inbox[strconv.FormatUint(id, 10)]; ok {
				in++
			}
		}
		if in != 0 && in != len(p.ids) {
			t.Errorf("inbox: getupdates #%d (worker process #%d) handed out %d messages but only %d are in the inbox: a page was half committed",
				p.seq, p.epoch, len(p.ids), in)
		}
	}
	if len(excused) > 0 {
		shown := fmt.Sprint(excused)
		if len(excused) > 20 {
			shown = fmt.Sprintf("%v ... and %d more", excused[:20], len(excused)-20)
		}
		t.Logf("inbox: %d messages were in the last getupdates response of a process SIGKILLed before it committed them; iLink consumes on hand-out and never replays (ilink-protocol.md §4.1): %s",
			len(excused), shown)
	}
	return excused, len(missing)
}

// crashAssertClientIDs: no client message id reached the simulator twice, and what the
// simulator received agrees with the store's outcomes (a transmitted attempt is never
// recorded as released, pending or surely-not-sent; a sent one was accepted). It returns
// the number of client ids that reached the simulator more than once.
func crashAssertClientIDs(t *testing.T, sent []ilinksim.SentMessage, attempts []crashAttempt) (doubles int) {
	t.Helper()
	calls := map[string][]ilinksim.SentMessage{}
	for _, m := range sent {
		calls[m.ClientID] = append(calls[m.ClientID], m)
	}
	for id, ms := range calls {
		if len(ms) > 1 {
			doubles++
			var how []string
			for _, m := range ms {
				how = append(how, fmt.Sprintf("#%d %s%s at %s", m.Index, m.Outcome, m.Reason, m.At.Format(time.RFC3339Nano)))
			}
			t.Errorf("client message id %q reached the simulator %d times: %v", id, len(ms), how)
		}
	}
	byClient := map[string]crashAttempt{}
	for _, a := range attempts {
		byClient[a.clientID] = a
	}
	for id, ms := range calls {
		a, ok := byClient[id]
		switch {
		case !ok:
			t.Errorf("client message id %q reached the simulator but no attempt of the store has it", id)
		case a.status == vocab.AttemptPending || a.status == vocab.AttemptSending:
			// Reported by crashAssertNothingInFlight.
		case a.status == vocab.AttemptFailed && (a.failType == vocab.FailReleased || a.failType == vocab.FailRetired ||
			a.failType == vocab.FailRefused || a.failType == vocab.FailTransport):
			t.Errorf("attempt %s reached the simulator (%s) but is recorded as failed/%s (%s): its quota was given back or it was declared never sent",
				a.id, ms[0].Outcome, a.failType, a.errorCode)
		case ms[0].Outcome == ilinksim.OutcomeAccepted && a.status != vocab.AttemptSent && a.status != vocab.AttemptUnknown:
			t.Errorf("attempt %s was accepted by the simulator but is recorded as %s/%s", a.id, a.status, a.failType)
		}
	}
	for _, a := range attempts {
		if a.status != vocab.AttemptSent {
			continue
		}
		if ms := calls[a.clientID]; len(ms) == 0 || ms[0].Outcome != ilinksim.OutcomeAccepted {
			t.Errorf("attempt %s is recorded as sent but the simulator never accepted client id %q (%d calls)", a.id, a.clientID, len(ms))
		}
	}
	return doubles
}

// crashAssertHandled: no message is `handled` without an answer the user got. The echo
// agent marks a message handled from its hand-off answer; the test's agent gives no
// verdict of its own (it only replies), so every handled message must have an attempt
// (of its window, source_message_key) whose client id the simulator accepted. It returns
// the handled messages and the false ones.
func crashAssertHandled(t *testing.T, pool *pgxpool.Pool, sent []ilinksim.SentMessage) (handled, falseHandled int) {
	t.Helper()
	accepted := map[string]bool{}
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeAccepted {
			accepted[m.ClientID] = true
		}
	}
	rows, err := pool.Query(context.Background(), `
SELECT m.provider_message_id, coalesce(array_agg(a.client_message_id || ' ' || a.status) FILTER (WHERE a.attempt_id IS NOT NULL), '{}')
FROM inbound_messages AS m LEFT JOIN send_attempts AS a ON a.source_message_key = m.message_key
WHERE m.status = 'handled'
GROUP BY m.provider_message_id ORDER BY m.provider_message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id string
		var attempts []string
		if err := rows.Scan(&id, &attempts); err != nil {
			t.Fatal(err)
		}
		handled++
		ok := false
		for _, a := range attempts {
			if client, _, _ := strings.Cut(a, " "); accepted[client] {
				ok = true
			}
		}
		if !ok {
			falseHandled++
			bad = append(bad, fmt.Sprintf("%s (attempts %v)", id, attempts))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Errorf("%d of %d handled messages have no send the simulator accepted (falsely handled): %v", falseHandled, handled, bad)
	}
	// The other side, logged: a message failed because no reply was confirmed sent may
	// still have had one reach the user (a kill between the transmission and the record of
	// its outcome leaves it unknown to the gateway).
	var failed, failedAnswered int
	if err := pool.QueryRow(context.Background(), `
SELECT count(*), count(*) FILTER (WHERE clients && $1::text[]) FROM (
    SELECT coalesce(array_agg(a.client_message_id) FILTER (WHERE a.attempt_id IS NOT NULL), '{}') AS clients
    FROM inbound_messages AS m LEFT JOIN send_attempts AS a ON a.source_message_key = m.message_key
    WHERE m.status = 'failed' GROUP BY m.message_key) AS f`, slices.Collect(maps.Keys(accepted))).Scan(&failed, &failedAnswered); err != nil {
		t.Fatal(err)
	}
	t.Logf("failed messages: %d, of which %d had a reply the simulator accepted (its outcome unknown to the gateway)", failed, failedAnswered)
	return handled, falseHandled
}

// crashAssertQuota: no window exceeded its quota, in the store and at the simulator.
func crashAssertQuota(t *testing.T, windows []crashWindow, attempts []crashAttempt, sent []ilinksim.SentMessage, simQuota int) {
	t.Helper()
	maxSends := map[int64]int32{}
	for _, w := range windows {
		maxSends[w.id] = w.maxSends
		if w.reserved+w.transmitted > w.maxSends {
			t.Errorf("window %d (%s): reserved %d + transmitted %d exceeds max_sends %d", w.id, w.state, w.reserved, w.transmitted, w.maxSends)
		}
	}
	used := map[int64]int32{}
	for _, a := range attempts {
		if a.status == vocab.AttemptSent || a.status == vocab.AttemptUnknown {
			used[a.window]++
		}
	}
	for id, n := range used {
		if n > maxSends[id] {
			t.Errorf("window %d: %d attempts sent or unknown, over its quota of %d", id, n, maxSends[id])
		}
	}
	perToken := map[string]int{}
	for _, m := range sent {
		perToken[m.ContextToken]++
	}
	for tok, n := range perToken {
		if simQuota > 0 && n > simQuota {
			t.Errorf("simulator: %d sendmessage calls with one context token (%d bytes), over the quota of %d", n, len(tok), simQuota)
		}
	}
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeRefused && m.Reason == ilinksim.ReasonQuota {
			t.Errorf("simulator: send #%d (client id %q) refused for quota", m.Index, m.ClientID)
		}
	}
}

// crashAssertNothingInFlight: no attempt is left pending or sending.
func crashAssertNothingInFlight(t *testing.T, attempts []crashAttempt) {
	t.Helper()
	for _, a := range attempts {
		if a.status == vocab.AttemptPending || a.status == vocab.AttemptSending {
			t.Errorf("attempt %s (window %d) is left %s", a.id, a.window, a.status)
		}
	}
}

// pageMessageIDs reads the message ids of a getupdates answer (none when it does not
// decode).
func pageMessageIDs(answer []byte) []uint64 {
	var body struct {
		Msgs []struct {
			MessageID uint64 `json:"message_id"`
		} `json:"msgs"`
	}
	var ids []uint64
	if json.Unmarshal(answer, &body) == nil {
		for _, m := range body.Msgs {
			ids = append(ids, m.MessageID)
		}
	}
	return ids
}
