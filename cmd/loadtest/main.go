// Command loadtest is ilinkflow's scale test: N simulated bots served by one worker
// process, measured while idle and under a stream of messages (see docs/scale-test.md).
//
//	go run ./cmd/loadtest -bots 50 -messages 200 -active 20 -idle 30s
//
// With -chaos it runs several worker processes and kills, freezes and restarts them under
// a stream of messages:
//
//	go run ./cmd/loadtest -chaos -workers 3 -bots 300 -kills 30 -freeze 60s
//
// With -soak it pushes a million messages with their replies through the store alone (no
// Temporal, no worker process, no simulator) on a simulated clock, with the retention
// purge running, and reports every 100,000:
//
//	go run ./cmd/loadtest -soak -messages 1000000
//
// It needs PostgreSQL at DATABASE_URL (a schema is created and dropped) and Temporal at
// TEMPORAL_ADDRESS, or the temporal CLI to start a dev server. It exits 1 when a message
// was lost or answered twice, the worker used more PostgreSQL connections than its bound,
// or the run could not complete (in chaos mode: a message lost beyond the in-flight pages,
// doubled or falsely handled, a bound missed, or a planned event not done; in soak mode:
// a message lost or doubled, something left past a retention horizon, the last interval's
// p99 past its bound over the first's, or the table bytes still growing past the rows
// horizon), and 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/ilinkflow/ilinkflow/internal/loadtest"
	"github.com/ilinkflow/ilinkflow/internal/redact"
)

// envFlags collects repeated -worker-env KEY=VALUE flags.
type envFlags map[string]string

func (e envFlags) String() string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (e envFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return errors.New("want KEY=VALUE")
	}
	e[strings.TrimSpace(k)] = val
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// intList is a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// wordList is a comma-separated list of words.
type wordList []string

func (l *wordList) String() string { return strings.Join(*l, ",") }

func (l *wordList) Set(v string) error {
	*l = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// asked reports whether args set the boolean flag name (its mode's defaults then apply to
// every flag not given).
func asked(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		switch strings.TrimLeft(a, "-") {
		case name, name + "=true", name + "=1":
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg := loadtest.DefaultConfig()
	chaos := loadtest.DefaultChaosConfig()
	soak := loadtest.DefaultSoakConfig()
	switch {
	case asked(args, "chaos"):
		cfg = chaos.Config
	case asked(args, "saturate"):
		cfg = loadtest.SaturationConfig()
	case asked(args, "soak"):
		cfg.Messages, cfg.Bots = soak.Messages, soak.Bots
	}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workerEnv := envFlags{}
	for k, v := range cfg.WorkerEnv {
		workerEnv[k] = v
	}
	steps, systems := intList(cfg.SatSteps), wordList(cfg.SatSystems)
	fs.IntVar(&cfg.Bots, "bots", cfg.Bots, "simulated bots, all served by the one worker")
	fs.IntVar(&cfg.Active, "active", cfg.Active, "bots (a random subset) that receive the messages")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "user messages injected in the load phase")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "most messages injected per second (0: no bound)")
	fs.DurationVar(&cfg.Think, "think", cfg.Think, "least time between the reply to a bot's message and its next message")
	fs.DurationVar(&cfg.Idle, "idle", cfg.Idle, "length of the idle measurement")
	fs.DurationVar(&cfg.LongPollHold, "longpoll-hold", cfg.LongPollHold, "simulator's hold of an empty getupdates (protocol default 35s)")
	redact.DatabaseURLVar(fs, &cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "PostgreSQL server (default $DATABASE_URL, its password not shown); a fresh schema is created and dropped")
	fs.StringVar(&cfg.TemporalAddress, "temporal-address", cfg.TemporalAddress, "Temporal frontend host:port (default $TEMPORAL_ADDRESS; empty: start the dev server)")
	fs.StringVar(&cfg.Engine, "temporal", cfg.Engine, "Temporal server the run starts without -temporal-address: dev (the pinned CLI's dev server: SQLite, one connection, one shard) or pg (the pinned server release on the local PostgreSQL: 4 shards, default partitions; built and cached on first use)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "task-queue partitions of the Temporal server the run starts, dev or pg (0: the server's default, 4)")
	fs.StringVar(&cfg.TemporalNamespace, "namespace", "", "existing Temporal namespace without earlier runs (default: register a fresh one)")
	fs.StringVar(&cfg.WorkerBin, "worker-bin", "", "worker binary to run (default: go build ./worker)")
	fs.IntVar(&cfg.DBMaxConns, "db-max-conns", 0, "bound the worker's PostgreSQL pool (ILINKFLOW_DB_MAX_CONNS; 0: not passed, the worker's default)")
	fs.Var(workerEnv, "worker-env", "worker setting KEY=VALUE, repeatable (e.g. ILINKFLOW_POLL_HEARTBEAT_TIMEOUT=2m)")
	fs.DurationVar(&cfg.ReadyWithin, "ready-within", cfg.ReadyWithin, "bound on the wait for every bot to hold a long poll")
	fs.DurationVar(&cfg.AnswerWithin, "answer-within", cfg.AnswerWithin, "a message without a reply after this is lost")
	fs.DurationVar(&cfg.LoadWithin, "load-within", 0, "bound on the whole load phase (0: none)")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "how long to keep watching for second replies after the last answer")
	fs.DurationVar(&cfg.Sample, "sample", cfg.Sample, "period of the RSS, connection and long-poll samples")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the choice of active bots (0: random)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "directory for the worker binary and its log (default: a temporary one, kept on failure)")
	fs.BoolVar(&cfg.KeepWorkDir, "keep", false, "keep the work directory (-soak: the schema)")
	fs.BoolVar(&cfg.Saturate, "saturate", cfg.Saturate, "saturation run: a closed loop, step by step, for ilinkflow, the engine's and the store's ceilings (its defaults: -bots 128 -idle 0 -answer-within 30s -worker-env ILINKFLOW_SEND_GAP=10ms)")
	fs.Var(&steps, "steps", "saturation: bots in the closed loop, step by step")
	fs.DurationVar(&cfg.SatStepFor, "step", cfg.SatStepFor, "saturation: length of a step")
	fs.DurationVar(&cfg.SatP99, "p99", cfg.SatP99, "saturation: the p99 bound (inject to reply) a step must stay within")
	fs.Var(&systems, "systems", "saturation: the systems to drive ("+strings.Join(loadtest.Systems, ",")+")")
	chaosMode := fs.Bool("chaos", false, "chaos run: -workers worker processes, -kills kills, a -freeze and a rolling restart under a stream of messages to every bot (its defaults: -bots 300 -rate 5 -think 3s -settle 10s -db-max-conns 8 -worker-env ILINKFLOW_POLL_SESSION=2m)")
	fs.IntVar(&chaos.Workers, "workers", chaos.Workers, "chaos: worker processes")
	fs.DurationVar(&chaos.Duration, "duration", chaos.Duration, "chaos: the planned events are spread over this long (the phase lasts until they are done)")
	fs.IntVar(&chaos.Kills, "kills", chaos.Kills, "chaos: kills in all: half random, the rest poll-picked-up, page-leaves and send-in-flight in turn")
	killPlan := wordList(nil)
	fs.Var(&killPlan, "kill-plan", "chaos: the kills' kinds in order instead of -kills ("+strings.Join(loadtest.KillKinds, ",")+")")
	fs.DurationVar(&chaos.RestartAfter, "restart-after", chaos.RestartAfter, "chaos: a killed worker's fresh process starts this long after the kill")
	fs.DurationVar(&chaos.Freeze, "freeze", chaos.Freeze, "chaos: SIGSTOP one worker this long, then SIGCONT (0: no freeze)")
	fs.BoolVar(&chaos.RollingRestart, "rolling", chaos.RollingRestart, "chaos: end with a rolling restart of every worker")
	fs.DurationVar(&chaos.Every, "every", chaos.Every, "chaos: an open stream: each bot's next message this long after its previous one, answered or not (0: -think after the answer)")
	fs.DurationVar(&chaos.KillBound, "kill-bound", chaos.KillBound, "chaos: bound on the time from a kill to each affected bot's next getupdates")
	fs.DurationVar(&chaos.FreezeSlack, "freeze-slack", chaos.FreezeSlack, "chaos: the freeze's bound is the lease ttl plus this")
	fs.DurationVar(&chaos.RollBound, "roll-bound", chaos.RollBound, "chaos: bound on each bot's longest time without a getupdates in flight in the rolling restart")
	fs.DurationVar(&chaos.RecoverWithin, "recover-within", chaos.RecoverWithin, "chaos: how long the harness waits for a victim's bots to be polled again before the next event")
	fs.DurationVar(&chaos.ArmWithin, "arm-within", chaos.ArmWithin, "chaos: how long an armed fault point may take to be reached")
	soakMode := fs.Bool("soak", false, "soak: -messages messages (default 1000000) with their replies through the store alone (no Temporal, no worker, no simulator) on -bots bots, on a simulated clock with the retention purge running, a report line every -soak-interval messages (-keep keeps its schema)")
	fs.IntVar(&soak.Concurrency, "soak-concurrency", soak.Concurrency, "soak: exchanges at once (the worker's pool bound)")
	fs.IntVar(&soak.PageMessages, "soak-page", soak.PageMessages, "soak: a bot's messages per page (merged into one delivery and one reply)")
	fs.IntVar(&soak.Interval, "soak-interval", soak.Interval, "soak: messages per report line")
	fs.IntVar(&soak.DayMessages, "soak-day", soak.DayMessages, "soak: messages per simulated day")
	fs.DurationVar(&soak.Retention.Content, "soak-retain-content", soak.Retention.Content, "soak: content horizon, simulated time")
	fs.DurationVar(&soak.Retention.Rows, "soak-retain-rows", soak.Retention.Rows, "soak: rows horizon, simulated time")
	fs.DurationVar(&soak.PurgeEvery, "soak-purge-every", soak.PurgeEvery, "soak: the purge's period, simulated time")
	fs.IntVar(&soak.PurgeLimit, "soak-purge-limit", soak.PurgeLimit, "soak: most messages of one purge batch")
	fs.BoolVar(&soak.PurgeGate, "soak-purge-gate", soak.PurgeGate, "soak: hold new pages while the purge is a whole period behind (false: pages go on, the runs due meanwhile are skipped)")
	fs.Float64Var(&soak.P99Growth, "soak-p99-growth", soak.P99Growth, "soak: how much the last interval's commit and send p99 may exceed the first's (0.25: 25%)")
	fs.Float64Var(&soak.TableGrowth, "soak-table-growth", soak.TableGrowth, "soak: how much the table bytes may grow past the rows horizon")
	fs.BoolVar(&soak.VacuumStandIn, "soak-vacuum-stand-in", soak.VacuumStandIn, "soak: when the server's autovacuum is off, vacuum and analyze the schema by the daemon's thresholds instead")
	fs.DurationVar(&soak.VacuumNaptime, "soak-vacuum-naptime", soak.VacuumNaptime, "soak: the stand-in's period (0: the server's autovacuum_naptime; scale it with -soak-day for a shorter soak)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of the table")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: go run ./cmd/loadtest [flags]

ilinkflow's scale test: N simulated bots served by one worker process against the iLink
simulator (in this process), PostgreSQL and Temporal. It enrolls the bots, starts the
worker, waits until every bot holds a long poll, measures the idle worker, streams messages
that the echo agent answers, and prints a report. With -chaos, several workers (built with
-tags faultpoints) serve the bots while a seeded plan kills, freezes and finally restarts
them. See docs/scale-test.md.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadtest: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if len(workerEnv) > 0 {
		cfg.WorkerEnv = workerEnv
	}
	cfg.SatSteps, cfg.SatSystems = steps, systems
	if !*quiet {
		cfg.Log = stderr
	}
	if *chaosMode {
		chaos.Config, chaos.KillPlan = cfg, killPlan
		return runChaos(chaos, *asJSON, stdout, stderr)
	}
	if *soakMode {
		soak.Messages, soak.Bots, soak.DatabaseURL, soak.Keep, soak.Log = cfg.Messages, cfg.Bots, cfg.DatabaseURL, cfg.KeepWorkDir, cfg.Log
		if cfg.DBMaxConns > 0 {
			soak.DBMaxConns = cfg.DBMaxConns
		}
		return runSoak(soak, *asJSON, stdout, stderr)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loadtest.Run(ctx, cfg)
	if rep != nil {
		var werr error
		if *asJSON {
			werr = rep.WriteJSON(stdout)
		} else {
			werr = rep.WriteText(stdout)
		}
		if werr != nil {
			fmt.Fprintln(stderr, "loadtest: write the report:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	return 0
}

// runSoak runs the soak and prints its report.
func runSoak(cfg loadtest.SoakConfig, asJSON bool, stdout, stderr io.Writer) int {
	return runMode(cfg.Validate, func(ctx context.Context) (modeReport, error) {
		rep, err := loadtest.RunSoak(ctx, cfg)
		if rep == nil {
			return nil, err
		}
		return rep, err
	}, asJSON, stdout, stderr)
}

// runChaos runs the chaos mode and prints its report.
func runChaos(cfg loadtest.ChaosConfig, asJSON bool, stdout, stderr io.Writer) int {
	return runMode(cfg.Validate, func(ctx context.Context) (modeReport, error) {
		rep, err := loadtest.RunChaos(ctx, cfg)
		if rep == nil {
			return nil, err
		}
		return rep, err
	}, asJSON, stdout, stderr)
}

// modeReport is the report of a mode.
type modeReport interface {
	WriteJSON(w io.Writer) error
	WriteText(w io.Writer) error
}

// runMode checks a mode's configuration (exit 2), runs it until it ends or SIGINT or
// SIGTERM, prints its report (when it made one) and exits 1 when it failed.
func runMode(validate func() error, run func(context.Context) (modeReport, error), asJSON bool, stdout, stderr io.Writer) int {
	if err := validate(); err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx)
	if rep != nil {
		var werr error
		if asJSON {
			werr = rep.WriteJSON(stdout)
		} else {
			werr = rep.WriteText(stdout)
		}
		if werr != nil {
			fmt.Fprintln(stderr, "loadtest: write the report:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	return 0
}
