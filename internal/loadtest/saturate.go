package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The systems a saturation run drives, in the order it drives them.
const (
	SystemILinkflow = "ilinkflow" // the worker process, through Temporal and PostgreSQL
	SystemEngine    = "engine"    // the engine's ceiling: the same Temporal shape, no database
	SystemStore     = "store"     // the store's ceiling: the same store calls, no Temporal
)

// Systems lists the saturation run's systems in run order.
var Systems = []string{SystemILinkflow, SystemEngine, SystemStore}

// DefaultSaturationSteps are the bots in the closed loop, step by step.
var DefaultSaturationSteps = []int{2, 4, 8, 16, 32, 64, 128}

// satSystem is what the saturation loop drives.
type satSystem interface {
	// exchange carries message n of bot b (0 <= b < bots) to its reply: it returns when the
	// reply was sent, or with an error (ctx ended, or the system refused).
	exchange(ctx context.Context, b, n int) error
	// doubled counts messages that got more than one reply so far.
	doubled() int
}

// satTimed is a satSystem that measures each exchange's latency itself (from the message
// reaching the system to its reply), rather than the loop timing the call.
type satTimed interface {
	exchangeTimed(ctx context.Context, b, n int) (time.Duration, error)
}

// SatStep is one step of a saturation series: Bots bots in a closed loop for the step's
// length, each sending its next message as soon as the reply to the previous one arrived.
type SatStep struct {
	Bots     int `json:"bots"`
	Answered int `json:"answered"`
	// Lost counts messages without a reply within the run's answer bound; Doubled those
	// with more than one reply (seen up to the end of the step).
	Lost    int `json:"lost"`
	Doubled int `json:"doubled"`
	// Seconds runs from the step's first message to its last reply (no message is started
	// after the step's length; the ones under way finish).
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"` // Answered / Seconds
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	MaxMS     float64 `json:"max_ms"`
	// CPUSeconds is the CPU time (user + system, from /proc) each process used in the step;
	// CPUMSPerMessage the same per answered message, in milliseconds.
	CPUSeconds      map[string]float64 `json:"cpu_seconds"`
	CPUMSPerMessage map[string]float64 `json:"cpu_ms_per_message"`
	// Actions are the Temporal actions written in the step (history; -1 before counted),
	// ActionsPerMessage per answered message.
	Actions           int            `json:"actions"`
	ActionsByKind     map[string]int `json:"actions_by_kind,omitempty"`
	ActionsPerMessage float64        `json:"actions_per_message"`
	// WorkflowTasks are the workflow tasks completed in the step (history; -1 before
	// counted): each is a round of the server handing a workflow's new events to a worker
	// and taking its commands back, the server's largest cost per message after the
	// actions themselves. WorkflowTasksPerMessage per answered message.
	WorkflowTasks           int     `json:"workflow_tasks"`
	WorkflowTasksPerMessage float64 `json:"workflow_tasks_per_message"`
	// PGTransactions are the committed and rolled-back transactions of the run's own
	// database in the step (pg_stat_database: the idle worker's lease renewals and the
	// run's own readings count too; -1 for the engine, which uses no database);
	// PGRoundTrips the round trips of the system's pool (-1: not measured).
	PGTransactions           float64 `json:"pg_transactions"`
	PGTransactionsPerMessage float64 `json:"pg_transactions_per_message"`
	PGRoundTrips             float64 `json:"pg_round_trips"`
	PGRoundTripsPerMessage   float64 `json:"pg_round_trips_per_message"`
	WithinBound              bool    `json:"within_bound"`
	Error                    string  `json:"error,omitempty"`
	from, to                 time.Time
}

// SatSeries is one system's steps, and its saturation: the step with the most answered
// messages per second among those within the p99 bound with nothing lost or doubled.
type SatSeries struct {
	System     string    `json:"system"`
	Steps      []SatStep `json:"steps"`
	Saturation *SatStep  `json:"saturation,omitempty"`
	Stopped    string    `json:"stopped"` // why no further step ran
	// Processes names what each CPU figure measured.
	Processes map[string]string `json:"processes"`
}

// SatReport is the saturation run's result.
type SatReport struct {
	StepSeconds float64     `json:"step_seconds"`
	P99BoundMS  float64     `json:"p99_bound_ms"`
	Series      []SatSeries `json:"series"`
	// EngineRatio is ilinkflow's saturation throughput / the engine ceiling's; StoreRatio
	// the same against the store ceiling (0: a side missing).
	EngineRatio float64 `json:"ilinkflow_over_engine"`
	StoreRatio  float64 `json:"ilinkflow_over_store"`
}

// series returns the named series (nil when it did not run).
func (s *SatReport) series(name string) *SatSeries {
	for i := range s.Series {
		if s.Series[i].System == name {
			return &s.Series[i]
		}
	}
	return nil
}

// finish picks each series' saturation step and computes the ratios.
func (s *SatReport) finish() {
	for i := range s.Series {
		se := &s.Series[i]
		se.Saturation = nil
		for j := range se.Steps {
			st := &se.Steps[j]
			if st.WithinBound && (se.Saturation == nil || st.PerSecond > se.Saturation.PerSecond) {
				se.Saturation = st
			}
		}
	}
	ratio := func(a, b string) float64 {
		sa, sb := s.series(a), s.series(b)
		if sa == nil || sb == nil || sa.Saturation == nil || sb.Saturation == nil || sb.Saturation.PerSecond == 0 {
			return 0
		}
		return sa.Saturation.PerSecond / sb.Saturation.PerSecond
	}
	s.EngineRatio = ratio(SystemILinkflow, SystemEngine)
	s.StoreRatio = ratio(SystemILinkflow, SystemStore)
}

// lostOrDoubled sums the lost and doubled messages over every series.
func (s *SatReport) lostOrDoubled() (lost, doubled int) {
	for _, se := range s.Series {
		for _, st := range se.Steps {
			lost += st.Lost
			doubled += st.Doubled
		}
	}
	return lost, doubled
}

// procMeter reads the CPU time of the processes a series is measured on, the database's
// transactions and the system's PostgreSQL round trips.
type procMeter struct {
	pids       map[string][]int                          // fixed processes by role
	pgAppNames []string                                  // application names of the system's backends
	roundTrips func(ctx context.Context) (float64, bool) // nil: not measured
	stop       func()                                    // ends the system (nil: nothing to end)
	noDB       bool                                      // the system uses no database: no transactions counted
}

// reading is one procMeter reading.
type reading struct {
	cpu        map[string]float64
	pgBackends map[int]float64 // CPU of each PostgreSQL backend read
	// temporalBackends is the same for the PostgreSQL-backed Temporal server's backends
	// (its databases'): the server's persistence, counted with its own CPU.
	temporalBackends map[int]float64
	xacts            float64
	roundTrips       float64
	rtOK             bool
}

func (r *run) read(ctx context.Context, m *procMeter) reading {
	rd := reading{cpu: map[string]float64{}}
	for role, pids := range m.pids {
		for _, pid := range pids {
			if s, err := procCPUSeconds(pid); err == nil {
				rd.cpu[role] += s
			}
		}
	}
	// The system's client backends and PostgreSQL's own processes (WAL writer,
	// checkpointer...); not the backends of other clients.
	rd.pgBackends = r.readBackends(ctx, `SELECT pid FROM pg_stat_activity
		WHERE application_name = ANY($1) OR backend_type <> 'client backend'`, m.pgAppNames)
	if len(r.temporalDBs) > 0 {
		rd.temporalBackends = r.readBackends(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = ANY($1) AND backend_type = 'client backend'`, r.temporalDBs)
	}
	_ = r.pool.QueryRow(ctx, `SELECT (xact_commit + xact_rollback)::float8 FROM pg_stat_database
		WHERE datname = current_database()`).Scan(&rd.xacts)
	if m.roundTrips != nil {
		rd.roundTrips, rd.rtOK = m.roundTrips(ctx)
	}
	return rd
}

// readBackends reads the CPU so far of each PostgreSQL backend the query (its one argument
// arg) lists by pid; none when the query fails.
func (r *run) readBackends(ctx context.Context, query string, arg any) map[int]float64 {
	out := map[int]float64{}
	rows, err := r.pool.Query(ctx, query, arg)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			if s, err := procCPUSeconds(pid); err == nil {
				out[pid] = s
			}
		}
	}
	return out
}

// pgCPU is the PostgreSQL CPU between two readings: each backend's growth, a backend
// that appeared in between counted from zero (one that exited in between is missed).
func pgCPU(a, b reading) float64 {
	return backendsCPU(a.pgBackends, b.pgBackends)
}

// backendsCPU is the CPU of a set of backends between two readings, each backend's growth
// (one that appeared in between counted from zero).
func backendsCPU(a, b map[int]float64) float64 {
	var s float64
	for pid, t := range b {
		s += t - a[pid]
	}
	return s
}

// saturate runs the saturation series of the configured systems, interleaved: each step
// size is run for every system still within the bound before the next size, so that the
// systems see the same machine (other work on it comes and goes). A system's series stops
// at its first step past the p99 bound, with a message lost or doubled, or failed.
func (r *run) saturate(ctx context.Context) error {
	rep := &SatReport{StepSeconds: r.cfg.SatStepFor.Seconds(), P99BoundMS: ms(r.cfg.SatP99)}
	r.rep.Saturation = rep
	type driven struct {
		sys   satSystem
		meter *procMeter
		done  bool
	}
	var systems []*driven
	defer func() {
		for _, d := range systems {
			if d.meter.stop != nil {
				d.meter.stop()
			}
		}
	}()
	for _, name := range Systems {
		if !slices.Contains(r.cfg.SatSystems, name) {
			continue
		}
		sys, meter, procs, err := r.satSetup(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		systems = append(systems, &driven{sys: sys, meter: meter})
		rep.Series = append(rep.Series, SatSeries{System: name, Processes: procs, Stopped: "the steps ran out"})
	}
	for _, bots := range r.cfg.SatSteps {
		for i, d := range systems {
			if d.done {
				continue
			}
			se := &rep.Series[i]
			st, err := r.satStep(ctx, d.sys, d.meter, bots)
			se.Steps = append(se.Steps, st)
			r.log.Info("saturation step", "system", se.System, "bots", bots, "answered", st.Answered,
				"per_second", fmt.Sprintf("%.1f", st.PerSecond), "p99", dur(st.P99MS),
				"lost", st.Lost, "doubled", st.Doubled)
			if err != nil {
				se.Stopped = "error: " + err.Error()
				return fmt.Errorf("%s: %w", se.System, err)
			}
			if !st.WithinBound {
				d.done = true
				se.Stopped = fmt.Sprintf("at %d bots: p99 %.0f ms (bound %.0f), %d lost, %d doubled",
					bots, st.P99MS, rep.P99BoundMS, st.Lost, st.Doubled)
			}
		}
	}
	for _, d := range systems {
		if d.meter.stop != nil {
			d.meter.stop()
			d.meter.stop = nil
		}
	}
	if err := r.countSaturation(ctx, rep); err != nil {
		return err
	}
	rep.finish()
	return nil
}

// satSetup readies one system and what measures it.
func (r *run) satSetup(ctx context.Context, name string) (satSystem, *procMeter, map[string]string, error) {
	self := os.Getpid()
	temporal := r.temporalPIDs()
	switch name {
	case SystemILinkflow:
		sys, stop, err := r.newILinkflowSystem(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		m := &procMeter{pids: map[string][]int{"worker": {r.worker.pid}, "temporal": temporal, "driver": {self}},
			pgAppNames: []string{r.appName}, stop: stop,
			roundTrips: func(ctx context.Context) (float64, bool) {
				wm, ok := r.worker.scrape(ctx)
				return wm.roundTrips, ok && wm.roundTripsOK
			}}
		return sys, m, map[string]string{"worker": "the worker process", "temporal": "the Temporal server",
			"postgres": "the worker's backends and PostgreSQL's own processes",
			"driver":   "this process: the iLink simulator and the closed loop"}, nil
	case SystemEngine:
		sys, stop, err := r.newEngineSystem(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		m := &procMeter{pids: map[string][]int{"worker": {self}, "temporal": temporal}, stop: stop, noDB: true}
		return sys, m, map[string]string{"worker": "this process: the engine's worker and the closed loop",
			"temporal": "the Temporal server", "postgres": "PostgreSQL's own processes (no client)"}, nil
	case SystemStore:
		sys, m, err := r.newStoreCeiling(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		m.pids = map[string][]int{"worker": {self}}
		return sys, m, map[string]string{"worker": "this process: the store and the closed loop",
			"postgres": "the store's backends and PostgreSQL's own processes"}, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown system %q", name)
}

// satStep runs one closed-loop step of bots bots.
func (r *run) satStep(ctx context.Context, sys satSystem, m *procMeter, bots int) (SatStep, error) {
	st := SatStep{Bots: bots, Actions: -1, WorkflowTasks: -1, PGRoundTrips: -1}
	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		last     time.Time
	)
	exchange := func(ctx context.Context, b, n int) (time.Duration, error) {
		if t, ok := sys.(satTimed); ok {
			return t.exchangeTimed(ctx, b, n)
		}
		began := time.Now()
		err := sys.exchange(ctx, b, n)
		return time.Since(began), err
	}
	before := r.read(ctx, m)
	doubled0 := sys.doubled()
	st.from = time.Now()
	until := st.from.Add(r.cfg.SatStepFor)
	var wg sync.WaitGroup
	for b := range bots {
		wg.Go(func() {
			for time.Now().Before(until) && stepCtx.Err() == nil {
				n := int(r.satSeq.Add(1))
				ectx, done := context.WithTimeout(stepCtx, r.cfg.AnswerWithin)
				d, err := exchange(ectx, b, n)
				timedOut := errors.Is(ectx.Err(), context.DeadlineExceeded) && stepCtx.Err() == nil
				done()
				mu.Lock()
				switch {
				case err == nil:
					lat = append(lat, d)
					last = time.Now()
				case timedOut:
					st.Lost++ // this bot waits no more: its conversation is stuck
				case firstErr == nil && stepCtx.Err() == nil:
					firstErr = fmt.Errorf("bot %d message %d: %w", b, n, err)
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	st.to = maxTime(last, st.from)
	if st.Lost > 0 {
		st.to = time.Now()
	}
	after := r.read(ctx, m)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	st.Doubled = sys.doubled() - doubled0
	st.Answered = len(lat)
	st.Seconds = st.to.Sub(st.from).Seconds()
	if st.Seconds > 0 {
		st.PerSecond = float64(st.Answered) / st.Seconds
	}
	sortDurations(lat)
	st.P50MS, st.P99MS = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	if len(lat) > 0 {
		st.MaxMS = ms(lat[len(lat)-1])
	}
	st.CPUSeconds = map[string]float64{}
	for role := range m.pids {
		st.CPUSeconds[role] = after.cpu[role] - before.cpu[role]
	}
	st.CPUSeconds["postgres"] = pgCPU(before, after)
	if _, ok := st.CPUSeconds["temporal"]; ok {
		st.CPUSeconds["temporal"] += backendsCPU(before.temporalBackends, after.temporalBackends)
	}
	st.CPUMSPerMessage = map[string]float64{}
	st.PGTransactions = after.xacts - before.xacts
	if m.noDB {
		st.PGTransactions = -1
	}
	if before.rtOK && after.rtOK {
		st.PGRoundTrips = after.roundTrips - before.roundTrips
	}
	st.perMessage()
	st.WithinBound = st.Answered > 0 && st.Lost == 0 && st.Doubled == 0 && st.P99MS <= ms(r.cfg.SatP99) && firstErr == nil
	if firstErr != nil {
		st.Error = firstErr.Error()
	}
	return st, firstErr
}

// perMessage derives the per-message figures from the step's totals.
func (st *SatStep) perMessage() {
	per := func(v float64) float64 {
		if st.Answered == 0 {
			return 0
		}
		return v / float64(st.Answered)
	}
	if st.CPUMSPerMessage == nil {
		st.CPUMSPerMessage = map[string]float64{}
	}
	for role, s := range st.CPUSeconds {
		st.CPUMSPerMessage[role] = 1000 * per(s)
	}
	st.PGTransactionsPerMessage = -1
	if st.PGTransactions >= 0 {
		st.PGTransactionsPerMessage = per(st.PGTransactions)
	}
	st.PGRoundTripsPerMessage = -1
	if st.PGRoundTrips >= 0 {
		st.PGRoundTripsPerMessage = per(st.PGRoundTrips)
	}
	st.ActionsPerMessage = -1
	if st.Actions >= 0 {
		st.ActionsPerMessage = per(float64(st.Actions))
	}
	st.WorkflowTasksPerMessage = -1
	if st.WorkflowTasks >= 0 {
		st.WorkflowTasksPerMessage = per(float64(st.WorkflowTasks))
	}
}

// countSaturation counts the Temporal actions of every step of the series that use
// Temporal, from the namespace's histories.
func (r *run) countSaturation(ctx context.Context, rep *SatReport) error {
	type ref struct{ se, st int }
	var refs []ref
	var wins [][2]time.Time
	for i, se := range rep.Series {
		if se.System == SystemStore {
			continue
		}
		for j, st := range se.Steps {
			refs = append(refs, ref{i, j})
			wins = append(wins, [2]time.Time{st.from, st.to})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	costs := make([]Cost, len(wins))
	err := r.readHistories(ctx, func(h []*historyEvent) {
		for k, w := range wins {
			costs[k].merge(costIn(h, w[0], w[1]))
		}
	})
	if err != nil {
		return err
	}
	for k, rf := range refs {
		st := &rep.Series[rf.se].Steps[rf.st]
		st.Actions, st.ActionsByKind = costs[k].Actions, costs[k].ByKind
		st.WorkflowTasks = costs[k].WorkflowTasks
		st.perMessage()
	}
	return nil
}

// temporalPIDs finds the Temporal server the run started: the PostgreSQL-backed one by its
// process, the dev server by its command line (start-dev and the frontend port); none for
// a server given by address elsewhere.
func (r *run) temporalPIDs() []int {
	if r.temporalPID != 0 {
		return []int{r.temporalPID}
	}
	_, port, ok := strings.Cut(r.tcAddr, ":")
	if !ok {
		return nil
	}
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !slices.Contains(args, "start-dev") {
			continue
		}
		for i, a := range args {
			if (a == "--port" || a == "-p") && i+1 < len(args) && args[i+1] == port || a == "--port="+port {
				pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
				if err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// writeText writes the saturation table: one row per step, then the saturation of each
// system and the two ratios.
func (s *SatReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "\nsaturation: a closed loop (each bot's next message as soon as its reply arrived), steps of %v, p99 bound %v\n",
		time.Duration(s.StepSeconds*float64(time.Second)), dur(s.P99BoundMS))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tbots\tanswered\tmsg/s\tp50 ms\tp99 ms\tmax ms\tlost\tdoubled\tCPU ms/msg: worker\ttemporal\tpostgres\tdriver\tactions/msg\tWF tasks/msg\tPG xacts/msg\tPG round trips/msg\t")
	for _, se := range s.Series {
		for _, st := range se.Steps {
			cpu := func(role string) string {
				if _, ok := st.CPUSeconds[role]; !ok {
					return "-"
				}
				return fmt.Sprintf("%.2f", st.CPUMSPerMessage[role])
			}
			opt := func(v float64) string {
				if v < 0 {
					return "-"
				}
				return fmt.Sprintf("%.2f", v)
			}
			mark := ""
			if !st.WithinBound {
				mark = " *"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				se.System, st.Bots, st.Answered, st.PerSecond, st.P50MS, st.P99MS, st.MaxMS, st.Lost, st.Doubled,
				cpu("worker"), cpu("temporal"), cpu("postgres"), cpu("driver"),
				opt(st.ActionsPerMessage), opt(st.WorkflowTasksPerMessage), opt(st.PGTransactionsPerMessage), opt(st.PGRoundTripsPerMessage), mark)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(* past the p99 bound, or a message lost or doubled, or the step failed: the series stopped there)")
	for _, se := range s.Series {
		if st := se.Saturation; st != nil {
			fmt.Fprintf(w, "saturation of %s: %.1f answered msg/s at %d bots (p99 %v); stopped: %s\n",
				se.System, st.PerSecond, st.Bots, dur(st.P99MS), se.Stopped)
		} else {
			fmt.Fprintf(w, "saturation of %s: no step within the bound; stopped: %s\n", se.System, se.Stopped)
		}
		for _, role := range []string{"worker", "temporal", "postgres", "driver"} {
			if what, ok := se.Processes[role]; ok {
				fmt.Fprintf(w, "  %s CPU: %s\n", role, what)
			}
		}
	}
	if s.EngineRatio > 0 {
		fmt.Fprintf(w, "ilinkflow / engine ceiling: %.2f\n", s.EngineRatio)
	}
	if s.StoreRatio > 0 {
		fmt.Fprintf(w, "ilinkflow / store ceiling: %.2f\n", s.StoreRatio)
	}
	return nil
}

// newStoreCeiling readies the store's ceiling on a schema of its own (so that it shares
// no account, lease or window with the worker's, which keeps running between its steps):
// migrated, as many bots as the largest step enrolled in the store only, and a pool with
// the worker's bound whose round trips are counted as the worker's are.
func (r *run) newStoreCeiling(ctx context.Context) (satSystem, *procMeter, error) {
	schema := r.rep.Schema + "_store"
	app := "ilinkflow-loadtest-store-" + r.suffix
	if _, err := r.pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	url, err := withParams(r.dbURL, map[string]string{"search_path": schema, "application_name": app})
	if err != nil {
		return nil, nil, err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	pc.MaxConns = int32(gateway.DefaultConfig().DBMaxConns)
	if r.cfg.DBMaxConns > 0 {
		pc.MaxConns = int32(r.cfg.DBMaxConns)
	}
	reg, err := metrics.New(r.log)
	if err != nil {
		return nil, nil, err
	}
	pc.ConnConfig.Tracer = reg.DBTracer()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (satSystem, *procMeter, error) {
		pool.Close()
		return nil, nil, err
	}
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		return fail(fmt.Errorf("migrate schema %s: %w", schema, err))
	}
	ring, err := sealing.ParseKeyring(r.keySpec)
	if err != nil {
		return fail(err)
	}
	st, err := store.New(pool, ring, store.DefaultLimits())
	if err != nil {
		return fail(err)
	}
	bots := make([]bot, slices.Max(r.cfg.SatSteps))
	for i := range bots {
		id := fmt.Sprintf("store-ceiling-%s-%d", r.suffix, i+1)
		b, err := r.enrollInStore(ctx, st, "qo_store_"+r.suffix+"_"+strconv.Itoa(i+1),
			id, "owner-of-"+id, r.simURL, "token-of-"+id)
		if err != nil {
			return fail(fmt.Errorf("enroll store bot %d: %w", i+1, err))
		}
		bots[i] = b
	}
	// The system renews its bots' leases until its context ends.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sys, err := newStoreSystem(sctx, st, bots)
	if err != nil {
		cancel()
		return fail(err)
	}
	m := &procMeter{pgAppNames: []string{app},
		roundTrips: func(context.Context) (float64, bool) { return gatheredSum(reg, "ilinkflow_db_round_trips_total") },
		stop: func() {
			cancel()
			if c, ok := sys.(interface{ closed() <-chan struct{} }); ok {
				<-c.closed() // its leases released
			}
			pool.Close()
			_ = reg.Close(context.Background())
		}}
	return sys, m, nil
}

// gatheredSum is the sum of a counter's series in reg.
func gatheredSum(reg *metrics.Registry, name string) (float64, bool) {
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var s float64
		for _, m := range mf.GetMetric() {
			s += m.GetCounter().GetValue()
		}
		return s, true
	}
	return 0, false
}
