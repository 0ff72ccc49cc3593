package e2e_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/loadtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
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
// replays them, so the messages of the last getupdates response
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

// ---------------------------------------------------------------------------------------
// The worker processes.

// ---------------------------------------------------------------------------------------
// The agent.

// ---------------------------------------------------------------------------------------
// Quiet, and the final state.
