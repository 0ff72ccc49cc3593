package loadtest

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// TestSoakReportsEveryHundredThousandAndPurgesPastTheHorizon runs the soak at the size of
// the suite: 1,500 messages on 16 bots in pages of four (the default), a report line
// every 500, a simulated day every 250 messages with content kept a day and rows two. Each line's figures add up (rate,
// sizes, bytes per message, the p99 comparison); the purge ran while the messages were
// carried and erased content and deleted rows past their horizons, leaving none due;
// every message was answered once and is stored or was purged; the schema is dropped.
func TestSoakReportsEveryHundredThousandAndPurgesPastTheHorizon(t *testing.T) {
	if testing.Short() {
		t.Skip(dbtest.SkipShort)
	}
	cfg := DefaultSoakConfig()
	cfg.DatabaseURL = dbtest.URL()
	cfg.Messages, cfg.Bots, cfg.Concurrency, cfg.Interval, cfg.DayMessages = 1500, 16, 8, 500, 250
	cfg.Retention = store.RetentionPolicy{Content: 24 * time.Hour, Rows: 48 * time.Hour}
	cfg.PurgeEvery = 4 * time.Hour
	// The rules here are the report's and the purge's, not this busy machine's latencies.
	cfg.P99Growth, cfg.TableGrowth = 1e6, 1e6

	rep, err := RunSoak(t.Context(), cfg)
	if rep != nil {
		var b bytes.Buffer
		if werr := rep.WriteText(&b); werr != nil {
			t.Errorf("write the report: %v", werr)
		}
		t.Logf("report:\n%s", b.String())
		if !strings.Contains(b.String(), "p99, last interval over the first") || !strings.Contains(b.String(), "PASSED") {
			t.Errorf("the report does not say its p99 comparison and verdict")
		}
	}
	if err != nil {
		t.Fatal(err)
	}

	if len(rep.Intervals) != 3 {
		t.Fatalf("%d report lines, want 3", len(rep.Intervals))
	}
	var inRunContent, inRunRows int
	for i, iv := range rep.Intervals {
		if want := (i + 1) * 500; iv.Messages != want {
			t.Errorf("line %d: %d messages, want %d", i, iv.Messages, want)
		}
		if want := float64(iv.Messages) / 250; iv.SimDays != want {
			t.Errorf("line %d: %.2f simulated days, want %.2f", i, iv.SimDays, want)
		}
		if iv.Seconds <= 0 || !near(iv.PerSecond, 500/iv.Seconds) {
			t.Errorf("line %d: %.1f msg/s over %.3f s, want 500 / seconds", i, iv.PerSecond, iv.Seconds)
		}
		if iv.CommitP50MS <= 0 || iv.CommitP50MS > iv.CommitP99MS || iv.SendP50MS <= 0 || iv.SendP50MS > iv.SendP99MS {
			t.Errorf("line %d: commit p50/p99 %.2f/%.2f ms, send %.2f/%.2f ms", i, iv.CommitP50MS, iv.CommitP99MS, iv.SendP50MS, iv.SendP99MS)
		}
		if iv.TableBytes <= 0 || iv.IndexBytes <= 0 || iv.TotalBytes != iv.TableBytes+iv.IndexBytes {
			t.Errorf("line %d: tables %d + indexes %d bytes, total %d", i, iv.TableBytes, iv.IndexBytes, iv.TotalBytes)
		}
		if !near(iv.BytesPerMessage, float64(iv.TotalBytes)/float64(iv.Messages)) ||
			iv.LiveMessages <= 0 || !near(iv.BytesPerLiveMessage, float64(iv.TotalBytes)/float64(iv.LiveMessages)) {
			t.Errorf("line %d: %.0f B/msg, %.0f B/stored msg for %d bytes, %d messages, %d stored",
				i, iv.BytesPerMessage, iv.BytesPerLiveMessage, iv.TotalBytes, iv.Messages, iv.LiveMessages)
		}
		if len(iv.Largest) == 0 || len(iv.Largest) > soakLargest {
			t.Errorf("line %d: %d largest relations", i, len(iv.Largest))
		}
		var sum int64
		for j, rel := range iv.Largest {
			sum += rel.TableBytes + rel.IndexBytes
			if j > 0 && rel.TableBytes+rel.IndexBytes > iv.Largest[j-1].TableBytes+iv.Largest[j-1].IndexBytes {
				t.Errorf("line %d: the largest relations are not in descending order: %+v", i, iv.Largest)
			}
		}
		if sum > iv.TotalBytes {
			t.Errorf("line %d: the largest relations hold %d bytes, more than the total %d", i, sum, iv.TotalBytes)
		}
		inRunContent += iv.PurgedContent
		inRunRows += iv.PurgedRows
	}
	first, last := rep.Intervals[0], rep.Intervals[2]
	if !near(rep.CommitP99Ratio, last.CommitP99MS/first.CommitP99MS) || !near(rep.SendP99Ratio, last.SendP99MS/first.SendP99MS) || !rep.P99WithinBound {
		t.Errorf("p99 ratios commit %.3f, send %.3f (within %v); want last / first of %+v and %+v",
			rep.CommitP99Ratio, rep.SendP99Ratio, rep.P99WithinBound, first, last)
	}
	if rep.PageMessages != 4 || rep.HorizonMessages != 500+42+16*4 {
		t.Errorf("%d messages a page, the rows horizon reached after %d messages; want 4, and 606 (rows, a purge period, a bot's turn)",
			rep.PageMessages, rep.HorizonMessages)
	}

	// The purge ran while the messages were carried, past both horizons.
	if rep.PurgeRuns == 0 || inRunContent == 0 || inRunRows == 0 {
		t.Errorf("the purge ran %d times, erasing %d contents and deleting %d rows while the messages were carried; want some of each",
			rep.PurgeRuns, inRunContent, inRunRows)
	}
	if rep.Purged[store.RetentionContent] < inRunContent || rep.Purged[store.RetentionRows] < inRunRows {
		t.Errorf("purged in all %v, less than the lines' %d contents and %d rows", rep.Purged, inRunContent, inRunRows)
	}
	if last.ContentKept >= last.LiveMessages || last.LiveMessages >= int64(last.Messages) {
		t.Errorf("at the end %d messages stored of %d, %d with their content; want content erased and rows deleted",
			last.LiveMessages, last.Messages, last.ContentKept)
	}
	if rep.OverdueContent != 0 || rep.OverdueRows != 0 {
		t.Errorf("after the last purge %d contents and %d rows are past their horizon", rep.OverdueContent, rep.OverdueRows)
	}

	// Nothing lost, nothing doubled.
	if rep.Answered != 1500 || rep.Lost != 0 || rep.Doubled != 0 || rep.DoubledAtRest != 0 || rep.Unanswered != 0 {
		t.Errorf("answered %d, lost %d, doubled %d (%d at rest), %d not answered at rest", rep.Answered, rep.Lost, rep.Doubled,
			rep.DoubledAtRest, rep.Unanswered)
	}
	if got := rep.StoredRows + int64(rep.Purged[store.RetentionRows]); got != 1500 {
		t.Errorf("%d stored + %d purged = %d messages, want 1500", rep.StoredRows, rep.Purged[store.RetentionRows], got)
	}

	pool, err := pgxpool.New(t.Context(), cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, rep.Schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("the soak's schema %s was not dropped", rep.Schema)
	}
}

// TestSoakVerdictFailsPastItsBoundsAndOnALostMessage checks the report's verdict on made-up
// lines: the last interval's p99 more than P99Growth over the first's misses the bound,
// as does table growth past the rows horizon beyond TableGrowth (judged from the first
// line a whole interval past the horizon, not before two such lines); a lost or doubled
// message, or content left past its horizon, breaks a rule.
func TestSoakVerdictFailsPastItsBoundsAndOnALostMessage(t *testing.T) {
	base := func() *SoakReport {
		r := &SoakReport{Messages: 400, Interval: 100, HorizonMessages: 150, P99Growth: 0.25, TableGrowthBound: 0.10,
			Answered: 400, StoredRows: 250, Purged: map[string]int{store.RetentionRows: 150}}
		for i, tb := range []int64{100, 200, 300, 310} {
			r.Intervals = append(r.Intervals, SoakInterval{Messages: (i + 1) * 100, CommitP99MS: 10, SendP99MS: 20, TableBytes: tb << 20})
		}
		return r
	}
	r := base()
	r.finish()
	if err := r.Verdict(); err != nil || r.TableSteady == nil || !*r.TableSteady || r.TableFromMessages != 300 {
		t.Fatalf("verdict %v, table judged from %d (steady %v); want a pass judged from 300", err, r.TableFromMessages, r.TableSteady)
	}

	r = base()
	r.Intervals[3].SendP99MS = 25.1 // ×1.255
	r.finish()
	if err := r.Verdict(); !errors.Is(err, ErrSoakBoundMissed) || r.P99WithinBound {
		t.Errorf("send p99 ×%.3f: verdict %v, want the bound missed", r.SendP99Ratio, err)
	}

	r = base()
	r.Intervals[3].TableBytes = 331 << 20 // +10.3 %
	r.finish()
	if err := r.Verdict(); !errors.Is(err, ErrSoakBoundMissed) {
		t.Errorf("table growth %+.3f: verdict %v, want the bound missed", r.TableGrowth, err)
	}

	r = base()
	r.Intervals = r.Intervals[:3] // the line past the horizon is the last: not judged
	r.finish()
	if r.TableSteady != nil {
		t.Errorf("table growth judged from %d with no later line", r.TableFromMessages)
	}

	for name, breakIt := range map[string]func(*SoakReport){
		"lost":          func(r *SoakReport) { r.Answered, r.Lost = 399, 1 },
		"doubled":       func(r *SoakReport) { r.DoubledAtRest = 1 },
		"a row missing": func(r *SoakReport) { r.StoredRows = 249 },
		"overdue":       func(r *SoakReport) { r.OverdueContent = 1 },
	} {
		r := base()
		breakIt(r)
		r.finish()
		if err := r.Verdict(); !errors.Is(err, ErrRuleBroken) {
			t.Errorf("%s: verdict %v, want a broken rule", name, err)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
