package loadtest

// The chaos mode of the scale test: several worker processes serve the bots while a
// seeded plan kills them (SIGKILL at random instants, and at the named instants no outside
// signal can hit: a worker that has just picked up a poll activity, one with a send in
// flight, one whose page is leaving the simulator), freezes one (SIGSTOP for a while, then
// SIGCONT) and ends with a rolling restart of them all, under a stream of user messages at
// human speed. It measures how long the victims' bots go unpolled, and counts lost,
// doubled and falsely handled messages (docs/scale-test.md, "Chaos").

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Kinds of kill in a chaos run.
const (
	// KillRandom: SIGKILL of a random worker at a random instant.
	KillRandom = "random"
	// KillPollPickedUp: a worker kills itself just after it picked up a poll activity
	// (fault point poll-picked-up), before it took the bot's lease.
	KillPollPickedUp = faultpoint.PollPickedUp
	// KillSendInFlight: a worker kills itself while a sendmessage it made is in flight
	// (fault point send-in-flight).
	KillSendInFlight = faultpoint.SendInFlight
	// KillPageLeaves: the harness SIGKILLs the holder of a bot's lease just before the
	// simulator writes a getupdates answer that carries messages for that bot.
	KillPageLeaves = "page-leaves"
)

// KillKinds lists the kinds of kill.
var KillKinds = []string{KillRandom, KillPollPickedUp, KillPageLeaves, KillSendInFlight}

// eventFreeze is the plan's freeze (SIGSTOP, then SIGCONT).
const eventFreeze = "freeze"

// ChaosConfig is one chaos run. Start from [DefaultChaosConfig]. Of the embedded Config it
// uses Bots, Rate, Think, LongPollHold, the database and Temporal settings, WorkerBin,
// DBMaxConns, WorkerEnv, ReadyWithin, AnswerWithin, Settle, Seed, WorkDir, KeepWorkDir
// and Log.
type ChaosConfig struct {
	Config

	// Workers is the number of worker processes serving the bots.
	Workers int
	// Duration is the length over which the planned events are spread; the chaos phase
	// ends when the last one is done (later than Duration when they take longer).
	Duration time.Duration
	// Kills is the number of kills, mixed over KillKinds (half random, the rest
	// poll-picked-up, page-leaves and send-in-flight in turn), unless KillPlan is set.
	Kills int
	// KillPlan, when set, is the kinds of the kills in order (Kills is then ignored).
	KillPlan []string
	// RestartAfter is how long after a kill the victim's slot gets a fresh process.
	RestartAfter time.Duration
	// Freeze is how long one worker is SIGSTOPped before SIGCONT (0: no freeze).
	Freeze time.Duration
	// RollingRestart ends the chaos phase with a rolling restart of every worker.
	RollingRestart bool
	// Every, when set, opens the stream: each bot's next message goes Every after its
	// previous one, answered or not, as a user who keeps writing while the bot is silent
	// (the messages pile up in iLink while no worker polls it). Unset, a bot writes its
	// next message a think time after the answer to the previous one.
	Every time.Duration

	// KillBound is the bound on the time from a kill to each affected bot's next
	// getupdates; FreezeSlack is added to the lease ttl for the freeze's bound; RollBound
	// bounds each bot's longest time without a getupdates in flight in the rolling restart.
	KillBound   time.Duration
	FreezeSlack time.Duration
	RollBound   time.Duration
	// RecoverWithin bounds the harness's wait, after a kill or the freeze, for the affected
	// bots to be polled again before it goes on (the measurement goes on to the run's end).
	RecoverWithin time.Duration
	// An armed process (a fault-point kill) arms its point ArmAfterMin..ArmAfterMax after
	// it started (the seed picks); ArmWithin bounds the wait for the point after that.
	ArmAfterMin, ArmAfterMax time.Duration
	ArmWithin                time.Duration
	// InFlightWindow: a lost message counts as in flight (the documented loss) only if
	// the simulator handed it out to a process killed or frozen within this window after,
	// and it was not stored.
	InFlightWindow time.Duration
}

// DefaultChaosConfig is the default chaos run: 3 workers, 300 bots, messages at most 5 a
// second (each bot's next one 1.5 to 4.5 s after its answer, one a minute per bot at that
// rate: at 10 a second the 2-core VM of docs/scale-test.md saturated, with a median reply
// latency of 26 s), 30 kills and a 60-second freeze spread over 10 minutes, a rolling
// restart at the end. The workers run with an
// 8-connection pool each (five processes may run at once) and a 2-minute poll session, so
// that poll activities are picked up all along (the poll-picked-up kill needs one).
func DefaultChaosConfig() ChaosConfig {
	c := DefaultConfig()
	c.Bots, c.Active, c.Messages, c.Idle = 300, 0, 0, 0
	c.Rate = 5
	c.Think = 3 * time.Second
	c.Settle = 10 * time.Second
	c.DBMaxConns = 8
	c.WorkerEnv = map[string]string{"ILINKFLOW_POLL_SESSION": "2m"}
	return ChaosConfig{
		Config:         c,
		Workers:        3,
		Duration:       10 * time.Minute,
		Kills:          30,
		RestartAfter:   time.Second,
		Freeze:         time.Minute,
		RollingRestart: true,
		KillBound:      5 * time.Second,
		FreezeSlack:    5 * time.Second,
		RollBound:      5 * time.Second,
		RecoverWithin:  2 * time.Minute,
		ArmAfterMin:    10 * time.Second,
		ArmAfterMax:    30 * time.Second,
		ArmWithin:      5 * time.Minute,
		InFlightWindow: 5 * time.Second,
	}
}

// Validate reports settings that cannot run.
func (cc ChaosConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cc.Bots < 1 {
		bad("bots must be at least 1")
	}
	if cc.Workers < 1 {
		bad("workers must be at least 1")
	}
	if cc.Rate < 0 || cc.Think < 0 || cc.Settle < 0 || cc.Duration < 0 || cc.Kills < 0 || cc.Freeze < 0 || cc.RestartAfter < 0 || cc.Every < 0 {
		bad("rate, think, every, settle, duration, kills, freeze and restart-after must not be negative")
	}
	if cc.LongPollHold <= 0 || cc.ReadyWithin <= 0 || cc.AnswerWithin <= 0 {
		bad("long-poll hold, ready-within and answer-within must be positive")
	}
	if cc.KillBound <= 0 || cc.RollBound <= 0 || cc.FreezeSlack < 0 || cc.RecoverWithin <= 0 || cc.ArmWithin <= 0 || cc.InFlightWindow <= 0 {
		bad("the bounds, recover-within, arm-within and the in-flight window must be positive")
	}
	if cc.ArmAfterMin < 0 || cc.ArmAfterMax < cc.ArmAfterMin {
		bad("the arming delay must be a range 0 <= min <= max")
	}
	for _, k := range cc.KillPlan {
		if !slices.Contains(KillKinds, k) {
			bad("unknown kill kind %q (want %s)", k, strings.Join(KillKinds, ", "))
		}
	}
	if cc.DBMaxConns < 0 {
		bad("db-max-conns must not be negative")
	}
	if cc.DatabaseURL == "" {
		bad("no database URL")
	}
	return errors.Join(errs...)
}

// PlannedEvent is one event of the plan: its kind (a kill kind or "freeze") and the
// instant, from the start of the chaos phase, it is planned for (it waits for the events
// before it to be done).
type PlannedEvent struct {
	Kind string  `json:"kind"`
	AtS  float64 `json:"at_s"`
}

// killMix is n kill kinds: half random, the rest the named kinds in turn.
func killMix(n int) []string {
	cycle := []string{KillRandom, KillPollPickedUp, KillRandom, KillPageLeaves, KillRandom, KillSendInFlight}
	out := make([]string, n)
	for i := range out {
		out[i] = cycle[i%len(cycle)]
	}
	return out
}

// planChaos plans the events from the seed: the kills (shuffled, unless given in order)
// with the freeze at a random place among them, at sorted random instants over the
// duration after a warm-up (a tenth of it, at most 10 s).
func planChaos(cc ChaosConfig, rng *mrand.Rand) []PlannedEvent {
	kinds := slices.Clone(cc.KillPlan)
	if len(kinds) == 0 {
		kinds = killMix(cc.Kills)
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	}
	if cc.Freeze > 0 {
		kinds = slices.Insert(kinds, rng.IntN(len(kinds)+1), eventFreeze)
	}
	warm := min(10*time.Second, cc.Duration/10)
	at := make([]time.Duration, len(kinds))
	for i := range at {
		at[i] = warm + time.Duration(rng.Float64()*float64(cc.Duration-warm))
	}
	slices.Sort(at)
	out := make([]PlannedEvent, len(kinds))
	for i, k := range kinds {
		out[i] = PlannedEvent{Kind: k, AtS: at[i].Seconds()}
	}
	return out
}

// killRec is one kill as it happened.
type killRec struct {
	n      int
	how    string
	at     time.Time
	victim string
	pid    int
	bots   []int  // the affected bots (indices)
	named  string // the account the fault point's line named
	nudges int    // getupdates answered 502 to have a poll activity picked up
}

// freezeRec is the freeze as it happened.
type freezeRec struct {
	at, thaw time.Time
	victim   string
	pid      int
	bots     []int
}

// rollRec is the rolling restart as it happened.
type rollRec struct {
	from, to time.Time
	steps    []RollStep
	olds     []*chaosProc
}

// pageArm is an armed page-leaves kill.
type pageArm struct {
	fired bool
	done  chan struct{}
	rec   *killRec
	err   error
}

// chaosRun is the state of one RunChaos.
type chaosRun struct {
	*run
	cc      ChaosConfig
	rep     *ChaosReport
	planRng *mrand.Rand
	sim     *ilinksim.Server
	watch   *simWatch
	load    *chaosLoad
	bin     string
	env     map[string]string
	ttl     time.Duration
	grace   time.Duration
	crashed chan error // a worker the harness did not end exited

	botByToken   map[string]int
	botByAccount map[string]int

	plan     []PlannedEvent
	start    time.Time // of the chaos phase
	loadDone time.Time
	end      time.Time // of the measurements

	mu       sync.Mutex
	procs    []*chaosProc
	slots    []*chaosProc
	starts   []int // processes started per slot
	extras   int
	kills    []*killRec
	freezes  []*freezeRec
	rolling  *rollRec
	pageArm  *pageArm
	done     int               // events done
	stored   map[string]string // "account/provider message id" -> inbound_messages.status
	problems []string
}

// RunChaos runs the chaos mode and returns its report, also when the run failed (with
// what was measured until then; the error says why). A run that lost a message beyond
// the in-flight pages, answered one twice, marked one handled without its reply, missed a
// bound or had a getupdates overlap outside a freeze returns the report and an error
// wrapping ErrRuleBroken.
func RunChaos(ctx context.Context, cc ChaosConfig) (*ChaosReport, error) {
	if err := cc.Validate(); err != nil {
		return nil, err
	}
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	seed := cc.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	logOut := cc.Log
	if logOut == nil {
		logOut = io.Discard
	}
	base := &run{cfg: cc.Config, suffix: hex.EncodeToString(raw[:]), rng: mrand.New(mrand.NewPCG(seed, 10)),
		log: slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo})),
		rep: &Report{Bots: cc.Bots, Seed: seed}}
	c := &chaosRun{run: base, cc: cc, planRng: mrand.New(mrand.NewPCG(seed, 1)), crashed: make(chan error, 1)}
	c.rep = &ChaosReport{Workers: cc.Workers, Bots: cc.Bots, Seed: seed, Rate: cc.Rate, ThinkMS: ms(cc.Think), EveryMS: ms(cc.Every),
		AnswerWithinMS: ms(cc.AnswerWithin), KillBoundMS: ms(cc.KillBound), RollBoundMS: ms(cc.RollBound)}
	c.plan = planChaos(cc, c.planRng)
	c.rep.Plan = c.plan
	err := c.execute(ctx, seed)
	if c.end.IsZero() {
		c.end = time.Now()
	}
	c.analyze()
	// Nothing is measured any more: a worker still draining its long polls after 10 s is
	// killed.
	c.stopAll(10 * time.Second)
	c.rep.Processes = c.processes()
	if err != nil {
		c.rep.Failure = err.Error()
	} else {
		err = c.rep.Verdict()
	}
	base.failed = err != nil
	base.cleanup()
	return c.rep, err
}

func (c *chaosRun) note(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	c.log.Warn(msg)
	c.mu.Lock()
	c.problems = append(c.problems, msg)
	c.mu.Unlock()
}

func (c *chaosRun) execute(ctx context.Context, seed uint64) error {
	if err := c.setupWorkDir(); err != nil {
		return err
	}
	c.rep.WorkDir = c.workDir
	if err := c.setupTemporal(ctx); err != nil {
		return err
	}
	c.rep.Temporal, c.rep.Namespace = c.run.rep.Temporal, c.run.rep.Namespace
	if err := c.setupDatabase(ctx); err != nil {
		return err
	}
	c.rep.Schema = c.run.rep.Schema
	c.setupChaosSimulator(seed)
	if err := c.enroll(ctx); err != nil {
		return err
	}
	c.botByToken, c.botByAccount = map[string]int{}, map[string]int{}
	for i, b := range c.bots {
		st, err := c.sim.BotState(b.id)
		if err != nil {
			return err
		}
		c.botByToken[st.Token] = i
		c.botByAccount[b.accountKey] = i
	}
	if err := c.prepareWorker(ctx); err != nil {
		return err
	}
	if err := c.startWorkers(ctx); err != nil {
		return err
	}

	// The stream of messages, all along the chaos phase.
	c.load = newChaosLoad(c, mrand.New(mrand.NewPCG(seed, 2)))
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchErr := make(chan error, 1)
	go func() { watchErr <- c.load.watchReplies(watchCtx, c.sim.Stats().Sent) }()
	stopDrive := make(chan struct{})
	driveErr := make(chan error, 1)
	go func() { driveErr <- c.load.drive(ctx, stopDrive) }()
	stopLoad := func() error {
		select {
		case <-stopDrive:
		default:
			close(stopDrive)
		}
		return <-driveErr
	}

	c.start = time.Now()
	c.log.Info("chaos phase", "events", len(c.plan), "over", c.cc.Duration, "workers", c.cc.Workers, "bots", c.cc.Bots, "rate", c.cc.Rate)
	err := c.events(ctx)
	if err == nil && c.cc.RollingRestart {
		err = c.rollingRestart(ctx)
	}
	c.loadDone = time.Now()
	c.rep.ChaosS = c.loadDone.Sub(c.start).Seconds()
	if derr := stopLoad(); err == nil && derr != nil {
		err = fmt.Errorf("the message stream: %w", derr)
	}
	if err != nil {
		stopWatch()
		<-watchErr
		return err
	}
	c.log.Info("chaos phase over; waiting for the last answers", "within", c.cc.AnswerWithin)
	if err := c.load.awaitAnswers(ctx); err != nil {
		return err
	}
	if err := c.sleep(ctx, c.cc.Settle); err != nil { // a window for late second replies
		return err
	}
	c.end = time.Now()
	stopWatch()
	if err := <-watchErr; err != nil {
		return err
	}
	return c.readStored(ctx)
}

// setupChaosSimulator serves the simulator on loopback behind the watch.
func (c *chaosRun) setupChaosSimulator(seed uint64) {
	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = c.cfg.LongPollHold
	cfg.ThrottleBurst = 0 // the sim clock stands still (see setupSimulator)
	c.sim = ilinksim.New(cfg)
	c.watch = newSimWatch(c, c.sim.Handler(), c.cfg.Bots)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("loadtest: listen on loopback: %v", err)) // no loopback: nothing can run
	}
	c.watch.pids = newPIDResolver(c.livePIDs)
	c.watch.pids.simPort = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: c.watch, ReadHeaderTimeout: 10 * time.Second, ConnState: c.watch.pids.connState,
		ConnContext: ilinksim.ConnContext}
	go func() { _ = srv.Serve(ln) }()
	c.onCleanup(func() { _ = srv.Close() })
	c.simURL = "http://" + ln.Addr().String()
	c.ctl = ilinksim.NewControl(c.simURL, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	c.log.Info("simulator serving", "url", c.simURL, "long_poll_hold", c.cfg.LongPollHold, "seed", seed)
}

// livePIDs lists the worker processes that have not exited.
func (c *chaosRun) livePIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, p := range c.procs {
		if p.alive() {
			out = append(out, p.pid)
		}
	}
	return out
}

// prepareWorker builds (or checks) the fault-point worker and sets its environment.
func (c *chaosRun) prepareWorker(ctx context.Context) error {
	c.bin = c.cfg.WorkerBin
	if c.bin == "" {
		began := time.Now()
		var err error
		if c.bin, err = BuildFaultpointWorker(ctx, c.workDir); err != nil {
			return err
		}
		c.log.Info("worker built", "bin", c.bin, "tags", FaultpointsTag, "took", time.Since(began).Round(time.Millisecond))
	} else if ok, err := HasFaultpoints(c.bin); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the worker %s was not built with -tags %s: its fault points do nothing", c.bin, FaultpointsTag)
	}
	c.rep.WorkerBin = c.bin
	env := c.workerEnv()
	// The product's shutdown grace (the rolling restart is measured as operators run it),
	// unless the run's own settings give one; admin endpoints (/readyz) on a port of
	// their own.
	if _, given := c.cfg.WorkerEnv["ILINKFLOW_SHUTDOWN_GRACE"]; !given {
		delete(env, "ILINKFLOW_SHUTDOWN_GRACE")
	}
	if _, given := c.cfg.WorkerEnv[gateway.EnvAdminAddr]; !given {
		env[gateway.EnvAdminAddr] = "127.0.0.1:0"
	}
	delete(env, envFaultpoint)
	delete(env, envFaultpointAfter)
	cfg, err := gateway.ConfigFromEnv(func(k string) string { return env[k] }, nil)
	if err != nil {
		return fmt.Errorf("worker settings: %w", err)
	}
	c.env, c.ttl, c.grace = env, cfg.PollLeaseTTL, cfg.ShutdownGrace
	c.rep.PollLeaseTTLMS, c.rep.PollSessionMS, c.rep.ShutdownGraceMS = ms(cfg.PollLeaseTTL), ms(cfg.PollSession), ms(cfg.ShutdownGrace)
	c.rep.FreezeBoundMS = ms(c.ttl + c.cc.FreezeSlack)
	return nil
}

// startWorkers starts the workers, waits until each is ready and every bot is polled.
func (c *chaosRun) startWorkers(ctx context.Context) error {
	c.slots = make([]*chaosProc, c.cc.Workers)
	c.starts = make([]int, c.cc.Workers)
	for i := range c.slots {
		p, err := c.startSlot(i)
		if err != nil {
			return err
		}
		c.slots[i] = p
	}
	errs := make(chan error, len(c.slots))
	for _, p := range c.slots {
		go func() { errs <- c.waitReady(ctx, p, c.cfg.ReadyWithin) }()
	}
	for range c.slots {
		if err := <-errs; err != nil {
			return err
		}
	}
	began := time.Now()
	if err := c.until(ctx, c.cfg.ReadyWithin, func() bool { return c.watch.polledNow() == len(c.bots) }); err != nil {
		return fmt.Errorf("not every bot polled: %d of %d have a getupdates in flight after %v: %w", c.watch.polledNow(), len(c.bots), c.cfg.ReadyWithin, err)
	}
	c.rep.ReadyS = time.Since(began).Seconds()
	c.log.Info("every bot polled", "bots", len(c.bots), "workers", len(c.slots))
	return nil
}

// startSlot starts the next process of slot i (0-based).
func (c *chaosRun) startSlot(i int) (*chaosProc, error) {
	c.mu.Lock()
	c.starts[i]++
	name := fmt.Sprintf("w%d", i+1)
	if n := c.starts[i]; n > 1 {
		name += "." + strconv.Itoa(n)
	}
	c.mu.Unlock()
	return c.startProc(name, i+1, nil)
}

// errUntil is until's error when its bound passed.
var errUntil = errors.New("bound passed")

// until waits until ok holds, re-checking whenever the watch changes (and at least every
// 250 ms), bounded by within. It fails at once when a worker exits unexpectedly.
func (c *chaosRun) until(ctx context.Context, within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for {
		if ok() {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errUntil
		}
		tm := time.NewTimer(min(left, 250*time.Millisecond))
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case err := <-c.crashed:
			tm.Stop()
			return err
		case <-c.watch.changed:
		case <-tm.C:
		}
		tm.Stop()
	}
}

// sleep lets d pass (a planned length of the chaos: a freeze, a restart delay, a settle
// window; not a wait for a condition), failing at once when a worker exits unexpectedly.
func (c *chaosRun) sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-c.crashed:
		return err
	case <-tm.C:
		return nil
	}
}

// events runs the plan, each event at its instant or once the one before is done.
func (c *chaosRun) events(ctx context.Context) error {
	for i, ev := range c.plan {
		at := c.start.Add(time.Duration(ev.AtS * float64(time.Second)))
		if err := c.sleep(ctx, time.Until(at)); err != nil {
			return err
		}
		c.log.Info("event", "n", i+1, "of", len(c.plan), "kind", ev.Kind, "at", time.Since(c.start).Round(time.Millisecond))
		var err error
		switch ev.Kind {
		case KillRandom:
			err = c.randomKill(ctx)
		case KillPageLeaves:
			err = c.pageLeavesKill(ctx)
		case KillPollPickedUp, KillSendInFlight:
			err = c.faultKill(ctx, ev.Kind)
		case eventFreeze:
			err = c.freeze(ctx)
		}
		if err != nil {
			return fmt.Errorf("event %d (%s): %w", i+1, ev.Kind, err)
		}
	}
	if d := time.Since(c.start); d > c.cc.Duration {
		c.note("the planned events took %v, longer than the duration (%v)", d.Round(time.Second), c.cc.Duration)
	}
	return nil
}

// pickSlot picks a random worker slot (the seed's choice) and returns its process.
func (c *chaosRun) pickSlot() *chaosProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots[c.planRng.IntN(len(c.slots))]
}

// eventDone counts a done event.
func (c *chaosRun) eventDone() {
	c.mu.Lock()
	c.done++
	c.mu.Unlock()
}

// leasesOf returns the bots (indices) whose poll lease names pid as its holder.
func (c *chaosRun) leasesOf(ctx context.Context, pid int) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, "SELECT account_key, holder FROM poll_leases WHERE holder IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("read the poll leases: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var key, holder string
		if err := rows.Scan(&key, &holder); err != nil {
			return nil, fmt.Errorf("read the poll leases: %w", err)
		}
		if i, ok := c.botByAccount[key]; ok && holderPID(holder) == pid {
			out = append(out, i)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the poll leases: %w", err)
	}
	sort.Ints(out)
	return out, nil
}

// holderPID returns the pid of the process holding the bot's poll lease (0: none).
func (c *chaosRun) holderPID(ctx context.Context, accountKey string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var holder *string
	err := c.pool.QueryRow(ctx, "SELECT holder FROM poll_leases WHERE account_key = $1", accountKey).Scan(&holder)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the poll lease of %s: %w", accountKey, err)
	case holder == nil:
		return 0, nil
	}
	return holderPID(*holder), nil
}

// holderPID reads the pid of a lease holder "host/pid/random" (0 when not that shape).
func holderPID(holder string) int {
	parts := strings.Split(holder, "/")
	if len(parts) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// killNow SIGKILLs p (its leases read right before) and records the kill.
func (c *chaosRun) killNow(ctx context.Context, p *chaosProc, how string) (*killRec, error) {
	bots, err := c.leasesOf(ctx, p.pid)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	rec := &killRec{n: len(c.kills) + 1, how: how, victim: p.name, pid: p.pid, bots: bots}
	c.kills = append(c.kills, rec)
	c.mu.Unlock()
	rec.at = time.Now()
	if err := p.kill(fmt.Sprintf("SIGKILL (kill #%d, %s)", rec.n, how)); err != nil {
		return rec, err
	}
	c.log.Info("killed", "n", rec.n, "how", how, "worker", p.name, "pid", p.pid, "bots", len(bots))
	return rec, nil
}

// randomKill SIGKILLs a random worker now.
func (c *chaosRun) randomKill(ctx context.Context) error {
	rec, err := c.killNow(ctx, c.pickSlot(), KillRandom)
	if err != nil {
		return err
	}
	return c.afterKill(ctx, rec, true)
}

// pageLeavesKill arms the simulator's watch: the next getupdates answer that carries
// messages for a bot whose lease a worker holds has that worker SIGKILLed before it is
// written.
func (c *chaosRun) pageLeavesKill(ctx context.Context) error {
	arm := &pageArm{done: make(chan struct{})}
	c.mu.Lock()
	c.pageArm = arm
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		arm.fired = true // disarmed
		c.pageArm = nil
		c.mu.Unlock()
	}()
	tm := time.NewTimer(c.cc.ArmWithin)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-c.crashed:
		return err
	case <-tm.C:
		c.note("page-leaves kill: no page with messages left for a worker's bot within %v; not done", c.cc.ArmWithin)
		return nil
	case <-arm.done:
	}
	if arm.err != nil {
		return arm.err
	}
	return c.afterKill(ctx, arm.rec, true)
}

// onPageLeaving is called by the watch just before an answer with messages for bot is
// written: an armed page-leaves kill SIGKILLs the worker holding the bot's lease first.
func (c *chaosRun) onPageLeaving(ctx context.Context, bot int) {
	c.mu.Lock()
	arm := c.pageArm
	c.mu.Unlock()
	if arm == nil {
		return
	}
	holder, err := c.holderPID(ctx, c.bots[bot].accountKey)
	if err != nil || holder == 0 {
		return
	}
	c.mu.Lock()
	var victim *chaosProc
	for _, p := range c.slots {
		if p.pid == holder && p.alive() && !p.isFrozen() {
			victim = p
		}
	}
	if victim == nil || arm.fired {
		c.mu.Unlock()
		return
	}
	arm.fired = true
	c.mu.Unlock()
	arm.rec, arm.err = c.killNow(ctx, victim, KillPageLeaves)
	close(arm.done)
}

// faultKill starts an extra worker armed with the fault point, which kills itself at the
// point once armed; the kill is measured from the line it prints. The extra process is
// not restarted: the workers are again as many as before.
func (c *chaosRun) faultKill(ctx context.Context, point string) error {
	c.mu.Lock()
	c.extras++
	name := fmt.Sprintf("x%d", c.extras)
	after := c.cc.ArmAfterMin + time.Duration(c.planRng.Float64()*float64(c.cc.ArmAfterMax-c.cc.ArmAfterMin))
	c.mu.Unlock()
	after = after.Round(time.Millisecond)
	p, err := c.startProc(name, 0, map[string]string{envFaultpoint: point, envFaultpointAfter: after.String()})
	if err != nil {
		return err
	}
	p.setExpected("killed itself at " + point)
	tm := time.NewTimer(after + c.cc.ArmWithin)
	defer tm.Stop()
	// A poll activity is picked up when one ends: at a session's end, after a failure,
	// when a worker dies. A bot written to all along keeps its poll activity, so once the
	// point is armed the harness nudges: every second a getupdates (of whichever bot asks
	// next) is answered 502 once, as iLink may; that bot's poll activity ends, and its
	// poller schedules the next one after its short backoff, to be picked up by any worker.
	var nudge <-chan time.Time
	if point == KillPollPickedUp {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		nudge = t.C
	}
	nudges := 0
wait:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-c.crashed:
			return err
		case <-tm.C:
			c.note("%s kill: worker %s (armed after %v, %d nudges) did not reach the point within %v; stopped it, not done", point, name, after, nudges, c.cc.ArmWithin)
			p.mu.Lock()
			p.fate = "not hit; stopped (SIGTERM)"
			p.mu.Unlock()
			_ = p.signal(syscall.SIGTERM)
			return p.waitExit(c.grace + 30*time.Second)
		case <-nudge:
			if time.Since(p.started) < after || len(c.sim.Faults()) > 0 {
				continue
			}
			if _, err := c.sim.AddFault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: http.StatusBadGateway}); err != nil {
				return fmt.Errorf("nudge a poll activity: %w", err)
			}
			nudges++
		case <-p.out.faultCh:
			break wait
		case <-p.exited:
			if p.out.hit() == nil {
				return fmt.Errorf("the armed worker %s exited without reaching %s: %s", name, point, p.exitDescription())
			}
			break wait
		}
	}
	c.sim.ClearFaults()
	hit := p.out.hit()
	bots, err := c.leasesOf(ctx, p.pid) // right after: its leases are still in its name
	if err != nil {
		return err
	}
	if i, ok := c.botByAccount[hit.account]; ok && !slices.Contains(bots, i) {
		bots = append(bots, i)
	}
	c.mu.Lock()
	rec := &killRec{n: len(c.kills) + 1, how: point, at: hit.at, victim: name, pid: p.pid, bots: bots, named: hit.account, nudges: nudges}
	c.kills = append(c.kills, rec)
	c.mu.Unlock()
	if err := p.waitExit(30 * time.Second); err != nil {
		return err
	}
	c.log.Info("killed itself", "n", rec.n, "point", point, "worker", name, "pid", p.pid, "account", hit.account, "bots", len(bots),
		"after_start", hit.at.Sub(p.started).Round(time.Millisecond))
	return c.afterKill(ctx, rec, false)
}

// afterKill restarts the victim's slot RestartAfter after the kill (restart) and waits
// (bounded by RecoverWithin) until every affected bot is polled again.
func (c *chaosRun) afterKill(ctx context.Context, rec *killRec, restart bool) error {
	restarted := make(chan error, 1)
	if restart {
		slot := c.slotOf(rec.pid)
		go func() {
			if err := c.sleep(ctx, time.Until(rec.at.Add(c.cc.RestartAfter))); err != nil {
				restarted <- err
				return
			}
			p, err := c.startSlot(slot)
			if err != nil {
				restarted <- err
				return
			}
			c.mu.Lock()
			c.slots[slot] = p
			c.mu.Unlock()
			restarted <- c.waitReady(ctx, p, c.cfg.ReadyWithin)
		}()
	} else {
		restarted <- nil
	}
	werr := c.awaitRepolled(ctx, fmt.Sprintf("kill #%d (%s)", rec.n, rec.how), rec.at, rec.pid, rec.bots)
	if err := <-restarted; err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	c.eventDone()
	return nil
}

// slotOf is the slot index of the process with pid (its slot keeps it until replaced).
func (c *chaosRun) slotOf(pid int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.slots {
		if p.pid == pid {
			return i
		}
	}
	return 0
}

// awaitRepolled waits, bounded by RecoverWithin, until each of bots was polled again
// after at by a process other than pid; past the bound it notes the bots left and goes
// on (their gap is measured until they are polled or the run ends). Its error is that of
// ctx, or a worker's unexpected exit.
func (c *chaosRun) awaitRepolled(ctx context.Context, what string, at time.Time, pid int, bots []int) error {
	pending := func() int {
		n := 0
		for _, b := range bots {
			if _, ok := c.watch.repolledAfter(b, at, pid); !ok {
				n++
			}
		}
		return n
	}
	err := c.until(ctx, c.cc.RecoverWithin, func() bool { return pending() == 0 })
	if errors.Is(err, errUntil) {
		c.note("%s: %d of %d bots not polled again within %v; going on", what, pending(), len(bots), c.cc.RecoverWithin)
		return nil
	}
	return err
}

// freeze SIGSTOPs a random worker for Freeze, then SIGCONTs it; from then on its
// getupdates are checked against the lease holder.
func (c *chaosRun) freeze(ctx context.Context) error {
	p := c.pickSlot()
	bots, err := c.leasesOf(ctx, p.pid)
	if err != nil {
		return err
	}
	rec := &freezeRec{victim: p.name, pid: p.pid, bots: bots}
	c.mu.Lock()
	c.freezes = append(c.freezes, rec)
	c.mu.Unlock()
	rec.at = time.Now()
	if err := p.freeze(); err != nil {
		return err
	}
	c.log.Info("frozen (SIGSTOP)", "worker", p.name, "pid", p.pid, "bots", len(bots), "for", c.cc.Freeze)
	serr := c.sleep(ctx, c.cc.Freeze)
	c.watch.watchThawed(p.pid)
	rec.thaw = time.Now()
	if err := p.thaw(); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	c.log.Info("thawed (SIGCONT)", "worker", p.name, "pid", p.pid)
	if err := c.awaitRepolled(ctx, "the freeze", rec.at, rec.pid, rec.bots); err != nil {
		return err
	}
	c.eventDone()
	return nil
}

// rollingRestart restarts every worker as Kubernetes does: SIGTERM one, start its
// replacement, wait until /readyz is 200, next; then until every bot is polled.
func (c *chaosRun) rollingRestart(ctx context.Context) error {
	rec := &rollRec{from: time.Now()}
	c.mu.Lock()
	c.rolling = rec
	c.mu.Unlock()
	c.log.Info("rolling restart", "workers", len(c.slots))
	sctx, stopStalls := context.WithTimeout(ctx, stallWatchFor)
	go func() {
		defer stopStalls()
		c.describeStalls(sctx, rec.from)
	}()
	for i := range c.slots {
		c.mu.Lock()
		old := c.slots[i]
		c.mu.Unlock()
		step := time.Now()
		old.setExpected("SIGTERM (rolling restart)")
		if err := old.signal(syscall.SIGTERM); err != nil {
			return err
		}
		rec.olds = append(rec.olds, old)
		p, err := c.startSlot(i)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.slots[i] = p
		c.mu.Unlock()
		if err := c.waitReady(ctx, p, c.cfg.ReadyWithin); err != nil {
			return err
		}
		rec.steps = append(rec.steps, RollStep{Old: old.name, OldPID: old.pid, New: p.name, NewPID: p.pid, ReadyAfterS: time.Since(step).Seconds()})
		c.log.Info("replaced", "old", old.name, "new", p.name, "ready_after", time.Since(step).Round(time.Millisecond))
	}
	if err := c.until(ctx, c.cfg.ReadyWithin, func() bool { return c.watch.polledNow() == len(c.bots) }); err != nil {
		if !errors.Is(err, errUntil) {
			return err
		}
		c.note("rolling restart: %d of %d bots polled %v after the last replacement was ready", c.watch.polledNow(), len(c.bots), c.cfg.ReadyWithin)
	}
	rec.to = time.Now()
	for _, old := range rec.olds {
		if err := old.waitExit(c.grace + 30*time.Second); err != nil {
			c.note("rolling restart: %v", err)
		} else if old.exitErr != nil {
			c.note("rolling restart: %s exited %v after SIGTERM, want 0", old.name, old.exitErr)
		}
	}
	return nil
}

// A bot without a getupdates in flight for stallAfter from the rolling restart on (for
// stallWatchFor) has where its poll is noted once: its poller's pending poll activity at
// Temporal and its lease row, so that a missed bound says where the poll went.
const (
	stallAfter    = 15 * time.Second
	stallWatchFor = 6 * time.Minute
)

// describeStalls notes, once per bot, where the poll of each bot that goes unpolled for
// stallAfter (since from at the earliest) is, until ctx is done.
func (c *chaosRun) describeStalls(ctx context.Context, from time.Time) {
	noted := map[int]bool{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for bot := range c.bots {
			if d := c.watch.unpolledFor(bot, from, time.Now()); !noted[bot] && d > stallAfter {
				noted[bot] = true
				c.note("stalled: the bot of %s unpolled for %v: %s", c.bots[bot].accountKey, d.Round(time.Second), c.describePoll(ctx, c.bots[bot].accountKey))
			}
		}
	}
}

// describePoll says where the bot's poll is: its lease row and its poller's pending
// PollAccount activity (state, attempt, last worker, last started, last failure).
func (c *chaosRun) describePoll(ctx context.Context, accountKey string) string {
	var b strings.Builder
	var holder, claimedFrom *string
	var epoch, claimedAt *int64
	var attempt *int32
	err := c.pool.QueryRow(ctx, `SELECT holder, epoch, attempt, claimed_from,
		(extract(epoch FROM claimed_at) * 1000)::bigint FROM poll_leases WHERE account_key = $1`, accountKey).
		Scan(&holder, &epoch, &attempt, &claimedFrom, &claimedAt)
	switch {
	case err != nil:
		fmt.Fprintf(&b, "lease: %v", err)
	default:
		fmt.Fprintf(&b, "lease holder %s epoch %s attempt %s claimed from %s at %s", deref(holder), deref(epoch), deref(attempt),
			deref(claimedFrom), deref(claimedAt))
	}
	var id string
	if err := c.pool.QueryRow(ctx, "SELECT installation_id FROM installation").Scan(&id); err != nil {
		fmt.Fprintf(&b, "; installation: %v", err)
		return b.String()
	}
	desc, err := c.tc.DescribeWorkflow(ctx, wfapi.AccountPollerID(id, accountKey), "")
	if err != nil {
		fmt.Fprintf(&b, "; poller: %v", err)
		return b.String()
	}
	fmt.Fprintf(&b, "; poller %v", desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	for _, pa := range desc.RawResponse.GetPendingActivities() {
		fmt.Fprintf(&b, "; activity %s %v attempt %d last worker %q started %v scheduled %v failure %q",
			pa.GetActivityType().GetName(), pa.GetState(), pa.GetAttempt(), pa.GetLastWorkerIdentity(),
			pa.GetLastStartedTime().AsTime().Format(time.RFC3339Nano), pa.GetScheduledTime().AsTime().Format(time.RFC3339Nano),
			pa.GetLastFailure().GetMessage())
	}
	return b.String()
}

// deref is *p as text ("-" for nil).
func deref[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// statusUnknownSend stands for the status of a stored message with a send attempt of
// unknown outcome.
const statusUnknownSend = "send_outcome_unknown"

// readStored reads the status of every stored inbound message.
func (c *chaosRun) readStored(ctx context.Context) error {
	// A message whose reply was being sent when its worker died has a send attempt of
	// unknown outcome: by the rule that an ambiguous send is never sent again, it gets no
	// reply; it is told apart (statusUnknownSend) from a loss.
	rows, err := c.pool.Query(ctx, `SELECT m.account_key, m.provider_message_id,
		CASE WHEN EXISTS (SELECT 1 FROM send_attempts a WHERE a.source_message_key = m.message_key AND a.status = 'unknown')
		     THEN '`+statusUnknownSend+`' ELSE m.status END
		FROM inbound_messages m`)
	if err != nil {
		return fmt.Errorf("read inbound_messages: %w", err)
	}
	defer rows.Close()
	stored := map[string]string{}
	for rows.Next() {
		var acct, id, status string
		if err := rows.Scan(&acct, &id, &status); err != nil {
			return fmt.Errorf("read inbound_messages: %w", err)
		}
		stored[acct+"/"+id] = status
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read inbound_messages: %w", err)
	}
	c.mu.Lock()
	c.stored = stored
	c.mu.Unlock()
	return nil
}

// storedKey names a message in the stored map.
func (c *chaosRun) storedKey(m *chaosMsg) string {
	return c.bots[m.bot].accountKey + "/" + strconv.FormatUint(m.messageID, 10)
}
