package store_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// benchAccounts are the concurrency levels: one poller, and sixteen accounts committing
// (or sending) at once, each goroutine with its own bot, as one worker process would.
var benchAccounts = []int{1, 16}

// benchWarmup is how long the workers run untimed before the measured ops: the seed's
// benchmark warms up for one second (its --warmup=1 in the side-by-side comparison).
const benchWarmup = time.Second

// benchSettle is how long the workers run on, untimed, after the warm-up's last
// statistics were gathered: each connection plans its statements again meanwhile.
const benchSettle = 100 * time.Millisecond

// benchWorker is one account's loop body. prepare (optional) runs before each op, outside
// the latency sample (it is still inside the wall clock the throughput is computed from);
// op is the measured operation and returns how many items (messages, sends) it handled.
type benchWorker struct {
	prepare func() error
	op      func() (int, error)
}

// benchRun spreads b.N operations over the workers (one goroutine each), records every
// op's duration and reports:
//   - unit (messages/s or sends/s): the in-call rate, defined as the seed's benchmark
//     defines it (items over the time spent inside the measured call; the agent's
//     handled update and the window roll-over in prepare are outside it, as the seed's
//     are), summed over the workers;
//   - "wall_" + unit: items per wall-clock second, prepare included;
//   - p50_ms and p99_ms: the op latency percentiles.
func benchRun(b *testing.B, e *env, workers []benchWorker, unit string) {
	var next atomic.Int64
	lat := make([][]time.Duration, len(workers))
	items := make([]int, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	// Warm-up, untimed, all workers at once (at least one op each), for benchWarmup in
	// all, as the seed's benchmark warms up for a second before it measures. Half way and
	// at its end the schema's statistics are gathered (analyzeSchema), as autovacuum keeps
	// them current while a production gateway's tables grow; after each, the workers run
	// on (the second half, then benchSettle) so that PostgreSQL settles on the plans of
	// every connection's prepared statements again before the measurement (it plans a
	// statement's first five executions on a connection one by one before it considers a
	// generic plan, and new statistics make it plan again).
	warmUp := func(d time.Duration) {
		end := time.Now().Add(d)
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for first := true; first || time.Now().Before(end); first = false {
					if w.prepare != nil {
						if errs[i] = w.prepare(); errs[i] != nil {
							return
						}
					}
					if _, errs[i] = w.op(); errs[i] != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("worker %d warm-up: %v", i, err)
			}
		}
	}
	warmUp(benchWarmup / 2)
	if err := analyzeSchema(e); err != nil {
		b.Fatal(err)
	}
	warmUp(benchWarmup / 2)
	if err := analyzeSchema(e); err != nil {
		b.Fatal(err)
	}
	warmUp(benchSettle)
	b.ResetTimer()
	start := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if w.prepare != nil {
					if err := w.prepare(); err != nil {
						errs[i] = fmt.Errorf("prepare: %w", err)
						return
					}
				}
				t := time.Now()
				n, err := w.op()
				lat[i] = append(lat[i], time.Since(t))
				if err != nil {
					errs[i] = err
					return
				}
				items[i] += n
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("worker %d: %v", i, err)
		}
	}
	var all []time.Duration
	total := 0
	inCall := 0.0
	for i := range workers {
		all = append(all, lat[i]...)
		total += items[i]
		var spent time.Duration
		for _, d := range lat[i] {
			spent += d
		}
		if spent > 0 {
			inCall += float64(items[i]) / spent.Seconds()
		}
	}
	slices.Sort(all)
	b.ReportMetric(inCall, unit)
	b.ReportMetric(float64(total)/elapsed.Seconds(), "wall_"+unit)
	b.ReportMetric(benchPercentile(all, 0.50), "p50_ms")
	b.ReportMetric(benchPercentile(all, 0.99), "p99_ms")
}

// analyzeSchema gathers the statistics of the benchmark schema's tables, as autovacuum
// does within a minute of a table's first rows in production. The schema is emptied for
// each benchmark, so without it PostgreSQL would plan the warm-up's statements for empty
// tables and keep those plans (a sequential scan of a conversation's history where an
// index lookup belongs), and a page would cost more the longer the benchmark ran. Once
// half way was not enough: with a few hundred messages a sequential scan still looked as
// cheap as an index probe, and the foreign-key check of every new reply window (a plan
// PostgreSQL keeps per connection) read the whole inbox for the rest of the run.
func analyzeSchema(e *env) error {
	rows, err := e.pool.Query(e.ctx, "SELECT format('%I', tablename) FROM pg_tables WHERE schemaname = current_schema()")
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	if _, err := e.pool.Exec(e.ctx, "ANALYZE "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// benchPercentile is the nearest-rank percentile of sorted durations, in milliseconds.
func benchPercentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// benchCommitPages commits pages of size messages per op, on each of accounts bots.
//
// After each page an instant agent takes the deliverable message (one single-row UPDATE
// to handled, outside the latency sample): the benchmark measures the steady state of
// an agent that keeps up. Without it every page would merge the previous undelivered
// message and its summary would grow with b.N, making results depend on -benchtime.
func benchCommitPages(b *testing.B, size int) {
	for _, accounts := range benchAccounts {
		b.Run("accounts="+strconv.Itoa(accounts), func(b *testing.B) {
			e := newEnv(b)
			workers := make([]benchWorker, accounts)
			for i := range workers {
				bt := e.register()
				var page int
				var handoff string
				workers[i] = benchWorker{
					prepare: func() error {
						if handoff == "" {
							return nil
						}
						_, err := e.pool.Exec(e.ctx, `UPDATE inbound_messages SET status = 'handled', updated_at = $2
							WHERE message_key = $1 AND status = 'received'`, handoff, t0)
						handoff = ""
						return err
					},
					op: func() (int, error) {
						page++
						now := t0.Add(time.Duration(page) * time.Second)
						entries := make([]store.PageEntry, size)
						for j := range entries {
							entries[j] = bt.msg("benchmark message "+strconv.Itoa(j), now)
							entries[j].Cursor = bt.cursor
						}
						next := "Ck" + strconv.Itoa(page)
						res, err := e.store.CommitPage(e.ctx, now, store.PageInput{
							AccountKey: bt.key, Generation: bt.generation, ExpectedCursor: bt.cursor, NextCursor: next, Entries: entries,
						})
						if err != nil {
							return 0, err
						}
						if res.Inserted != size || res.Deliverable == nil {
							return 0, fmt.Errorf("page %d: %+v", page, res)
						}
						bt.cursor = next
						handoff = res.Deliverable.MessageKey
						return size, nil
					},
				}
			}
			benchRun(b, e, workers, "messages/s")
		})
	}
}

// BenchmarkCommitPage1 commits one-message pages (the common long-poll answer).
func BenchmarkCommitPage1(b *testing.B) { benchCommitPages(b, 1) }

// BenchmarkCommitPage10 commits ten-message pages (a backlog burst, merged into one).
func BenchmarkCommitPage10(b *testing.B) { benchCommitPages(b, 10) }

// BenchmarkCommitPage100 commits hundred-message pages (the backlog a bot finds after a
// long downtime, merged into one).
func BenchmarkCommitPage100(b *testing.B) { benchCommitPages(b, 100) }

// BenchmarkReserveStartComplete measures one send's bookkeeping on the path the Send
// activity takes when no pacing wait separates reserve and start: ReserveAndStart with the
// session's id, its window and a request id, as the activity calls it (one transaction:
// reserve, start, and what transmitting needs), and CompleteSend (one transaction,
// returning the window's sends left), per op.
// BenchmarkReserveThenStartComplete measures the three-transaction path (reserve; start
// after a pacing wait; complete), by session token.
//
// Quota: the default quota is 10 sends per window, which would make every tenth op pay
// for a page commit and a session. The store is instead built with newEnvWith and
// MaxSends = 1000 (the largest the store accepts: send indexes of one message are < 1000),
// so the per-send SQL is unchanged (same statements, same quota check) and a worker rolls
// over to a new message, window and session only every 1000 sends. The roll-over runs in
// prepare: outside the latency sample, inside the wall clock of sends/s.
func BenchmarkReserveStartComplete(b *testing.B) {
	var ops atomic.Int64
	benchSends(b, func(e *env, now time.Time, ref benchSession) (store.Attempt, error) {
		prep, err := e.store.ReserveAndStart(e.ctx, now, store.ReplyInput{Session: store.BySessionID(ref.id),
			ReplyWindowID: ref.window, RequestID: "activity:bench/" + strconv.FormatInt(ops.Add(1), 10),
			Content: text("benchmark reply")}, store.SendPacing{})
		if err != nil {
			return store.Attempt{}, fmt.Errorf("reserve and start: %w", err)
		}
		if prep.Started == nil {
			return store.Attempt{}, fmt.Errorf("reserve and start: not started: %+v", prep)
		}
		return prep.Attempt, nil
	})
}

// BenchmarkReserveThenStartComplete is BenchmarkReserveStartComplete with the reservation
// and the start in two transactions (the path after a pacing wait).
func BenchmarkReserveThenStartComplete(b *testing.B) {
	benchSends(b, func(e *env, now time.Time, ref benchSession) (store.Attempt, error) {
		a, err := e.reserve(now, storeReply(ref.tok, "benchmark reply"))
		if err != nil {
			return store.Attempt{}, fmt.Errorf("reserve: %w", err)
		}
		if _, err := e.start(now, store.ByToken(ref.tok), a.AttemptID); err != nil {
			return store.Attempt{}, fmt.Errorf("start: %w", err)
		}
		return a, nil
	})
}

// benchSession is the agent session a benchmark worker sends through.
type benchSession struct {
	tok    sealing.Secret
	id     string
	window int64
}

// benchSends runs sends whose reservation and start are made by reserveStart, each then
// completed as sent.
func benchSends(b *testing.B, reserveStart func(e *env, now time.Time, ref benchSession) (store.Attempt, error)) {
	limits := store.DefaultLimits()
	limits.MaxSends = 1000
	// No send kept for a final answer: every send of a window is an ordinary reply (the
	// same statements; the kept slot would refuse the window's last one).
	limits.FinalSlots = 0
	for _, accounts := range benchAccounts {
		b.Run("accounts="+strconv.Itoa(accounts), func(b *testing.B) {
			e := newEnvWith(b, limits)
			workers := make([]benchWorker, accounts)
			for i := range workers {
				bt := e.register()
				var ref benchSession
				left := int32(0) // sends left in the current window
				windows := 0
				workers[i] = benchWorker{
					prepare: func() error {
						if left > 0 {
							return nil
						}
						windows++
						now := t0.Add(time.Duration(windows) * time.Second)
						m := bt.msg("benchmark window "+strconv.Itoa(windows), now)
						m.Cursor = bt.cursor
						next := "Ck" + strconv.Itoa(windows)
						res, err := e.store.CommitPage(e.ctx, now, store.PageInput{
							AccountKey: bt.key, Generation: bt.generation, ExpectedCursor: bt.cursor, NextCursor: next,
							Entries: []store.PageEntry{m},
						})
						if err != nil {
							return err
						}
						if res.Deliverable == nil {
							return fmt.Errorf("window %d: nothing deliverable", windows)
						}
						bt.cursor = next
						tok := sealing.NewSecret(fmt.Sprintf("bench-session-%s-%d", bt.key, windows))
						opened, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{
							ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok})
						if err != nil {
							return err
						}
						ref = benchSession{tok: tok, id: opened.Session.SessionID, window: res.Deliverable.ReplyWindowID}
						left = limits.MaxSends
						return nil
					},
					op: func() (int, error) {
						now := t0.Add(time.Duration(windows) * time.Second)
						a, err := reserveStart(e, now, ref)
						if err != nil {
							return 0, err
						}
						if _, err := e.store.CompleteSend(e.ctx, now, store.Completion{
							AttemptID: a.AttemptID, Status: vocab.AttemptSent, ProviderMessageID: "pm-" + a.AttemptID,
						}); err != nil {
							return 0, fmt.Errorf("complete: %w", err)
						}
						left--
						return 1, nil
					},
				}
			}
			benchRun(b, e, workers, "sends/s")
		})
	}
}
