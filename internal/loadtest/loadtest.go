// Package loadtest is the scale test of ilinkflow: many simulated bots served by
// one worker process, measured while idle and under a stream of messages. The command
// cmd/loadtest runs it with flags; the test suite runs it with small numbers.
//
// One run: a fresh PostgreSQL schema (created in DATABASE_URL, dropped at the end), a
// Temporal namespace of its own (on TEMPORAL_ADDRESS, or on a dev server it starts), the
// iLink simulator in this process on loopback HTTP, N bots enrolled in the store exactly as
// a confirmed QR enrollment leaves them, and the worker command built and started as a
// separate process with the echo agent. Then:
//
//  1. ready: the worker's start-up reconcile starts every account's poller; the run waits
//     until every bot holds a long poll at the simulator;
//  2. idle: for Config.Idle it samples the worker's RSS, CPU, PostgreSQL connections and
//     the held getupdates calls, and counts what the idle window cost in Temporal
//     (history events and billed actions, heartbeats from the worker's SDK metrics);
//  3. load: Config.Messages user messages over Config.Active bots, at most Config.Rate a
//     second, each answered by the echo agent; it measures the time from injection to the
//     reply at the simulator and counts messages without a reply (lost) and messages with
//     more than one (doubled);
//  4. the Report.
package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/pgtemporal"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// ProtocolLongPollHold is how long iLink holds an empty getupdates (the simulator's
// default, and the longpolling_timeout_ms iLink usually answers with).
const ProtocolLongPollHold = 35 * time.Second

// Config is one run's shape. Start from [DefaultConfig].
type Config struct {
	// Bots is the number of simulated bots, all enrolled and polled by the one worker.
	Bots int
	// Active is how many of them (a random subset) receive the Messages.
	Active int
	// Messages is the number of user messages injected in the load phase.
	Messages int
	// Rate bounds the injection rate in messages per second (0: as fast as bots are free).
	Rate float64
	// Think is the least time between the reply to a bot's message and that bot's next
	// message (a user reading the answer). A bot's next message always waits for the reply
	// to its previous one: messages of one conversation that arrive before the answer are
	// merged into one delivery by design, which would blur "one reply per message".
	Think time.Duration
	// Idle is the length of the idle measurement.
	Idle time.Duration
	// LongPollHold is the simulator's hold of an empty getupdates.
	LongPollHold time.Duration

	// DatabaseURL is the PostgreSQL server; a fresh schema is created in it and dropped.
	DatabaseURL string
	// TemporalAddress is the Temporal frontend; empty starts the dev server (the pinned
	// temporal CLI) for the run.
	TemporalAddress string
	// Engine is the Temporal server the run starts when TemporalAddress is empty:
	// EngineDev (the dev server of the pinned CLI: SQLite, one connection, one shard) or
	// EnginePostgres (the pinned server release on the local PostgreSQL, package
	// pgtemporal: four shards, the task-queue partitions of Partitions).
	Engine string
	// Partitions is the number of partitions of each task queue on the server the run
	// starts, dev or pg (0, the default: the server's own, four, as every cluster runs). The worker
	// and the engine ceiling keep one request for tasks open per default partition and
	// start windows eagerly, so that no task waits on a partition nobody polls
	// (docs/scale-test.md); 1 measures a single-partition queue.
	Partitions int
	// TemporalNamespace, when set, is used as it is; empty registers a fresh namespace
	// (workflow ids of windows restart at 1 in every fresh schema, so a namespace must not
	// hold an earlier run).
	TemporalNamespace string

	// WorkerBin is the worker command to run; empty builds ./worker of this module.
	WorkerBin string
	// DBMaxConns, when positive, bounds the worker's PostgreSQL pool through
	// ILINKFLOW_DB_MAX_CONNS (the worker must know the --db-max-conns setting).
	DBMaxConns int
	// WorkerEnv adds or overrides worker settings (environment variables).
	WorkerEnv map[string]string

	// ReadyWithin bounds the wait for every bot to hold a long poll.
	ReadyWithin time.Duration
	// AnswerWithin is how long a message may wait for its reply before it counts as lost.
	AnswerWithin time.Duration
	// LoadWithin, when positive, bounds the whole load phase (injection and answers).
	LoadWithin time.Duration
	// Settle is how long the run keeps watching for late (doubled) replies after the last
	// message was answered.
	Settle time.Duration
	// Sample is the period of the RSS, CPU, connection and long-poll samples.
	Sample time.Duration
	// Seed makes the choice of active bots repeatable (0: random).
	Seed uint64

	// Saturate runs the saturation series (see saturate.go) instead of the idle and load
	// phases: SatSteps bots in a closed loop, step after step of SatStepFor each, until the
	// p99 latency passes SatP99 or a message is lost or doubled, for each of SatSystems.
	Saturate   bool
	SatSteps   []int
	SatStepFor time.Duration
	SatP99     time.Duration
	SatSystems []string

	// WorkDir holds the built worker and its log; empty uses a temporary directory that
	// is removed at the end unless the run failed or KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// Temporal engines a run can start (Config.Engine).
const (
	EngineDev      = "dev"
	EnginePostgres = "pg"
)

// DefaultConfig is the full-size run: 1,000 bots on one worker.
func DefaultConfig() Config {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = gateway.DefaultDatabaseURL
	}
	return Config{
		Bots:            1000,
		Active:          100,
		Messages:        1000,
		Rate:            20,
		Think:           2 * time.Second,
		Idle:            2 * time.Minute,
		LongPollHold:    ProtocolLongPollHold,
		DatabaseURL:     url,
		TemporalAddress: os.Getenv("TEMPORAL_ADDRESS"),
		Partitions:      0,
		Engine:          EngineDev,
		ReadyWithin:     5 * time.Minute,
		AnswerWithin:    2 * time.Minute,
		Settle:          5 * time.Second,
		Sample:          time.Second,
		SatSteps:        DefaultSaturationSteps,
		SatStepFor:      15 * time.Second,
		SatP99:          2 * time.Second,
		SatSystems:      Systems,
	}
}

// SaturationConfig is the default saturation run: DefaultConfig with Saturate set, as
// many bots as the largest step, the worker's send gap lowered to 10 ms (so that the
// gateway, not iLink's pacing of a bot's replies, is measured), no idle window and a
// 30-second answer bound.
func SaturationConfig() Config {
	c := DefaultConfig()
	c.Saturate = true
	c.Bots = slices.Max(c.SatSteps)
	c.Active, c.Messages, c.Idle = 0, 0, 0
	c.AnswerWithin = 30 * time.Second
	c.WorkerEnv = map[string]string{"ILINKFLOW_SEND_GAP": "10ms"}
	return c
}

// Validate reports settings that cannot run.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Bots < 1 {
		bad("bots must be at least 1")
	}
	if c.Active < 0 || c.Active > c.Bots {
		bad("active bots (%d) must be within 0..bots (%d)", c.Active, c.Bots)
	}
	if c.Messages < 0 {
		bad("messages must not be negative")
	}
	if c.Messages > 0 && c.Active == 0 {
		bad("messages need at least one active bot")
	}
	if c.Rate < 0 || c.Think < 0 || c.Idle < 0 || c.Settle < 0 || c.LoadWithin < 0 {
		bad("rate, think, idle, settle and load-within must not be negative")
	}
	if c.LongPollHold <= 0 || c.ReadyWithin <= 0 || c.AnswerWithin <= 0 || c.Sample <= 0 {
		bad("long-poll hold, ready-within, answer-within and sample must be positive")
	}
	if c.Partitions < 0 {
		bad("partitions must not be negative")
	}
	if c.Engine != EngineDev && c.Engine != EnginePostgres {
		bad("temporal must be %s or %s, not %q", EngineDev, EnginePostgres, c.Engine)
	}
	if c.DBMaxConns < 0 {
		bad("db-max-conns must not be negative")
	}
	if c.DatabaseURL == "" {
		bad("no database URL")
	}
	if c.Saturate {
		if len(c.SatSteps) == 0 {
			bad("saturation needs at least one step")
		}
		for _, n := range c.SatSteps {
			if n < 1 || n > c.Bots {
				bad("a saturation step of %d bots is outside 1..bots (%d)", n, c.Bots)
			}
		}
		if c.SatStepFor <= 0 || c.SatP99 <= 0 {
			bad("the step length and the p99 bound must be positive")
		}
		if len(c.SatSystems) == 0 {
			bad("saturation needs at least one system")
		}
		for _, s := range c.SatSystems {
			if !slices.Contains(Systems, s) {
				bad("unknown system %q (want %s)", s, strings.Join(Systems, ", "))
			}
		}
	}
	return errors.Join(errs...)
}

// bot is one enrolled bot.
type bot struct {
	id, owner, accountKey string
}

// run is the state of one Run.
type run struct {
	cfg    Config
	rep    *Report
	log    *slog.Logger
	rng    *mrand.Rand
	suffix string // random, names the schema, namespace, task queue and application name

	cleanups []func()

	tc      client.Client
	tcAddr  string
	ns      string
	tq      string
	pool    *pgxpool.Pool
	store   *store.Store
	appName string // the worker's PostgreSQL application_name
	// temporalPID and temporalDBs are the PostgreSQL-backed Temporal server the run
	// started and its databases (0 and none for the dev server).
	temporalPID int
	temporalDBs []string
	workerDB    string // the worker's DATABASE_URL
	keySpec     string
	simURL      string
	ctl         *ilinksim.Control
	bots        []bot
	worker      *workerProc
	sampler     *sampler
	workCfg     gateway.Config // the configuration the worker runs with (for estimates)
	workDir     string
	failed      bool
	satSeq      atomic.Int64 // numbers the saturation run's messages
	dbURL       string       // the run's database: DatabaseURL, or one of its own
}

// Run runs the scale test and returns its report. The report is returned also when the
// run fails (with what was measured until then); the error says why it failed. A run
// whose messages were lost or doubled returns the report and an error wrapping
// ErrRuleBroken.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	r := &run{cfg: cfg, suffix: hex.EncodeToString(raw[:]), rng: mrand.New(mrand.NewPCG(seed, 10))}
	logOut := cfg.Log
	if logOut == nil {
		logOut = io.Discard
	}
	r.log = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r.rep = &Report{Bots: cfg.Bots, ActiveBots: cfg.Active, Messages: cfg.Messages, Seed: seed,
		LongPollHoldMS: ms(cfg.LongPollHold), IdleMS: ms(cfg.Idle), DBMaxConns: cfg.DBMaxConns}
	err := r.execute(ctx)
	r.stopWorker()
	r.summarizeSamples()
	if err != nil {
		r.rep.Failure = err.Error()
	} else {
		err = r.rep.Verdict()
	}
	r.failed = err != nil // keeps the work directory with the worker's log
	r.cleanup()
	return r.rep, err
}

// ErrRuleBroken is wrapped by Run's error when a message was lost or answered twice, or
// the worker used more PostgreSQL connections than its bound.
var ErrRuleBroken = errors.New("loadtest: a rule was broken")

func (r *run) onCleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *run) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

func (r *run) execute(ctx context.Context) error {
	if err := r.setupWorkDir(); err != nil {
		return err
	}
	if err := r.setupTemporal(ctx); err != nil {
		return err
	}
	if err := r.setupDatabase(ctx); err != nil {
		return err
	}
	r.setupSimulator()
	if err := r.enroll(ctx); err != nil {
		return err
	}
	if err := r.startWorker(ctx); err != nil {
		return err
	}
	if err := r.waitReady(ctx); err != nil {
		return err
	}
	if r.cfg.Saturate {
		return r.saturate(ctx)
	}
	win, err := r.idle(ctx)
	if err != nil {
		return err
	}
	lwin, err := r.load(ctx)
	if err != nil {
		return err
	}
	return r.countTemporal(ctx, win, lwin)
}

// setupWorkDir makes the directory of the worker binary and its log.
func (r *run) setupWorkDir() error {
	dir := r.cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "ilinkflow-loadtest-")
		if err != nil {
			return err
		}
		dir = d
		r.onCleanup(func() {
			if r.failed || r.cfg.KeepWorkDir {
				r.log.Info("work directory kept", "dir", dir)
				return
			}
			_ = os.RemoveAll(dir)
		})
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.workDir = dir
	r.rep.WorkDir = dir
	return nil
}

// setupTemporal connects to (or starts) Temporal and registers the run's namespace.
func (r *run) setupTemporal(ctx context.Context) error {
	addr := r.cfg.TemporalAddress
	sdkLog := slog.New(slog.NewTextHandler(logWriter(r.cfg.Log), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if addr == "" && r.cfg.Engine == EnginePostgres {
		r.log.Info("starting the Temporal server on PostgreSQL (" + pgtemporal.ServerVersion + ")")
		srv, err := pgtemporal.New(ctx, pgtemporal.Options{DatabaseURL: r.cfg.DatabaseURL, Namespace: "ilinkflow-loadtest", Logger: sdkLog,
			Dynamic: partitionSettings(r.cfg.Partitions)})
		if err != nil {
			return err
		}
		r.onCleanup(func() {
			if err := srv.Stop(); err != nil {
				r.log.Warn("stop the Temporal server", "error", err)
			}
		})
		addr = srv.HostPort
		r.temporalPID, r.temporalDBs = srv.PID(), srv.Databases()
		parts := "default task-queue partitions"
		if r.cfg.Partitions > 0 {
			parts = fmt.Sprintf("%d task-queue partitions", r.cfg.Partitions)
		}
		r.rep.Temporal = "Temporal server " + pgtemporal.ServerVersion + " on PostgreSQL started by the run at " + addr + " (4 history shards, " + parts + ")"
	} else if addr == "" {
		r.log.Info("starting the Temporal dev server (temporal CLI)")
		srv, err := startDevServer(ctx, sdkLog, r.cfg.Partitions)
		if err != nil {
			return err
		}
		r.onCleanup(func() {
			if err := srv.Stop(); err != nil {
				r.log.Warn("stop the dev server", "error", err)
			}
		})
		addr = srv.HostPort
		r.rep.Temporal = "dev server started by the run at " + addr
		if r.cfg.Partitions > 0 {
			r.rep.Temporal += fmt.Sprintf(" (%d task-queue partition(s))", r.cfg.Partitions)
		}
	} else {
		r.rep.Temporal = addr
	}
	ns, tc, dropNS, err := openNamespace(ctx, addr, r.cfg.TemporalNamespace, "loadtest-"+r.suffix, sdkLog)
	if err != nil {
		return err
	}
	r.onCleanup(func() {
		if dropNS != nil && r.cfg.TemporalAddress != "" { // a dev server of the run goes away anyway
			if err := dropNS(); err != nil {
				r.log.Warn("the run's namespace was not deleted", "namespace", ns, "error", err)
			}
		}
		tc.Close()
	})
	r.tc, r.tcAddr, r.ns, r.tq = tc, addr, ns, "loadtest-"+r.suffix
	r.rep.Namespace = ns
	r.log.Info("Temporal ready", "address", addr, "namespace", ns, "task_queue", r.tq)
	return nil
}

// setupDatabase creates the run's schema, migrates it and opens the run's own pool.
func (r *run) setupDatabase(ctx context.Context) error {
	schema := "loadtest_" + r.suffix
	r.dbURL = r.cfg.DatabaseURL
	if r.cfg.Saturate {
		// A database of its own, so that its transaction count is the run's alone.
		if err := r.createDatabase(ctx, schema); err != nil {
			return err
		}
	}
	admin, err := pgxpool.New(ctx, r.dbURL)
	if err != nil {
		return fmt.Errorf("connect PostgreSQL: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	r.onCleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			r.log.Warn("drop schema", "schema", schema, "error", err)
		}
		admin.Close()
	})
	r.appName = "ilinkflow-loadtest-worker-" + r.suffix
	own, err := withParams(r.dbURL, map[string]string{"search_path": schema, "application_name": "ilinkflow-loadtest-" + r.suffix})
	if err != nil {
		return err
	}
	if r.workerDB, err = withParams(r.dbURL, map[string]string{"search_path": schema, "application_name": r.appName}); err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(own)
	if err != nil {
		return err
	}
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	r.onCleanup(pool.Close)
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		return fmt.Errorf("migrate schema %s: %w", schema, err)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	r.keySpec = "1:" + base64.StdEncoding.EncodeToString(key[:])
	ring, err := sealing.ParseKeyring(r.keySpec)
	if err != nil {
		return err
	}
	st, err := store.New(pool, ring, store.DefaultLimits())
	if err != nil {
		return err
	}
	r.pool, r.store = pool, st
	r.rep.Schema = schema
	return nil
}

// createDatabase creates a database named name on the server of DatabaseURL (dropped at
// the end) and points r.dbURL at it.
func (r *run) createDatabase(ctx context.Context, name string) error {
	admin, err := pgxpool.New(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect PostgreSQL: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return fmt.Errorf("create database %s: %w", name, err)
	}
	r.onCleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			r.log.Warn("drop database", "database", name, "error", err)
		}
		admin.Close()
	})
	url, err := withParams(r.cfg.DatabaseURL, map[string]string{"dbname": name})
	if err != nil {
		return err
	}
	r.dbURL = url
	r.rep.Database = name
	return nil
}

// setupSimulator serves the simulator on loopback.
func (r *run) setupSimulator() {
	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = r.cfg.LongPollHold
	// The sim clock stands still, so the burst detector would see every send of a bot at
	// one instant; the worker's own pacing (--send-gap) is what is measured.
	cfg.ThrottleBurst = 0
	sim := ilinksim.New(cfg)
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second, ConnContext: ilinksim.ConnContext}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("loadtest: listen on loopback: %v", err)) // no loopback: nothing can run
	}
	go func() { _ = srv.Serve(ln) }()
	r.onCleanup(func() { _ = srv.Close() })
	r.simURL = "http://" + ln.Addr().String()
	r.ctl = ilinksim.NewControl(r.simURL, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	r.log.Info("simulator serving", "url", r.simURL, "long_poll_hold", r.cfg.LongPollHold)
}

// maxAccounts is the worker's --max-accounts for the run (its default when enough).
func (r *run) maxAccounts() int { return max(r.cfg.Bots, gateway.DefaultConfig().MaxAccounts) }

// enroll creates the bots at the simulator and enrolls each in the store as a confirmed
// QR enrollment does: a login offer, its scan, then ConfirmEnrollment (the account at
// generation 1 with its sealed bot token, the audit row, the offer deleted). The worker's
// start-up reconcile then starts their pollers, as the Enrollment workflow would have.
func (r *run) enroll(ctx context.Context) error {
	began := time.Now()
	r.bots = make([]bot, r.cfg.Bots)
	jobs := make(chan int)
	errs := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(16, r.cfg.Bots) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				b, err := r.enrollOne(ctx, i)
				if err != nil {
					select {
					case errs <- fmt.Errorf("enroll bot %d: %w", i+1, err):
					default:
					}
					cancel()
					return
				}
				r.bots[i] = b
			}
		}()
	}
feed:
	for i := range r.cfg.Bots {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.rep.EnrollMS = ms(time.Since(began))
	r.log.Info("bots enrolled", "bots", r.cfg.Bots, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

func (r *run) enrollOne(ctx context.Context, i int) (bot, error) {
	sb, err := r.ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		return bot{}, err
	}
	return r.enrollInStore(ctx, r.store, "qo_loadtest_"+r.suffix+"_"+strconv.Itoa(i+1), sb.BotID, sb.Owner, sb.BaseURL, sb.Token)
}

// enrollInStore enrolls a bot in st as a confirmed QR enrollment leaves it: a login
// offer, its scan, then ConfirmEnrollment (the account at generation 1 with its sealed
// bot token, the audit row, the offer deleted).
func (r *run) enrollInStore(ctx context.Context, st *store.Store, offer, botID, owner, baseURL, token string) (bot, error) {
	now := time.Now()
	if _, err := st.CreateLoginOffer(ctx, now, offer, "loadtest", now.Add(10*time.Minute)); err != nil {
		return bot{}, err
	}
	if err := st.MarkOfferScanned(ctx, now, offer); err != nil {
		return bot{}, err
	}
	res, err := st.ConfirmEnrollment(ctx, now, store.ConfirmInput{
		OfferID: offer, AccountGeneration: 1, MaxAccounts: r.maxAccounts(),
		ProviderAccountID: botID, OwnerPeerID: owner, BaseURL: baseURL, BotToken: sealing.NewSecret(token),
	})
	if err != nil {
		return bot{}, err
	}
	if !res.Registered || res.Account.Status != vocab.AccountActive {
		return bot{}, fmt.Errorf("enrollment of %s ended %+v", botID, res)
	}
	return bot{id: botID, owner: owner, accountKey: res.Account.AccountKey}, nil
}

// waitReady waits until every bot holds a long poll at the simulator.
func (r *run) waitReady(ctx context.Context) error {
	began := r.worker.started
	deadline := time.Now().Add(r.cfg.ReadyWithin)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var st ilinksim.Stats
	for {
		var err error
		st, err = r.ctl.Stats(ctx)
		if err != nil {
			return err
		}
		if st.BotsHeld >= r.cfg.Bots {
			break
		}
		if time.Now().After(deadline) {
			r.rep.BotsHeldAtReady = st.BotsHeld
			conns, _ := r.workerConns(ctx)
			return fmt.Errorf("not ready: after %v only %d of %d bots hold a long poll (worker reconciled: %v; worker PostgreSQL connections now: %d, bound %d)",
				r.cfg.ReadyWithin, st.BotsHeld, r.cfg.Bots, r.worker.reconciled(), conns, r.rep.PGConnBound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.worker.exited:
			return r.worker.exitError()
		case <-tick.C:
		}
	}
	r.rep.Ready = true
	r.rep.BotsHeldAtReady = st.BotsHeld
	r.rep.ReadyMS = ms(time.Since(began))
	r.log.Info("every bot holds a long poll", "bots", st.BotsHeld, "held_getupdates", st.HeldGetUpdates,
		"after_worker_start", time.Since(began).Round(time.Millisecond))
	return nil
}

// window is a measured interval with the worker's CPU time and metrics at both ends.
type window struct {
	from, to       time.Time
	cpuFrom, cpuTo float64 // seconds of CPU
	metFrom, metTo workerMetrics
	metricsOK      bool
}

func (w window) seconds() float64 { return w.to.Sub(w.from).Seconds() }

// begin marks the start of a measured window.
func (r *run) begin(ctx context.Context, phase string) window {
	r.sampler.setPhase(phase)
	w := window{from: time.Now()}
	w.cpuFrom, _ = procCPUSeconds(r.worker.pid)
	w.metFrom, w.metricsOK = r.worker.scrape(ctx)
	return w
}

// end marks the end of a measured window.
func (r *run) end(ctx context.Context, w *window) {
	w.to = time.Now()
	w.cpuTo, _ = procCPUSeconds(r.worker.pid)
	var ok bool
	w.metTo, ok = r.worker.scrape(ctx)
	w.metricsOK = w.metricsOK && ok
	r.sampler.setPhase("")
}

// idle measures the idle worker for cfg.Idle.
func (r *run) idle(ctx context.Context) (window, error) {
	r.log.Info("idle measurement", "for", r.cfg.Idle)
	w := r.begin(ctx, phaseIdle)
	tm := time.NewTimer(r.cfg.Idle) // the measurement's length, not a wait for a condition
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-r.worker.exited:
		return w, r.worker.exitError()
	case <-tm.C:
	}
	r.end(ctx, &w)
	r.rep.IdleWindowS = w.seconds()
	r.rep.IdleCPUPercent = cpuPercent(w)
	return w, nil
}

func cpuPercent(w window) float64 {
	if s := w.seconds(); s > 0 {
		return 100 * (w.cpuTo - w.cpuFrom) / s
	}
	return 0
}

// workerConns counts the worker's PostgreSQL connections (by its application_name).
func (r *run) workerConns(ctx context.Context) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", r.appName).Scan(&n)
	return n, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// logWriter is w, or io.Discard when nil.
func logWriter(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// workerLogPath is where the worker's output goes.
func (r *run) workerLogPath() string { return filepath.Join(r.workDir, "worker.log") }
