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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
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
