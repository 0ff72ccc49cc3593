package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// switchSettings are the settings TestTheStoreKeepsItsRulesWithEachSpeculativePathOff
// runs the store's rule tests under: each speculative path off alone (the predicted send
// with the reservation batcher, which needs it), and every path off.
var switchSettings = []struct {
	name string
	spec store.Speculation
}{
	{"off=predicted-page", store.SpeculationAll &^ store.PredictedPage},
	{"off=predicted-send", store.SpeculationAll &^ (store.PredictedSend | store.ReservationBatcher)},
	{"off=reservation-batcher", store.SpeculationAll &^ store.ReservationBatcher},
	{"off=completion-batcher", store.SpeculationAll &^ store.CompletionBatcher},
	{"off=all", store.SpeculationNone},
}

const switchTest = "TestTheStoreKeepsItsRulesWithEachSpeculativePathOff"

// speculationOf is the speculative paths of the stores newEnv makes for t: every path,
// unless t runs under switchTest, whose sub-tests are named after a switchSetting.
func speculationOf(t testing.TB) store.Speculation {
	parts := strings.Split(t.Name(), "/")
	if len(parts) > 1 && parts[0] == switchTest {
		for _, s := range switchSettings {
			if s.name == parts[1] {
				return s.spec
			}
		}
	}
	return store.SpeculationAll
}

// With any speculative path off, the store keeps the rules its tests check: the property
// test's invariants, one winner of racing page commits, the outcomes of sends and
// completions, alone and concurrent. Each test runs under the settings that turn off a
// path it goes through (under every path off, all of them), on stores made by newEnv.
// The races of reservations by token and of starts take no speculative path.
func TestTheStoreKeepsItsRulesWithEachSpeculativePathOff(t *testing.T) {
	t.Parallel()
	const (
		page       = store.PredictedPage
		send       = store.PredictedSend | store.ReservationBatcher
		batch      = store.ReservationBatcher
		completion = store.CompletionBatcher
	)
	rules := []struct {
		name string
		test func(*testing.T)
		// paths are the paths the test goes through concurrently or between the steps it
		// checks (a completion made alone before the step checked is not counted); needs
		// are the paths whose use it checks.
		paths, needs store.Speculation
	}{
		{"PropertyPageCommitKeepsInvariants", TestPropertyPageCommitKeepsInvariants, page, 0},
		{"APredictedPageIsCommittedAsThePageReadFirst", TestAPredictedPageIsCommittedAsThePageReadFirst, page, 0},
		{"ConcurrencyPageCommitsWithSameCursorOneWins", TestConcurrencyPageCommitsWithSameCursorOneWins, page, 0},
		{"ConcurrencyWindowRetirementDuringReplyDoesNotDeadlock", TestConcurrencyWindowRetirementDuringReplyDoesNotDeadlock, page, 0},
		{"APredictedSendIsReservedAsTheSendReadFirst", TestAPredictedSendIsReservedAsTheSendReadFirst, send, 0},
		{"ASendNamingItsWindowKeepsTheSessionRules", TestASendNamingItsWindowKeepsTheSessionRulesAndWritesNothingWhenRefused, send, 0},
		{"ReservationWithRequestIDIsIdempotent", TestReservationWithRequestIDIsIdempotent, send, 0},
		{"ReservationsArrivingTogetherAreEachCommittedAsAlone", TestReservationsArrivingTogetherAreEachCommittedAsAlone, batch, store.PredictedSend},
		{"CompletionsArrivingTogetherAreEachCommittedAsAlone", TestCompletionsArrivingTogetherAreEachCommittedAsAlone, completion, 0},
		{"CompletionOutcomesAndUnknownIsNeverResent", TestCompletionOutcomesAndUnknownIsNeverResent, completion, 0},
	}
	for _, s := range switchSettings {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ran := 0
			for _, r := range rules {
				if r.paths&^s.spec == 0 || !s.spec.Has(r.needs) {
					continue // no path it takes is off, or it checks one that is
				}
				ran++
				t.Run(r.name, r.test)
			}
			if ran == 0 {
				t.Fatal("no test runs under this setting")
			}
		})
	}
}

// With a speculative path off, the store does not take it: pages and sends that would be
// predicted are read first, and concurrent reservations and completions that would share
// a transaction each commit in one of their own.
func TestASpeculativePathThatIsOffIsNotTaken(t *testing.T) {
	t.Parallel()
	perBatch := &statementsPerBatch{}
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = perBatch })
	withSpeculation := func(t *testing.T, spec store.Speculation) *env {
		t.Helper()
		s, err := store.NewWithOptions(pool, testKeys, store.DefaultLimits(), store.Options{Speculation: spec})
		if err != nil {
			t.Fatal(err)
		}
		if s.Speculation() != spec {
			t.Fatalf("store takes %v, want %v", s.Speculation(), spec)
		}
		return &env{t: t, ctx: context.Background(), pool: pool, store: s}
	}

	t.Run("predicted page", func(t *testing.T) {
		for spec, want := range map[store.Speculation]string{
			store.SpeculationAll:                        store.PagePredicted,
			store.SpeculationAll &^ store.PredictedPage: store.PageReadFirst,
		} {
			e := withSpeculation(t, spec)
			b := e.register()
			first := e.commit(b, t0, b.msg("first", t0))
			// Answered: nothing is left unanswered, so the next page can be predicted.
			if _, err := e.pool.Exec(e.ctx, `UPDATE inbound_messages SET status = 'handled' WHERE message_key = $1`, first.Deliverable.MessageKey); err != nil {
				t.Fatal(err)
			}
			second := e.commit(b, t0, b.msg("second", t0.Add(time.Second)))
			if first.Commit != store.PageReadFirst || second.Commit != want {
				t.Fatalf("%v: pages committed %q then %q, want %q then %q", spec, first.Commit, second.Commit, store.PageReadFirst, want)
			}
		}
	})

	t.Run("predicted send", func(t *testing.T) {
		for spec, want := range map[store.Speculation]string{
			store.SpeculationAll: store.SendPredicted,
			store.SpeculationAll &^ (store.PredictedSend | store.ReservationBatcher): store.SendReadFirst,
		} {
			e := withSpeculation(t, spec)
			b := e.register()
			in := sendThroughWindow(e, b)
			var commits []string
			for _, request := range []string{"first", "second"} {
				in.RequestID, in.Content = "activity:"+request, text(request)
				prep := e.sendAndComplete(in)
				commits = append(commits, prep.Commit)
			}
			if commits[0] != store.SendReadFirst || commits[1] != want {
				t.Fatalf("%v: sends committed %q, want %q then %q", spec, commits, store.SendReadFirst, want)
			}
		}
	})

	// The batchers: with the path on, concurrent callers share a transaction at least once
	// in a few rounds (it batches naturally, so a round may not); off, never.
	const rounds, bots = 3, 12
	batched := func(t *testing.T, spec store.Speculation, statement string, round func(e *env)) {
		t.Helper()
		on := spec == store.SpeculationAll
		most := 0
		for i := 0; i < rounds && (!on || most < 2); i++ {
			perBatch.start(statement)
			round(withSpeculation(t, spec))
			most = max(most, perBatch.stop())
		}
		if on && most < 2 {
			t.Fatalf("%v: no %s shared a transaction in %d rounds", spec, statement, rounds)
		}
		if !on && most > 1 {
			t.Fatalf("%v: %d %s statements shared a transaction", spec, most, statement)
		}
	}

	t.Run("reservation batcher", func(t *testing.T) {
		for _, spec := range []store.Speculation{store.SpeculationAll, store.SpeculationAll &^ store.ReservationBatcher} {
			batched(t, spec, "SendState", func(e *env) {
				ins := make([]store.ReplyInput, bots)
				for i := range ins {
					ins[i] = sendThroughWindow(e, e.register())
					ins[i].RequestID, ins[i].Content = "activity:first", text("first")
					e.sendAndComplete(ins[i])
				}
				outs := make([]store.PreparedSend, bots)
				errs := make([]error, bots)
				atOnce(bots, func(i int) func() {
					in := ins[i]
					in.RequestID, in.Content = "activity:second", text("second")
					return func() { outs[i], errs[i] = e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{}) }
				})
				for i := range outs {
					if errs[i] != nil || outs[i].Started == nil || outs[i].Commit != store.SendPredicted {
						t.Fatalf("%v: second send of bot %d: %+v %v, want started, predicted", spec, i, outs[i], errs[i])
					}
				}
			})
		}
	})

	t.Run("completion batcher", func(t *testing.T) {
		for _, spec := range []store.Speculation{store.SpeculationAll, store.SpeculationAll &^ store.CompletionBatcher} {
			batched(t, spec, "CompleteSendingAttempt", func(e *env) {
				started := make([]store.Attempt, bots)
				for i := range started {
					_, tok := e.deliver(e.register(), "hello")
					prep, err := e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(tok), Content: text("reply")}, store.SendPacing{})
					if err != nil || prep.Started == nil {
						t.Fatalf("send %d: %+v %v", i, prep, err)
					}
					started[i] = prep.Attempt
				}
				errs := make([]error, bots)
				atOnce(bots, func(i int) func() {
					return func() {
						_, errs[i] = e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: started[i].AttemptID,
							Status: vocab.AttemptSent, ProviderMessageID: fmt.Sprintf("pm-%d", i)})
					}
				})
				for i, err := range errs {
					if err != nil {
						t.Fatalf("%v: completion %d: %v", spec, i, err)
					}
				}
			})
		}
	})
}

// sendThroughWindow delivers a message to b and returns a send through its window by its
// session's id, as the Send activity makes it (the path a send hint is kept for).
func sendThroughWindow(e *env, b *bot) store.ReplyInput {
	e.t.Helper()
	res, tok := e.deliver(b, "hello")
	sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
	if err != nil {
		e.t.Fatal(err)
	}
	return store.ReplyInput{Session: store.BySessionID(sess.SessionID), ReplyWindowID: res.Deliverable.ReplyWindowID}
}

// sendAndComplete reserves and starts in, then completes it as sent.
func (e *env) sendAndComplete(in store.ReplyInput) store.PreparedSend {
	e.t.Helper()
	prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
	if err != nil || prep.Started == nil {
		e.t.Fatalf("send %s: %+v %v", in.RequestID, prep, err)
	}
	if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: prep.Attempt.AttemptID,
		Status: vocab.AttemptSent, ProviderMessageID: "pm-" + in.RequestID}); err != nil {
		e.t.Fatal(err)
	}
	return prep
}

// statementsPerBatch finds the most statements of one sqlc name that a batch sent to
// PostgreSQL held while counting: a transaction of the store sends its statements in
// batches, and a transaction shared by several callers holds one such statement per
// caller in one batch.
type statementsPerBatch struct {
	mu        sync.Mutex
	statement string
	most      int
}

func (s *statementsPerBatch) start(statement string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statement, s.most = statement, 0
}

func (s *statementsPerBatch) stop() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statement = ""
	return s.most
}

func (s *statementsPerBatch) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statement == "" {
		return ctx
	}
	n := 0
	for _, q := range d.Batch.QueuedQueries {
		if strings.HasPrefix(q.SQL, "-- name: "+s.statement+" ") {
			n++
		}
	}
	s.most = max(s.most, n)
	return ctx
}

func (s *statementsPerBatch) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *statementsPerBatch) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *statementsPerBatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (s *statementsPerBatch) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The setting names the paths that are on; String writes what ParseSpeculation reads; a
// reservation batcher without the predicted send it batches is refused, by the parser and
// by the store.
func TestSpeculationIsWrittenAsTheSettingNamesIt(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]store.Speculation{
		"all":                                store.SpeculationAll,
		"none":                               store.SpeculationNone,
		"predicted-page":                     store.PredictedPage,
		"predicted-page,completion-batcher":  store.PredictedPage | store.CompletionBatcher,
		"predicted-send,reservation-batcher": store.PredictedSend | store.ReservationBatcher,
		"predicted-page,predicted-send,reservation-batcher,completion-batcher": store.SpeculationAll,
	} {
		got, err := store.ParseSpeculation(v)
		if err != nil || got != want {
			t.Fatalf("%q: %v %v, want %v", v, got, err, want)
		}
		if back, err := store.ParseSpeculation(got.String()); err != nil || back != got {
			t.Fatalf("%q written as %q reads back as %v %v", v, got.String(), back, err)
		}
	}
	for _, v := range []string{"", "reservation-batcher", "completion-batcher,reservation-batcher", "predicted", "all,none", "predicted-page,"} {
		if got, err := store.ParseSpeculation(v); !errors.Is(err, store.ErrInvalidSpeculation) || got != 0 {
			t.Errorf("%q: %v %v, want ErrInvalidSpeculation", v, got, err)
		}
	}
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/never-dialed")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for spec, ok := range map[store.Speculation]bool{
		store.SpeculationAll:                        true,
		store.SpeculationNone:                       true,
		store.SpeculationAll &^ store.PredictedSend: false,
		store.SpeculationAll | 1<<7:                 false,
	} {
		_, err := store.NewWithOptions(pool, testKeys, store.DefaultLimits(), store.Options{Speculation: spec})
		if (err == nil) != ok || (err != nil && !errors.Is(err, store.ErrInvalidSpeculation)) {
			t.Errorf("%v: %v", spec, err)
		}
	}
	s, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if s.Speculation() != store.SpeculationAll {
		t.Fatalf("New takes %v, want every path", s.Speculation())
	}
}
