package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// roundTrips counts what a connection sends to PostgreSQL and waits for: every plain
// statement (BEGIN and COMMIT included) is one round trip, every batch is one, and every
// prepare (a statement the connection has not seen yet) is one. It counts transactions
// too: every COMMIT (sent alone or queued in a batch) and every statement or batch sent
// outside a transaction that does not begin one.
type roundTrips struct {
	mu       sync.Mutex
	trips    int
	commits  int
	elapsed  []time.Duration
	started  time.Time
	counting bool
}

func (r *roundTrips) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips, r.commits, r.elapsed, r.counting = 0, 0, nil, true
}

func (r *roundTrips) stop() (trips, commits int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counting = false
	return r.trips, r.commits
}

func (r *roundTrips) add(commit bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counting {
		r.trips++
		if commit {
			r.commits++
		}
		r.started = time.Now()
	}
}

func (r *roundTrips) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counting {
		r.elapsed = append(r.elapsed, time.Since(r.started))
	}
}

// TraceQueryStart counts a plain statement as a transaction when it is COMMIT, or when it
// runs outside a transaction (then it is a transaction of its own).
func (r *roundTrips) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	autocommit := c.PgConn().TxStatus() == 'I' && !strings.EqualFold(strings.TrimSpace(d.SQL), "begin")
	r.add(d.SQL == "commit" || autocommit)
	return ctx
}

func (r *roundTrips) countQueuedCommit(b *pgx.Batch) {
	for _, q := range b.QueuedQueries {
		if q.SQL == "commit" {
			r.mu.Lock()
			if r.counting {
				r.commits++
			}
			r.mu.Unlock()
		}
	}
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { r.end() }

// TraceBatchStart counts a batch sent outside a transaction that does not begin one as a
// transaction of its own (its statements commit together).
func (r *roundTrips) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	q := d.Batch.QueuedQueries
	begins := len(q) > 0 && strings.HasPrefix(strings.ToLower(strings.TrimSpace(q[0].SQL)), "begin")
	r.add(c.PgConn().TxStatus() == 'I' && !begins)
	r.countQueuedCommit(d.Batch)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) { r.end() }

func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.add(false)
	return ctx
}

func (r *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) { r.end() }

// newCountingEnv is an environment whose single pooled connection counts round trips.
func newCountingEnv(t *testing.T, limits store.Limits) (*env, *roundTrips) {
	t.Helper()
	rt := &roundTrips{}
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = rt
		c.MaxConns = 1
	})
	s, err := store.New(pool, testKeys, limits)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), pool: pool, store: s}, rt
}

// A page commit takes two round trips in one transaction, whatever the page's size and
// whether it merges an unanswered message, counted on a warm connection (statements
// already prepared): the locked reads, then the set-based writes with COMMIT.
const maxPageRoundTrips = 2

func TestPageCommitRoundTripsDoNotGrowWithThePage(t *testing.T) {
	t.Parallel()
	e, rt := newCountingEnv(t, store.DefaultLimits())
	b := e.register()
	page := func(size, images int) []store.PageEntry {
		entries := make([]store.PageEntry, size)
		for i := range entries {
			entries[i] = b.msg("m"+strconv.Itoa(i), t0)
			for j := 0; j < images; j++ {
				entries[i].Payload.Attachments = append(entries[i].Payload.Attachments, store.Attachment{Kind: "image", Position: j})
				entries[i].Images = append(entries[i].Images, store.ImageLocator{Position: int32(j),
					Locator: sealing.NewSecret(fmt.Sprintf("loc-%d-%d", i, j))})
			}
		}
		return entries
	}
	answer := func(res store.PageResult) {
		t.Helper()
		if _, err := e.pool.Exec(e.ctx, `UPDATE inbound_messages SET status = 'handled' WHERE message_key = $1`, res.Deliverable.MessageKey); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name     string
		answered bool // the last page's message was answered
		absorbed func(size int) int
	}{
		{"after an answered page", true, func(size int) int { return size - 1 }},
		// The page's others and the earlier deliverable are merged.
		{"after an unanswered page", false, func(size int) int { return size }},
	} {
		for _, size := range []int{1, 10, 100} {
			for _, images := range []int{0, 2} {
				name := fmt.Sprintf("%s/messages=%d/images=%d", c.name, size, images)
				t.Run(name, func(t *testing.T) {
					// Warm the connection's statements with the same shape of page.
					for range 2 {
						res := e.commit(b, t0, page(size, images)...)
						if c.answered {
							answer(res)
						}
					}
					rt.start()
					res := e.commit(b, t0, page(size, images)...)
					trips, commits := rt.stop()
					if res.Deliverable == nil || res.Inserted != size {
						t.Fatalf("page result %+v", res)
					}
					if want := c.absorbed(size); res.Absorbed != want {
						t.Fatalf("absorbed %d, want %d", res.Absorbed, want)
					}
					if trips > maxPageRoundTrips || commits != 1 {
						t.Fatalf("a %s page took %d round trips and %d commits, want at most %d and 1",
							name, trips, commits, maxPageRoundTrips)
					}
					if c.answered {
						answer(res)
					}
				})
			}
		}
	}
}

// A send's bookkeeping: reserve and start in one transaction (no pacing wait), complete
// in another (one statement), counted on a warm connection:
//   - a send through a window (the Send activity names the session and its window): the
//     session's read travels with the locks and reads, then the writes with COMMIT, then
//     the completion;
//   - the Send activity's first (the session named by id alone) and a reply by token
//     alone read the session first.
const (
	maxSendTransactions       = 2
	maxSendRoundTrips         = 3
	maxSendRoundTripsBySearch = 4
)

func TestSendMakesAFixedNumberOfTransactions(t *testing.T) {
	t.Parallel()
	e, rt := newCountingEnv(t, store.DefaultLimits())
	b := e.register()
	// The connection prepares every statement first, on another bot's window.
	warm := e.register()
	send := func(in store.ReplyInput, text string, before func()) (int, int, store.PreparedSend) {
		t.Helper()
		in.Content = vocab.Content{Type: "text", Text: text}
		in.RequestID = "activity:" + text
		if before != nil {
			before()
		}
		rt.start()
		prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
		if err != nil {
			t.Fatal(err)
		}
		if prep.Started == nil {
			t.Fatalf("send was not started at once: %+v", prep)
		}
		out, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: prep.Attempt.AttemptID,
			Status: vocab.AttemptSent, ProviderMessageID: "pm-" + text})
		if err != nil {
			t.Fatal(err)
		}
		if out.Attempt.Status != vocab.AttemptSent || out.Window.SendsLeft() != prep.Window.SendsLeft() {
			t.Fatalf("completion %+v after %+v", out, prep.Window)
		}
		trips, commits := rt.stop()
		return trips, commits, prep
	}
	byWindow := func(b *bot) (store.ReplyInput, sealing.Secret) {
		t.Helper()
		res, tok := e.deliver(b, "hello")
		sess, err := e.store.ValidateSession(e.ctx, t0, store.ByToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		return store.ReplyInput{Session: store.BySessionID(sess.SessionID), ReplyWindowID: res.Deliverable.ReplyWindowID}, tok
	}
	warmIn, warmTok := byWindow(warm)
	polled := func() {
		if err := e.store.RecordPoll(e.ctx, t0, b.key, b.generation); err != nil {
			t.Fatal(err)
		}
	}
	for i, before := range []func(){nil, nil, func() {
		if err := e.store.RecordPoll(e.ctx, t0, warm.key, warm.generation); err != nil {
			t.Fatal(err)
		}
	}} {
		send(warmIn, fmt.Sprintf("warm-up %d", i), before)
	}
	send(store.ReplyInput{Session: store.ByToken(warmTok)}, "warm-up by token", nil)

	in, tok := byWindow(b)
	// The Send activity names the session alone (unless another session of the window
	// sends): its first send reads the session first.
	activity, _ := byWindow(e.register())
	activity.ReplyWindowID = 0
	for _, c := range []struct {
		name     string
		in       store.ReplyInput
		before   func()
		maxTrips int
	}{
		{"the first through a window", in, nil, maxSendRoundTrips},
		{"the next through the window", in, nil, maxSendRoundTrips},
		{"one after a poll", in, polled, maxSendRoundTrips},
		{"the Send activity's first", activity, nil, maxSendRoundTripsBySearch},
		{"the Send activity's next", activity, nil, maxSendRoundTripsBySearch},
		{"a token's", store.ReplyInput{Session: store.ByToken(tok)}, nil, maxSendRoundTripsBySearch},
	} {
		trips, commits, _ := send(c.in, c.name, c.before)
		if commits != maxSendTransactions || trips > c.maxTrips {
			t.Fatalf("%s send took %d round trips in %d transactions, want at most %d in %d",
				c.name, trips, commits, c.maxTrips, maxSendTransactions)
		}
		t.Logf("%s send took %d round trips in %d transactions; %v", c.name, trips, commits, rt.elapsed)
	}
}

// An offer (the hand-off's session) is one transaction in two round trips on a warm
// connection: the window's lock with its account, message and route, then the writes
// with COMMIT. What the hand-off needs comes back with it, so it reads nothing after.
const maxOfferRoundTrips = 2

func TestAnOfferOpensItsSessionInTwoRoundTripsAndBringsItsWindowAndRoute(t *testing.T) {
	t.Parallel()
	e, rt := newCountingEnv(t, store.DefaultLimits())
	routed, plain := e.register(), e.register()
	if _, err := e.store.SetRoute(e.ctx, t0, webhookRoute(routed.key, "https://agent.example/hook?key=k1", routeSecret)); err != nil {
		t.Fatal(err)
	}
	offer := func(b *bot, text string) store.OpenedSession {
		t.Helper()
		res := e.commit(b, t0, b.msg(text, t0))
		tok := sealing.NewSecret("offer-token-" + b.key + "-" + text)
		rt.start()
		opened, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok})
		trips, commits := rt.stop()
		if err != nil {
			t.Fatal(err)
		}
		if trips > maxOfferRoundTrips || commits != 1 {
			t.Fatalf("an offer took %d round trips and %d commits, want at most %d and 1", trips, commits, maxOfferRoundTrips)
		}
		w, err := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
		if err != nil {
			t.Fatal(err)
		}
		if opened.Window != w || opened.Message.MessageKey != res.Deliverable.MessageKey ||
			opened.Message.Status != vocab.MessageProcessing || opened.Session.ReplyWindowID != w.ReplyWindowID {
			t.Fatalf("offer %+v, window %+v, deliverable %+v", opened, w, res.Deliverable)
		}
		return opened
	}
	offer(plain, "warm-up") // the connection prepares the statements
	if o := offer(plain, "default route"); o.Routed {
		t.Fatalf("a bot on the default route got route %+v", o.Route)
	}
	o := offer(routed, "webhook route")
	if !o.Routed || o.Route.Kind != vocab.RouteWebhook || o.Route.WebhookURL != "https://agent.example/hook?key=k1" ||
		o.Route.WebhookSecret.Reveal() != routeSecret {
		t.Fatalf("a routed bot's offer brought route %+v (routed %v)", o.Route, o.Routed)
	}
}

// A verdict (FinishMessage) is one transaction in two round trips on a warm connection:
// the message's lock with whether some of its answer is held, then the writes with
// COMMIT, the moved message coming back with them.
const maxFinishRoundTrips = 2

func TestAVerdictIsRecordedInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	e, rt := newCountingEnv(t, store.DefaultLimits())
	b := e.register()
	for i, status := range []string{vocab.MessageHandled, vocab.MessageHandled, vocab.MessageFailed} {
		res, _ := e.deliver(b, fmt.Sprintf("verdict %d", i))
		reason := ""
		if status == vocab.MessageFailed {
			reason = "the agent gave up"
		}
		rt.start()
		m, err := e.store.FinishMessage(e.ctx, t0.Add(time.Second), res.Deliverable.MessageKey, status, reason)
		trips, commits := rt.stop()
		if err != nil {
			t.Fatal(err)
		}
		stored, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != status || m.FailureReason != reason || !reflect.DeepEqual(m, stored) {
			t.Fatalf("verdict %s returned %+v, stored %+v", status, m, stored)
		}
		if i > 0 && (trips > maxFinishRoundTrips || commits != 1) { // the first warms the statements
			t.Fatalf("a %s verdict took %d round trips and %d commits, want at most %d and 1", status, trips, commits, maxFinishRoundTrips)
		}
	}
}

// A content purge batch locks the accounts of its messages in one statement, however many
// bots they belong to: a page commit of one of them waits for the batch's few statements,
// not for a round trip per bot.
func TestAContentPurgeBatchTakesAsManyRoundTripsForManyBotsAsForOne(t *testing.T) {
	t.Parallel()
	e, rt := newCountingEnv(t, store.DefaultLimits())
	policy := store.RetentionPolicy{Content: 30 * 24 * time.Hour, Rows: 90 * 24 * time.Hour,
		Quarantine: 30 * 24 * time.Hour, Audit: 365 * 24 * time.Hour}
	trips := func(bots int) int {
		t.Helper()
		for range bots {
			b := e.register()
			for i := range 2 { // the first window superseded, its content due
				at := t0.Add(time.Duration(i) * time.Minute)
				e.commit(b, at, b.msg("words", at))
			}
		}
		rt.start()
		n, err := e.store.PurgeBatch(e.ctx, t0.Add(policy.Content+24*time.Hour), policy, store.RetentionContent, 0)
		trips, _ := rt.stop()
		if err != nil || n != bots {
			t.Fatalf("a purge over %d bots erased %d (%v), want %d", bots, n, err, bots)
		}
		return trips
	}
	trips(1) // the connection prepares the statements
	one, many := trips(1), trips(20)
	if many != one {
		t.Fatalf("a content purge batch took %d round trips over 20 bots and %d over one", many, one)
	}
}
