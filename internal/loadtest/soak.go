package loadtest

// The soak: the store at a million messages.
//
// RunSoak pushes SoakConfig.Messages inbound messages with their replies through the
// production store path (the store ceiling's exchanges, storeceiling.go: the page commit,
// the hand-off, the reply's reserve, start and completion, the verdict) on
// SoakConfig.Bots bots, SoakConfig.Concurrency exchanges at once (the worker's pool bound),
// as fast as the store takes them, with the retention purge running, on a fresh schema of
// its own. No Temporal, no worker process, no iLink simulator.
//
// The store's time (the now every store call is passed) is a simulated clock: it starts at
// the wall clock and advances by a day every SoakConfig.DayMessages messages (each page
// moves it on when it is claimed), so that the retention horizons are passed within the
// run. A bot's window closes (superseded) when the bot's next page is committed, Bots
// pages later, which makes its content due SoakConfig.Retention.Content after that and
// its rows Retention.Rows after that. Every SoakConfig.PurgeEvery of simulated time the
// production purge runs in its own goroutine (activity.PurgeExpired: every class in
// bounded batches of SoakConfig.PurgeLimit until one purges fewer), while the exchanges go
// on. A run still going when the next one is due holds new pages until it is done
// (SoakConfig.PurgeGate: the soak goes at the pace the store keeps with its purge), or,
// without the gate, makes that next run skip (the schedule's overlap policy).
//
// Every SoakConfig.Interval messages it reports the page commit's and the reply send's
// p50 and p99 over the interval, the schema's table and index bytes (and its largest
// relations), dead tuples and vacuum runs (pg_stat_user_tables), what the purge removed,
// the messages still stored and bytes per message at rest. At the end it runs the purge
// once more at the final simulated time and checks that nothing was lost or doubled (the
// rows still stored plus the rows purged are every message, each handled with one reply
// sent) and that nothing past a horizon was left.
//
// PostgreSQL's autovacuum is what keeps a purged table from growing. A server with it off
// (a test server) would grow whatever the purge does, so the soak then stands in for the
// daemon when SoakConfig.VacuumStandIn is set (soak_vacuum.go), and says so.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// SoakConfig is one soak's shape. Start from [DefaultSoakConfig].
type SoakConfig struct {
	// Messages is how many inbound messages are carried through the store.
	Messages int
	// Bots is how many bots they are spread over (round robin, a page at a time).
	Bots int
	// Concurrency is how many exchanges run at once.
	Concurrency int
	// PageMessages is how many of a bot's messages one page carries (a poll that finds
	// several queued commits them together; they merge into one delivery and one reply).
	// One-message pages run at about a third of the pace of four-message ones, too slow
	// for a million messages in well under an hour on a 2-core machine.
	PageMessages int
	// Interval is how many messages each line of the report covers (a multiple of
	// PageMessages).
	Interval int
	// DayMessages is how many messages make a simulated day.
	DayMessages int
	// Retention is the purge's policy, in simulated time (content and rows must be set).
	Retention store.RetentionPolicy
	// PurgeEvery is the purge's period in simulated time (the schedule's
	// --retention-every); PurgeLimit bounds its batches (0: the store's default).
	PurgeEvery time.Duration
	PurgeLimit int
	// PurgeGate holds new pages while the purge is a whole period behind (its run due at
	// an instant still going when the simulated clock reaches the next one): the soak then
	// goes at the pace the store sustains with its purge keeping up, and the wait is
	// reported. Off, pages go on and the runs that come due meanwhile are skipped, as the
	// schedule's overlap policy skips them: the purge falls behind.
	PurgeGate bool
	// P99Growth bounds how much the last interval's commit and send p99 may exceed the
	// first's (0.25: by 25 %).
	P99Growth float64
	// TableGrowth bounds how much the table bytes may grow once the rows horizon is
	// reached (from the first report a whole interval past it to the last).
	TableGrowth float64
	// VacuumStandIn vacuums and analyzes the schema's tables by the autovacuum daemon's
	// thresholds and cost limits when the server's autovacuum is off.
	VacuumStandIn bool
	// VacuumNaptime is the stand-in's period (0: the server's autovacuum_naptime).
	VacuumNaptime time.Duration

	// DatabaseURL is the PostgreSQL server; a fresh schema is created in it and dropped
	// at the end unless Keep.
	DatabaseURL string
	Keep        bool
	// DBMaxConns bounds the store's pool (the worker's default bound).
	DBMaxConns int
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// DefaultSoakConfig is the full soak: a million messages on 1,000 bots in pages of four,
// 16 pages at once, a report every 100,000; a simulated day every 100,000 messages,
// content kept 2 days and rows 4, the purge every simulated hour in batches of the
// store's default.
func DefaultSoakConfig() SoakConfig {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = gateway.DefaultDatabaseURL
	}
	return SoakConfig{
		Messages:      1_000_000,
		Bots:          1000,
		Concurrency:   gateway.DefaultDBMaxConns,
		PageMessages:  4,
		Interval:      100_000,
		DayMessages:   100_000,
		Retention:     store.RetentionPolicy{Content: 48 * time.Hour, Rows: 96 * time.Hour},
		PurgeEvery:    time.Hour,
		PurgeLimit:    store.DefaultPurgeLimit,
		PurgeGate:     true,
		P99Growth:     0.25,
		TableGrowth:   0.10,
		VacuumStandIn: true,
		DatabaseURL:   url,
		DBMaxConns:    gateway.DefaultDBMaxConns,
	}
}

// Validate reports settings that cannot run.
func (c SoakConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Messages < 1 || c.Bots < 1 || c.Concurrency < 1 || c.DayMessages < 1 {
		bad("messages, bots, concurrency and messages per simulated day must be at least 1")
	}
	if c.PageMessages < 1 || c.PageMessages > 100 {
		bad("messages per page must be within 1..100")
	}
	if c.Interval < 1 || c.PageMessages > 0 && c.Interval%c.PageMessages != 0 {
		bad("the report interval (%d) must be a positive multiple of the messages per page (%d)", c.Interval, c.PageMessages)
	}
	if err := c.Retention.Validate(); err != nil {
		bad("retention: %w", err)
	}
	if c.Retention.Content <= 0 || c.Retention.Rows <= 0 {
		bad("the soak needs both a content and a rows horizon")
	}
	if c.PurgeEvery <= 0 || c.PurgeEvery > 366*simDay {
		bad("the purge period must be positive, and at most a year")
	}
	if c.DayMessages > 0 && c.Messages/c.DayMessages > 100*366 {
		bad("the soak must not span more than a hundred simulated years (messages ÷ messages per day)")
	}
	if c.PurgeLimit < 0 || c.PurgeLimit > store.MaxPurgeLimit {
		bad("the purge limit must be within 0..%d", store.MaxPurgeLimit)
	}
	if c.P99Growth < 0 || c.TableGrowth < 0 || c.VacuumNaptime < 0 {
		bad("the growth bounds and the vacuum naptime must not be negative")
	}
	if c.DBMaxConns < 1 {
		bad("the store's pool needs at least one connection")
	}
	if c.DatabaseURL == "" {
		bad("no database URL")
	}
	return errors.Join(errs...)
}

// simDay is the length of a simulated day.
const simDay = 24 * time.Hour

// soakBaseURL is the bots' iLink base URL: nothing listens there, and the soak calls no
// iLink.
const soakBaseURL = "http://127.0.0.1:9"

// soakClock is the store's simulated time: start plus a fixed step per message claimed.
type soakClock struct {
	start time.Time
	step  time.Duration
	// claimed counts the messages whose pages were claimed (it may pass the run's
	// messages by the pages claimed after the last).
	claimed atomic.Int64
	limit   int64
}

func (c *soakClock) at(messages int64) time.Time {
	return c.start.Add(time.Duration(min(messages, c.limit)) * c.step)
}

func (c *soakClock) now() time.Time { return c.at(c.claimed.Load()) }

// soakInterval gathers one report line while its messages are carried.
type soakInterval struct {
	mu       sync.Mutex
	size     int // messages in the interval
	done     int
	commits  []time.Duration
	sends    []time.Duration
	lastDone time.Time
	// waited sums the exchanges' waits for the purge before the interval's pages.
	waited time.Duration
}

// soak is one RunSoak.
type soak struct {
	cfg   SoakConfig
	r     *run // the suffix, log, cleanups and enrollment of the run
	rep   *SoakReport
	clock *soakClock

	admin  *pgxpool.Pool // stats and the stand-in's vacuums, outside the store's pool
	pool   *pgxpool.Pool // the store's
	st     *store.Store
	schema string

	intervals []*soakInterval
	completed chan int // interval indexes as they complete

	purger    *activity.Activities
	nextPurge atomic.Int64 // the simulated instant (unix ns) of the purge's next run
	kick      chan struct{}
	// gate is closed (and replaced) each time nextPurge moves on: pages held by the purge
	// gate look again.
	gateMu sync.Mutex
	gate   chan struct{}

	mu        sync.Mutex
	purged    map[string]int // by class, in all
	purgeRuns int
	skipped   int           // purge runs skipped: the previous one was still going
	purgeMax  time.Duration // the longest purge run since the last snapshot
	firstErr  error
	lost      int

	standIn *vacuumStandIn
}

// RunSoak runs the soak (see the file's comment) and returns its report, also when it
// fails (with what was measured until then). Its error wraps ErrRuleBroken when a message
// was lost or doubled or the purge left something past its horizon, and
// ErrSoakBoundMissed when a p99 or the table bytes grew past their bound.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	r := &run{cfg: Config{Bots: cfg.Bots}, suffix: hex.EncodeToString(raw[:])}
	r.log = slog.New(slog.NewTextHandler(logWriter(cfg.Log), &slog.HandlerOptions{Level: slog.LevelInfo}))
	sk := &soak{cfg: cfg, r: r, purged: map[string]int{}, kick: make(chan struct{}, 1), gate: make(chan struct{})}
	sk.rep = newSoakReport(cfg)
	err := sk.execute(ctx)
	r.cleanup()
	sk.finishReport()
	if err != nil {
		sk.rep.Failure = err.Error()
		return sk.rep, err
	}
	return sk.rep, sk.rep.Verdict()
}

func (sk *soak) execute(ctx context.Context) error {
	if err := sk.setupDatabase(ctx); err != nil {
		return err
	}
	if err := sk.readServer(ctx); err != nil {
		return err
	}
	began := time.Now()
	bots, err := sk.enroll(ctx)
	if err != nil {
		return err
	}
	sk.r.log.Info("soak: bots enrolled", "bots", len(bots), "took", time.Since(began).Round(time.Millisecond))
	// The system renews its bots' leases until its context ends; they are released before
	// the pool closes.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	v, err := newStoreSystem(sctx, sk.st, bots)
	if err != nil {
		stop()
		return err
	}
	sys := v.(*storeSystem)
	sk.r.onCleanup(func() {
		stop()
		<-sys.closed()
	})
	sk.clock = &soakClock{start: time.Now().Truncate(time.Second), step: simDay / time.Duration(sk.cfg.DayMessages),
		limit: int64(sk.cfg.Messages)}
	sys.clock = sk.clock.now
	sk.purger = &activity.Activities{Store: sk.st, Config: activity.Config{Retention: sk.cfg.Retention},
		Logger: slog.New(slog.NewTextHandler(logWriter(sk.cfg.Log), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	sk.nextPurge.Store(sk.clock.start.Add(sk.cfg.PurgeEvery).UnixNano())
	return sk.drive(ctx, sys)
}

// setupDatabase creates the soak's schema, migrates it and opens the store on a pool of
// the worker's bound; the schema is dropped at the end unless Keep.
func (sk *soak) setupDatabase(ctx context.Context) error {
	sk.schema = "loadtest_soak_" + sk.r.suffix
	sk.rep.Schema = sk.schema
	admin, err := pgxpool.New(ctx, sk.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect PostgreSQL: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+sk.schema); err != nil {
		admin.Close()
		return fmt.Errorf("create schema %s: %w", sk.schema, err)
	}
	sk.admin = admin
	sk.r.onCleanup(func() {
		defer admin.Close()
		if sk.cfg.Keep {
			sk.r.log.Info("soak: schema kept", "schema", sk.schema)
			return
		}
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+sk.schema+" CASCADE"); err != nil {
			sk.r.log.Warn("drop schema", "schema", sk.schema, "error", err)
		}
	})
	url, err := withParams(sk.cfg.DatabaseURL, map[string]string{"search_path": sk.schema,
		"application_name": "ilinkflow-loadtest-soak-" + sk.r.suffix})
	if err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("the database URL: %w", err)
	}
	pc.MaxConns = int32(sk.cfg.DBMaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("connect PostgreSQL: %w", err)
	}
	sk.r.onCleanup(pool.Close)
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		return fmt.Errorf("migrate schema %s: %w", sk.schema, err)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	ring, err := sealing.ParseKeyring("1:" + base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		return err
	}
	if sk.st, err = store.New(pool, ring, store.DefaultLimits()); err != nil {
		return err
	}
	sk.pool = pool
	return nil
}

// enroll enrolls the bots in the store as a confirmed QR enrollment leaves them,
// Concurrency at a time.
func (sk *soak) enroll(ctx context.Context) ([]bot, error) {
	bots := make([]bot, sk.cfg.Bots)
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range min(sk.cfg.Concurrency, sk.cfg.Bots) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bots) || ctx.Err() != nil {
					return
				}
				id := fmt.Sprintf("soak-%s-%d", sk.r.suffix, i+1)
				b, err := sk.r.enrollInStore(ctx, sk.st, "qo_soak_"+sk.r.suffix+"_"+strconv.Itoa(i+1),
					id, "owner-of-"+id, soakBaseURL, "token-of-"+id)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("enroll bot %d: %w", i+1, err)
					}
					mu.Unlock()
					next.Store(int64(len(bots))) // the others stop
					return
				}
				bots[i] = b
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return bots, ctx.Err()
}

// drive carries the messages, Concurrency pages at once, while the purge (and the vacuum
// stand-in) run beside, and reports each interval as it completes; then the last purge
// and the checks at rest.
func (sk *soak) drive(ctx context.Context, sys *storeSystem) error {
	n := (sk.cfg.Messages + sk.cfg.Interval - 1) / sk.cfg.Interval
	sk.intervals = make([]*soakInterval, n)
	for i := range sk.intervals {
		size := min(sk.cfg.Interval, sk.cfg.Messages-i*sk.cfg.Interval)
		pages := (size + sk.cfg.PageMessages - 1) / sk.cfg.PageMessages
		sk.intervals[i] = &soakInterval{size: size, commits: make([]time.Duration, 0, pages), sends: make([]time.Duration, 0, pages)}
	}
	sk.completed = make(chan int, n)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	purgeDone := make(chan struct{})
	go sk.purgeLoop(runCtx, cancel, purgeDone)
	var standInDone chan struct{}
	if sk.standIn != nil {
		standInDone = make(chan struct{})
		go func() {
			defer close(standInDone)
			sk.standIn.run(runCtx)
		}()
	}
	reported := make(chan error, 1)
	began := time.Now()
	go func() { reported <- sk.reportIntervals(runCtx, began) }()

	var wg sync.WaitGroup
	for range sk.cfg.Concurrency {
		wg.Go(func() {
			for runCtx.Err() == nil {
				first, count, waited, ok := sk.claim(runCtx)
				if !ok {
					return
				}
				b := (first - 1) / sk.cfg.PageMessages % sk.cfg.Bots
				t, err := sys.exchangePage(runCtx, b, first, count)
				if err != nil {
					if runCtx.Err() == nil {
						sk.fail(fmt.Errorf("soak: %w", err), count)
						cancel()
					}
					return
				}
				sk.record(first, count, t, waited)
			}
		})
	}
	wg.Wait()
	sk.rep.Seconds = time.Since(began).Seconds()
	if err := ctx.Err(); err != nil {
		sk.fail(fmt.Errorf("soak interrupted: %w", err), 0)
	}
	close(sk.completed)
	if err := <-reported; err != nil {
		sk.fail(err, 0)
	}
	close(sk.kick)
	<-purgeDone
	cancel()
	if standInDone != nil {
		<-standInDone
	}
	sk.rep.Answered = sk.answered()
	sk.rep.Doubled = sys.doubled()
	if err := sk.err(); err != nil {
		return err
	}
	return sk.atRest(ctx)
}

// claim takes the next page's messages: the first one's number (from 1) and how many,
// after the wait for the purge gate, if any. The simulated clock moves on with it, and a
// purge due by then is started. It returns false when no message is left or ctx ended.
func (sk *soak) claim(ctx context.Context) (first, count int, waited time.Duration, ok bool) {
	k := int64(sk.cfg.PageMessages)
	if sk.cfg.PurgeGate {
		var began time.Time
		for sk.clock.claimed.Load() < int64(sk.cfg.Messages) {
			sk.gateMu.Lock()
			moved := sk.gate
			sk.gateMu.Unlock()
			held := sk.nextPurge.Load() + sk.cfg.PurgeEvery.Nanoseconds()
			if sk.clock.at(sk.clock.claimed.Load()+k).UnixNano() < held {
				break
			}
			sk.kickPurge()
			if began.IsZero() {
				began = time.Now()
			}
			select {
			case <-moved:
			case <-ctx.Done():
				return 0, 0, 0, false
			}
		}
		if !began.IsZero() {
			waited = time.Since(began)
		}
	}
	end := sk.clock.claimed.Add(k)
	first = int(end - k + 1)
	if first > sk.cfg.Messages {
		return 0, 0, 0, false
	}
	if sk.clock.at(end).UnixNano() >= sk.nextPurge.Load() {
		sk.kickPurge()
	}
	return first, min(int(k), sk.cfg.Messages-first+1), waited, true
}

// kickPurge tells the purge loop a run may be due.
func (sk *soak) kickPurge() {
	select {
	case sk.kick <- struct{}{}:
	default: // already kicked
	}
}

// record counts a page's messages in their interval, with its timings and its wait for
// the purge gate.
func (sk *soak) record(first, count int, t exchangeTimes, waited time.Duration) {
	i := (first - 1) / sk.cfg.Interval
	iv := sk.intervals[i]
	iv.mu.Lock()
	iv.commits = append(iv.commits, t.commit)
	iv.sends = append(iv.sends, t.send)
	iv.done += count
	iv.waited += waited
	iv.lastDone = time.Now()
	complete := iv.done == iv.size
	iv.mu.Unlock()
	if complete {
		sk.completed <- i
	}
}

// fail records the run's first error and the messages of a page that failed.
func (sk *soak) fail(err error, lost int) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.firstErr == nil {
		sk.firstErr = err
	}
	sk.lost += lost
}

func (sk *soak) err() error {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	return sk.firstErr
}

// answered counts the messages whose pages were answered.
func (sk *soak) answered() int {
	n := 0
	for _, iv := range sk.intervals {
		iv.mu.Lock()
		n += iv.done
		iv.mu.Unlock()
	}
	return n
}

// purgeLoop runs the production purge (PurgeExpired) each time claim finds one due, at
// the simulated time of its start, until kick is closed; it fails the run (cancel) when
// a purge fails.
func (sk *soak) purgeLoop(ctx context.Context, cancel context.CancelFunc, done chan<- struct{}) {
	defer close(done)
	every := sk.cfg.PurgeEvery.Nanoseconds()
	for range sk.kick {
		now := sk.clock.now()
		due := sk.nextPurge.Load()
		if now.UnixNano() < due || ctx.Err() != nil {
			continue
		}
		began := time.Now()
		_, err := sk.purge(ctx, now)
		took := time.Since(began)
		if err != nil {
			if ctx.Err() == nil {
				sk.fail(err, 0)
				cancel()
			}
			continue
		}
		// Without the gate, the instants passed meanwhile are skipped (the schedule's
		// overlap policy); with it, the clock stood still a period past the run's instant,
		// and the next run is due at once if the clock reached it.
		at := sk.clock.now().UnixNano()
		next := due + every
		sk.mu.Lock()
		for ; next <= at && !sk.cfg.PurgeGate; next += every {
			sk.skipped++
		}
		sk.purgeMax = max(sk.purgeMax, took)
		sk.mu.Unlock()
		sk.nextPurge.Store(next)
		sk.gateMu.Lock()
		close(sk.gate)
		sk.gate = make(chan struct{})
		sk.gateMu.Unlock()
	}
}

// purge runs PurgeExpired once at the simulated time now and counts what it purged.
func (sk *soak) purge(ctx context.Context, now time.Time) (activities.PurgeOutput, error) {
	out, err := sk.purger.PurgeExpired(ctx, activities.PurgeInput{Now: now, Limit: sk.cfg.PurgeLimit})
	sk.mu.Lock()
	defer sk.mu.Unlock()
	for class, n := range out.Purged {
		sk.purged[class] += n
	}
	if err != nil {
		return out, fmt.Errorf("soak: purge at %s: %w", now.Format(time.RFC3339), err)
	}
	sk.purgeRuns++
	return out, nil
}

// purgedSoFar is what the purge removed so far: content erased and rows deleted, and runs;
// and the longest run since the last call.
func (sk *soak) purgedSoFar() (content, rows, runs int, longest time.Duration) {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	longest, sk.purgeMax = sk.purgeMax, 0
	return sk.purged[store.RetentionContent], sk.purged[store.RetentionRows], sk.purgeRuns, longest
}

// reportIntervals makes each interval's report line once it and those before it are
// complete, until completed is closed.
func (sk *soak) reportIntervals(ctx context.Context, began time.Time) error {
	ready := map[int]bool{}
	next := 0
	prevEnd := began
	var prev soakSnapshot
	for i := range sk.completed {
		ready[i] = true
		for ready[next] {
			iv := sk.intervals[next]
			iv.mu.Lock()
			end := maxTime(iv.lastDone, prevEnd)
			commits, sends, waited := iv.commits, iv.sends, iv.waited
			iv.mu.Unlock()
			snap, err := sk.snapshot(ctx)
			if err != nil {
				return fmt.Errorf("soak: read the schema's sizes after %d messages: %w", (next+1)*sk.cfg.Interval, err)
			}
			upto := next*sk.cfg.Interval + iv.size
			line := sk.line(upto, iv.size, end.Sub(prevEnd), commits, sends, snap, prev)
			line.PurgeWaitSeconds = waited.Seconds() / float64(sk.cfg.Concurrency)
			sk.mu.Lock()
			sk.rep.Intervals = append(sk.rep.Intervals, line)
			sk.mu.Unlock()
			sk.r.log.Info("soak: interval", "messages", upto, "per_second", fmt.Sprintf("%.0f", line.PerSecond),
				"commit_p99_ms", fmt.Sprintf("%.1f", line.CommitP99MS), "send_p99_ms", fmt.Sprintf("%.1f", line.SendP99MS),
				"table_mb", fmt.Sprintf("%.1f", mb(line.TableBytes)), "total_mb", fmt.Sprintf("%.1f", mb(line.TotalBytes)),
				"live_messages", line.LiveMessages, "dead_tuples", line.DeadTuples,
				"purged_content", line.PurgedContent, "purged_rows", line.PurgedRows,
				"content_due", line.ContentDue, "rows_due", line.RowsDue,
				"purge_wait_s", fmt.Sprintf("%.1f", line.PurgeWaitSeconds))
			prev, prevEnd = snap, end
			delete(ready, next)
			next++
		}
	}
	return nil
}

// line makes one interval's report line from its timings and the snapshot at its end.
func (sk *soak) line(upto, size int, took time.Duration, commits, sends []time.Duration, snap, prev soakSnapshot) SoakInterval {
	sortDurations(commits)
	sortDurations(sends)
	l := SoakInterval{
		Messages: upto, Seconds: took.Seconds(),
		SimDays:     float64(upto) / float64(sk.cfg.DayMessages),
		CommitP50MS: ms(percentile(commits, 50)), CommitP99MS: ms(percentile(commits, 99)),
		SendP50MS: ms(percentile(sends, 50)), SendP99MS: ms(percentile(sends, 99)),
		TableBytes: snap.tableBytes, IndexBytes: snap.indexBytes, TotalBytes: snap.tableBytes + snap.indexBytes,
		Largest:    snap.largest,
		DeadTuples: snap.deadTuples, Autovacuums: snap.autovacuums, Vacuums: snap.vacuums,
		Autoanalyzes: snap.autoanalyzes, Analyzes: snap.analyzes,
		PurgeRuns:       snap.purgeRuns - prev.purgeRuns,
		PurgeMaxSeconds: snap.purgeMax.Seconds(),
		ContentDue:      snap.contentDue, RowsDue: snap.rowsDue,
		PurgedContent: snap.purgedContent - prev.purgedContent, PurgedRows: snap.purgedRows - prev.purgedRows,
		LiveMessages: snap.liveMessages, ContentKept: snap.contentKept,
	}
	if l.Seconds > 0 {
		l.PerSecond = float64(size) / l.Seconds
	}
	l.BytesPerMessage = float64(l.TotalBytes) / float64(upto)
	if l.LiveMessages > 0 {
		l.BytesPerLiveMessage = float64(l.TotalBytes) / float64(l.LiveMessages)
	}
	return l
}

// atRest runs the purge at the final simulated time until it is done, as the schedule's
// next run would, then checks the schema: every message is stored or was purged once,
// each stored one handled (or merged) with one reply sent, and nothing is left past a
// horizon.
func (sk *soak) atRest(ctx context.Context) error {
	final := sk.clock.at(int64(sk.cfg.Messages))
	for {
		out, err := sk.purge(ctx, final)
		if err != nil {
			return err
		}
		if out.Done {
			break
		}
	}
	q := func(sql string) (int64, error) {
		var n int64
		err := sk.admin.QueryRow(ctx, sql).Scan(&n)
		return n, err
	}
	rep := sk.rep
	var err error
	if rep.StoredRows, err = q(`SELECT count(*) FROM ` + sk.schema + `.inbound_messages`); err != nil {
		return fmt.Errorf("soak: count the messages at rest: %w", err)
	}
	if rep.Unanswered, err = q(`SELECT count(*) FROM ` + sk.schema + `.inbound_messages WHERE status NOT IN ('handled', 'absorbed')`); err != nil {
		return fmt.Errorf("soak: count the messages not answered: %w", err)
	}
	if rep.DoubledAtRest, err = q(`SELECT count(*) FROM (SELECT 1 FROM ` + sk.schema + `.send_attempts WHERE status = 'sent'
		GROUP BY source_message_key HAVING count(*) > 1) AS d`); err != nil {
		return fmt.Errorf("soak: count the messages with more than one reply: %w", err)
	}
	if rep.OverdueContent, rep.OverdueRows, err = sk.due(ctx, final); err != nil {
		return err
	}
	return nil
}

// due counts the messages due for the purge at the simulated time now and not purged
// yet: content due for erasure, and rows due for deletion. It selects what the purge
// selects (queries/retention.sql), counted independently.
func (sk *soak) due(ctx context.Context, now time.Time) (content, rows int64, err error) {
	const due = `SELECT count(*) FROM %s.inbound_messages AS m
		LEFT JOIN %s.reply_windows AS w ON w.source_message_key = m.message_key
		WHERE m.erased_at IS %s NULL AND m.created_at < $1 AND CASE WHEN w.reply_window_id IS NULL THEN m.updated_at < $1
			ELSE w.state <> 'open' AND w.updated_at < $1 END`
	if err := sk.admin.QueryRow(ctx, fmt.Sprintf(due, sk.schema, sk.schema, ""), now.Add(-sk.cfg.Retention.Content)).Scan(&content); err != nil {
		return 0, 0, fmt.Errorf("soak: count the content past its horizon: %w", err)
	}
	if err := sk.admin.QueryRow(ctx, fmt.Sprintf(due, sk.schema, sk.schema, "NOT"), now.Add(-sk.cfg.Retention.Rows)).Scan(&rows); err != nil {
		return 0, 0, fmt.Errorf("soak: count the rows past their horizon: %w", err)
	}
	return content, rows, nil
}

// finishReport fills the report's totals and verdicts from what was measured.
func (sk *soak) finishReport() {
	sk.mu.Lock()
	rep := sk.rep
	rep.Lost = sk.lost
	rep.Purged = map[string]int{}
	for _, class := range store.RetentionClasses {
		rep.Purged[class] = sk.purged[class]
	}
	rep.PurgeRuns, rep.PurgeSkipped = sk.purgeRuns, sk.skipped
	sk.mu.Unlock()
	if sk.standIn != nil {
		var err error
		rep.StandInVacuums, rep.StandInAnalyzes, err = sk.standIn.counts()
		if err != nil {
			rep.StandInError = err.Error()
		}
	}
	rep.finish()
}
