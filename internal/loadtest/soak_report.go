package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// ErrSoakBoundMissed is wrapped by RunSoak's error when the last interval's commit or send
// p99 exceeded the first's by more than SoakConfig.P99Growth, or the table bytes grew by
// more than SoakConfig.TableGrowth past the rows horizon.
var ErrSoakBoundMissed = errors.New("loadtest: a soak bound was missed")

// SoakReport is the soak's result.
type SoakReport struct {
	Schema       string `json:"schema"`
	Messages     int    `json:"messages"`
	Bots         int    `json:"bots"`
	Concurrency  int    `json:"concurrency"`
	PageMessages int    `json:"page_messages"`
	Interval     int    `json:"interval"`
	DayMessages  int    `json:"day_messages"`
	// ContentHours and RowsHours are the retention horizons, PurgeEveryMinutes the purge's
	// period, in simulated time.
	ContentHours      float64 `json:"content_hours"`
	RowsHours         float64 `json:"rows_hours"`
	PurgeEveryMinutes float64 `json:"purge_every_minutes"`
	PurgeLimit        int     `json:"purge_limit"`
	PurgeGate         bool    `json:"purge_gate"`
	// HorizonMessages is after how many messages the rows horizon is reached: the rows
	// horizon, plus a bot's turn (a window closes at the bot's next page), plus a purge
	// period, in messages.
	HorizonMessages int `json:"horizon_messages"`
	// Autovacuum is the server's autovacuum setting; StandIn whether the soak stood in for
	// the daemon (it was off), with the vacuums and analyzes it ran.
	Autovacuum      string  `json:"autovacuum"`
	StandIn         bool    `json:"stand_in"`
	StandInNaptime  float64 `json:"stand_in_naptime_seconds,omitempty"`
	StandInVacuums  int     `json:"stand_in_vacuums"`
	StandInAnalyzes int     `json:"stand_in_analyzes"`
	// StandInError is the stand-in's first failure (it went on with its next round).
	StandInError string         `json:"stand_in_error,omitempty"`
	Intervals    []SoakInterval `json:"intervals"`

	// Seconds is the wall time of the exchanges; PerSecond the messages answered a second.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// Answered counts the messages whose page was answered; Lost those of a page that
	// failed; Doubled those with more than one reply sent seen while they were carried.
	Answered int `json:"answered"`
	Lost     int `json:"lost"`
	Doubled  int `json:"doubled"`
	// At rest, after the last purge: the messages still stored (StoredRows; with the rows
	// purged they must be every message), those not answered, those with more than one
	// reply sent, and those kept past the content or rows horizon.
	StoredRows     int64 `json:"stored_rows"`
	Unanswered     int64 `json:"unanswered"`
	DoubledAtRest  int64 `json:"doubled_at_rest"`
	OverdueContent int64 `json:"overdue_content"`
	OverdueRows    int64 `json:"overdue_rows"`
	// Purged counts what the purge removed by class (content and rows: messages), in
	// PurgeRuns runs (the last at rest among them); PurgeSkipped the runs skipped because
	// the previous one was still going.
	Purged       map[string]int `json:"purged"`
	PurgeRuns    int            `json:"purge_runs"`
	PurgeSkipped int            `json:"purge_skipped"`

	// The first interval's commit and send p99 against the last's: last / first, and
	// whether both stay within 1 + P99Growth.
	P99Growth      float64 `json:"p99_growth_bound"`
	CommitP99Ratio float64 `json:"commit_p99_ratio"`
	SendP99Ratio   float64 `json:"send_p99_ratio"`
	P99WithinBound bool    `json:"p99_within_bound"`
	// The table bytes once the rows horizon is reached: from the first interval ending a
	// whole interval past HorizonMessages (TableFromMessages) to the last; TableGrowth is
	// last / from - 1, TableSteady whether it is within TableGrowthBound (nil: the run
	// ended before two such intervals).
	TableGrowthBound  float64 `json:"table_growth_bound"`
	TableFromMessages int     `json:"table_from_messages,omitempty"`
	TableGrowth       float64 `json:"table_growth"`
	TableSteady       *bool   `json:"table_steady,omitempty"`

	Failure string `json:"failure,omitempty"`
}

// SoakInterval is one report line: the interval's latencies and the schema at its end.
type SoakInterval struct {
	// Messages counts the messages answered up to the interval's end; SimDays the simulated
	// days they took.
	Messages  int     `json:"messages"`
	SimDays   float64 `json:"sim_days"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// The page commit (CommitPage) and the reply's send (ReserveAndStart to CompleteSend),
	// per page.
	CommitP50MS float64 `json:"commit_p50_ms"`
	CommitP99MS float64 `json:"commit_p99_ms"`
	SendP50MS   float64 `json:"send_p50_ms"`
	SendP99MS   float64 `json:"send_p99_ms"`
	// The schema's tables at the end: heap with TOAST (pg_table_size), indexes
	// (pg_indexes_size), both, and the largest relations.
	TableBytes int64          `json:"table_bytes"`
	IndexBytes int64          `json:"index_bytes"`
	TotalBytes int64          `json:"total_bytes"`
	Largest    []SoakRelation `json:"largest"`
	// From pg_stat_user_tables, summed over the schema's tables: dead tuples now, vacuum
	// and analyze runs so far (by the daemon, and others: the stand-in's).
	DeadTuples   int64 `json:"dead_tuples"`
	Autovacuums  int64 `json:"autovacuums"`
	Vacuums      int64 `json:"vacuums"`
	Autoanalyzes int64 `json:"autoanalyzes"`
	Analyzes     int64 `json:"analyzes"`
	// What the purge removed in the interval (messages), in PurgeRuns runs, the longest
	// of which took PurgeMaxSeconds.
	PurgeRuns       int     `json:"purge_runs"`
	PurgeMaxSeconds float64 `json:"purge_max_seconds"`
	PurgedContent   int     `json:"purged_content"`
	PurgedRows      int     `json:"purged_rows"`
	// The purge's backlog at the end: messages whose content, or rows, are due at the
	// simulated time and not purged yet.
	ContentDue int64 `json:"content_due"`
	RowsDue    int64 `json:"rows_due"`
	// PurgeWaitSeconds is how long the pages stood still for the purge gate in the
	// interval: the exchanges' waits ÷ their number.
	PurgeWaitSeconds float64 `json:"purge_wait_seconds"`
	// LiveMessages are the messages still stored; ContentKept those whose content is not
	// erased.
	LiveMessages int64 `json:"live_messages"`
	ContentKept  int64 `json:"content_kept"`
	// Bytes per message at rest: TotalBytes / Messages (every message so far) and
	// TotalBytes / LiveMessages (those still stored: the steady cost of one).
	BytesPerMessage     float64 `json:"bytes_per_message"`
	BytesPerLiveMessage float64 `json:"bytes_per_live_message"`
}

// SoakRelation is one of the schema's tables with its sizes.
type SoakRelation struct {
	Name       string `json:"name"`
	TableBytes int64  `json:"table_bytes"`
	IndexBytes int64  `json:"index_bytes"`
}

// soakLargest is how many of the largest relations each line keeps.
const soakLargest = 4

func newSoakReport(cfg SoakConfig) *SoakReport {
	step := simDay / time.Duration(cfg.DayMessages)
	horizon := int((cfg.Retention.Rows + cfg.PurgeEvery + step - 1) / step)
	return &SoakReport{Messages: cfg.Messages, Bots: cfg.Bots, Concurrency: cfg.Concurrency,
		PageMessages: cfg.PageMessages, Interval: cfg.Interval, DayMessages: cfg.DayMessages,
		ContentHours: cfg.Retention.Content.Hours(), RowsHours: cfg.Retention.Rows.Hours(),
		PurgeEveryMinutes: cfg.PurgeEvery.Minutes(), PurgeLimit: cfg.PurgeLimit, PurgeGate: cfg.PurgeGate,
		HorizonMessages: horizon + cfg.Bots*cfg.PageMessages,
		P99Growth:       cfg.P99Growth, TableGrowthBound: cfg.TableGrowth, Purged: map[string]int{}}
}

// finish computes the totals and the comparisons from the intervals.
func (r *SoakReport) finish() {
	if r.Seconds > 0 {
		r.PerSecond = float64(r.Answered) / r.Seconds
	}
	r.CommitP99Ratio, r.SendP99Ratio, r.P99WithinBound = 0, 0, false
	r.TableFromMessages, r.TableGrowth, r.TableSteady = 0, 0, nil
	if len(r.Intervals) == 0 {
		return
	}
	first, last := r.Intervals[0], r.Intervals[len(r.Intervals)-1]
	ratio := func(a, b float64) float64 {
		if a <= 0 {
			return 0
		}
		return b / a
	}
	r.CommitP99Ratio, r.SendP99Ratio = ratio(first.CommitP99MS, last.CommitP99MS), ratio(first.SendP99MS, last.SendP99MS)
	bound := 1 + r.P99Growth
	r.P99WithinBound = r.CommitP99Ratio > 0 && r.SendP99Ratio > 0 && r.CommitP99Ratio <= bound && r.SendP99Ratio <= bound
	for i, iv := range r.Intervals {
		if iv.Messages >= r.HorizonMessages+r.Interval && i < len(r.Intervals)-1 {
			r.TableFromMessages = iv.Messages
			r.TableGrowth = ratio(float64(iv.TableBytes), float64(last.TableBytes)) - 1
			steady := r.TableGrowth <= r.TableGrowthBound
			r.TableSteady = &steady
			break
		}
	}
}

// Verdict is nil when the soak passed: it completed, nothing was lost or doubled, nothing
// was left past a horizon, and the p99 and table bounds held.
func (r *SoakReport) Verdict() error {
	if r.Failure != "" {
		return errors.New(r.Failure)
	}
	var broken []string
	if r.Lost > 0 || r.Answered != r.Messages {
		broken = append(broken, fmt.Sprintf("%d of %d messages answered (%d lost)", r.Answered, r.Messages, r.Lost))
	}
	if r.Doubled > 0 || r.DoubledAtRest > 0 {
		broken = append(broken, fmt.Sprintf("%d messages answered twice (%d seen at rest)", r.Doubled, r.DoubledAtRest))
	}
	if stored := r.StoredRows + int64(r.Purged[store.RetentionRows]); stored != int64(r.Messages) {
		broken = append(broken, fmt.Sprintf("%d messages stored and %d purged: %d, not the %d sent", r.StoredRows,
			r.Purged[store.RetentionRows], stored, r.Messages))
	}
	if r.Unanswered > 0 {
		broken = append(broken, fmt.Sprintf("%d messages at rest neither handled nor merged", r.Unanswered))
	}
	if r.OverdueContent > 0 || r.OverdueRows > 0 {
		broken = append(broken, fmt.Sprintf("after the last purge, %d messages kept their content and %d their rows past the horizon",
			r.OverdueContent, r.OverdueRows))
	}
	if len(broken) > 0 {
		return fmt.Errorf("%w: %s", ErrRuleBroken, strings.Join(broken, "; "))
	}
	var missed []string
	if !r.P99WithinBound {
		missed = append(missed, fmt.Sprintf("the last interval's p99 over the first's: commit ×%.2f, send ×%.2f (bound ×%.2f)",
			r.CommitP99Ratio, r.SendP99Ratio, 1+r.P99Growth))
	}
	if r.TableSteady != nil && !*r.TableSteady {
		missed = append(missed, fmt.Sprintf("the table bytes grew %+.1f%% past the rows horizon (bound %+.0f%%)",
			100*r.TableGrowth, 100*r.TableGrowthBound))
	}
	if len(missed) > 0 {
		return fmt.Errorf("%w: %s", ErrSoakBoundMissed, strings.Join(missed, "; "))
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (r *SoakReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as tables, then the comparisons and the verdict.
func (r *SoakReport) WriteText(w io.Writer) error {
	pages := "one message a page"
	if r.PageMessages > 1 {
		pages = fmt.Sprintf("%d of a bot's messages a page (merged into one delivery: one reply a page)", r.PageMessages)
	}
	fmt.Fprintf(w, "soak: %d messages on %d bots through the store alone (no Temporal, no iLink), %d exchanges at once, %s; schema %s\n",
		r.Messages, r.Bots, r.Concurrency, pages, r.Schema)
	gate := "pages held while the purge is a period behind"
	if !r.PurgeGate {
		gate = "no gate: a run due while one goes is skipped"
	}
	fmt.Fprintf(w, "simulated clock: a day every %d messages; content kept %gh and rows %gh after the window closed; the purge every %gm (batches of %d; %s); the rows horizon is reached after %d messages\n",
		r.DayMessages, r.ContentHours, r.RowsHours, r.PurgeEveryMinutes, r.PurgeLimit, gate, r.HorizonMessages)
	switch {
	case r.StandIn:
		fmt.Fprintf(w, "PostgreSQL autovacuum: %s; the soak stood in for the daemon (its thresholds and cost limit, every %v): %d vacuums, %d analyzes (counted as vacuums and analyzes below)\n",
			r.Autovacuum, time.Duration(r.StandInNaptime*float64(time.Second)), r.StandInVacuums, r.StandInAnalyzes)
		if r.StandInError != "" {
			fmt.Fprintf(w, "  the stand-in failed (and went on): %s\n", r.StandInError)
		}
	case r.Autovacuum != "on":
		fmt.Fprintf(w, "PostgreSQL autovacuum: %s, and no stand-in: dead rows are not reclaimed, the tables grow\n", r.Autovacuum)
	default:
		fmt.Fprintln(w, "PostgreSQL autovacuum: on")
	}
	fmt.Fprintln(w, "\nper interval: latencies per page over the interval; sizes, tuples and messages at its end (MB = 10^6 bytes; B/msg: total bytes ÷ messages so far, and ÷ messages still stored)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "messages\tsim days\tmsg/s\tcommit p50 ms\tp99 ms\tsend p50 ms\tp99 ms\ttables MB\tindexes MB\ttotal MB\tstored msgs\tcontent kept\tB/msg\tB/stored msg\tdead tuples\tautovacuums\tvacuums\tpurge runs\tlongest s\tcontent purged\trows purged\tcontent due\trows due\tpurge wait s\t")
	for _, iv := range r.Intervals {
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t\n",
			iv.Messages, iv.SimDays, iv.PerSecond, iv.CommitP50MS, iv.CommitP99MS, iv.SendP50MS, iv.SendP99MS,
			mb(iv.TableBytes), mb(iv.IndexBytes), mb(iv.TotalBytes), iv.LiveMessages, iv.ContentKept,
			iv.BytesPerMessage, iv.BytesPerLiveMessage, iv.DeadTuples, iv.Autovacuums, iv.Vacuums,
			iv.PurgeRuns, iv.PurgeMaxSeconds, iv.PurgedContent, iv.PurgedRows, iv.ContentDue, iv.RowsDue, iv.PurgeWaitSeconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nlargest tables at each interval's end (table + indexes, MB)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, iv := range r.Intervals {
		cells := []string{fmt.Sprint(iv.Messages)}
		for _, rel := range iv.Largest {
			cells = append(cells, fmt.Sprintf("%s %.1f + %.1f", rel.Name, mb(rel.TableBytes), mb(rel.IndexBytes)))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if n := len(r.Intervals); n > 0 {
		first, last := r.Intervals[0], r.Intervals[n-1]
		within := "within"
		if !r.P99WithinBound {
			within = "PAST"
		}
		fmt.Fprintf(w, "p99, last interval over the first (bound ×%.2f): commit %.2f → %.2f ms (×%.2f), send %.2f → %.2f ms (×%.2f): %s the bound\n",
			1+r.P99Growth, first.CommitP99MS, last.CommitP99MS, r.CommitP99Ratio, first.SendP99MS, last.SendP99MS, r.SendP99Ratio, within)
		switch {
		case r.TableSteady == nil:
			fmt.Fprintf(w, "table bytes: not judged, the run ended before two intervals past the rows horizon (%d messages, and one interval more)\n", r.HorizonMessages)
		default:
			from := r.Intervals[slices.IndexFunc(r.Intervals, func(iv SoakInterval) bool { return iv.Messages == r.TableFromMessages })]
			verdict := "stopped growing"
			if !*r.TableSteady {
				verdict = "STILL GROWING"
			}
			fmt.Fprintf(w, "table bytes past the rows horizon: %.1f MB at %d messages, %.1f MB at %d (%+.1f%%, bound %+.0f%%): %s\n",
				mb(from.TableBytes), from.Messages, mb(last.TableBytes), last.Messages, 100*r.TableGrowth, 100*r.TableGrowthBound, verdict)
		}
	}
	fmt.Fprintf(w, "messages: %d answered, %d lost, %d doubled; at rest after a last purge: %d stored + %d rows purged = %d; %d not answered, %d with two replies; past the horizon: %d contents, %d rows\n",
		r.Answered, r.Lost, r.Doubled, r.StoredRows, r.Purged[store.RetentionRows], r.StoredRows+int64(r.Purged[store.RetentionRows]),
		r.Unanswered, r.DoubledAtRest, r.OverdueContent, r.OverdueRows)
	classes := make([]string, 0, len(store.RetentionClasses))
	for _, c := range store.RetentionClasses {
		classes = append(classes, fmt.Sprintf("%s %d", c, r.Purged[c]))
	}
	fmt.Fprintf(w, "purged in all: %s (%d runs, %d skipped while one ran)\n", strings.Join(classes, ", "), r.PurgeRuns, r.PurgeSkipped)
	fmt.Fprintf(w, "took %v: %.0f messages a second\n", time.Duration(r.Seconds*float64(time.Second)).Round(time.Second), r.PerSecond)
	if err := r.Verdict(); err != nil {
		fmt.Fprintf(w, "FAILED: %v\n", err)
	} else {
		fmt.Fprintln(w, "PASSED: every message answered exactly once, nothing left past a horizon, the p99 and the table bytes within their bounds")
	}
	return nil
}

// mb is bytes in megabytes (10^6).
func mb(b int64) float64 { return float64(b) / 1e6 }

// soakSnapshot is the schema and the purge's counts at an interval's end.
type soakSnapshot struct {
	tableBytes, indexBytes               int64
	largest                              []SoakRelation
	deadTuples, autovacuums, vacuums     int64
	autoanalyzes, analyzes               int64
	liveMessages, contentKept            int64
	purgedContent, purgedRows, purgeRuns int
	purgeMax                             time.Duration
	contentDue, rowsDue                  int64
}

// snapshot reads the schema's sizes and statistics, and the purge's counts so far.
func (sk *soak) snapshot(ctx context.Context) (soakSnapshot, error) {
	var s soakSnapshot
	var err error
	s.purgedContent, s.purgedRows, s.purgeRuns, s.purgeMax = sk.purgedSoFar()
	if s.contentDue, s.rowsDue, err = sk.due(ctx, sk.clock.now()); err != nil {
		return s, err
	}
	rows, err := sk.admin.Query(ctx, `SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid),
			coalesce(t.n_dead_tup, 0), coalesce(t.autovacuum_count, 0), coalesce(t.vacuum_count, 0),
			coalesce(t.autoanalyze_count, 0), coalesce(t.analyze_count, 0)
		FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
		LEFT JOIN pg_stat_user_tables AS t ON t.relid = c.oid
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`, sk.schema)
	if err != nil {
		return s, err
	}
	var rels []SoakRelation
	for rows.Next() {
		var rel SoakRelation
		var dead, av, v, aa, a int64
		if err := rows.Scan(&rel.Name, &rel.TableBytes, &rel.IndexBytes, &dead, &av, &v, &aa, &a); err != nil {
			rows.Close()
			return s, err
		}
		rels = append(rels, rel)
		s.tableBytes += rel.TableBytes
		s.indexBytes += rel.IndexBytes
		s.deadTuples += dead
		s.autovacuums += av
		s.vacuums += v
		s.autoanalyzes += aa
		s.analyzes += a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	slices.SortFunc(rels, func(a, b SoakRelation) int {
		return cmp.Compare(b.TableBytes+b.IndexBytes, a.TableBytes+a.IndexBytes)
	})
	s.largest = rels[:min(soakLargest, len(rels))]
	err = sk.admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE erased_at IS NULL) FROM `+sk.schema+`.inbound_messages`).
		Scan(&s.liveMessages, &s.contentKept)
	return s, err
}
