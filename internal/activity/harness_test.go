package activity

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

var testKeys = testkit.Keyring

// syncBuffer is testkit.SyncBuffer.
type syncBuffer = testkit.SyncBuffer

// harness is a real store on its own schema, a real simulator over loopback, one bot
// registered in both, and the activities wired to them.
type harness struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *store.Store
	sim   *ilinksim.Server
	srv   *httptest.Server
	ctl   *ilinksim.Control
	acts  *Activities
	logs  *syncBuffer
	suite testsuite.WorkflowTestSuite
	bot   ilinksim.BotInfo
	key   string
}

type options struct {
	sim    func(*ilinksim.Config)
	config func(*Config)
}

func newHarness(t *testing.T, opts ...func(*options)) *harness {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = 50 * time.Millisecond
	simCfg.ThrottleBurst = 0
	if o.sim != nil {
		o.sim(&simCfg)
	}
	sim := ilinksim.New(simCfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// Deadlines and the lease's life are what a busy machine needs, not an idle one: the
	// simulator answers at once (a long poll after LongPollHold), so a test waits for none
	// of them, and a poll does not lose its lease because the machine was slow to renew
	// it. Renewals are frequent, so the tests of a lease's loss see it soon.
	cfg := Config{
		Client: ilink.Config{
			BaseURL: srv.URL, CDNBaseURL: srv.URL + "/c2c", RedirectScheme: "http",
			PollTimeout: 30 * time.Second, SendTimeout: 30 * time.Second, ControlTimeout: 30 * time.Second,
			QRStatusTimeout: 30 * time.Second,
		},
		PollSession:     200 * time.Millisecond,
		HeartbeatEvery:  10 * time.Millisecond,
		LeaseTTL:        DefaultLeaseTTL,
		LeaseRenewEvery: 100 * time.Millisecond,
		SendGap:         -1, // no pacing unless a test asks for it
		ThrottlePenalty: time.Hour,
	}
	if o.config != nil {
		o.config(&cfg)
	}
	h := &harness{
		t: t, ctx: ctx, pool: pool, store: st, sim: sim, srv: srv,
		ctl:  ilinksim.NewControl(srv.URL, srv.Client()),
		logs: logs,
		acts: &Activities{Store: st, Pool: pool, Config: cfg,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	}
	h.suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h.bot, h.key = h.newBot("")
	t.Cleanup(func() {
		// No token may ever reach a log line.
		for _, b := range h.bots() {
			if strings.Contains(logs.String(), b.Token) {
				t.Errorf("a bot token leaked into the logs")
			}
		}
	})
	return h
}

// newBot creates a bot in the simulator and registers it in the store.
func (h *harness) newBot(owner string) (ilinksim.BotInfo, string) {
	h.t.Helper()
	bot, err := h.ctl.CreateBot(h.ctx, ilinksim.CreateBotRequest{Owner: owner})
	if err != nil {
		h.t.Fatal(err)
	}
	acct, err := storetest.RegisterAccount(h.ctx, h.store, time.Now(), store.ConfirmInput{
		ProviderAccountID: bot.BotID, OwnerPeerID: bot.Owner, BaseURL: h.srv.URL,
		BotToken: sealing.NewSecret(bot.Token),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return bot, acct.AccountKey
}

func (h *harness) bots() []ilinksim.BotInfo {
	bots, err := h.ctl.Bots(context.Background())
	if err != nil {
		h.t.Errorf("list bots: %v", err)
	}
	return bots
}

func (h *harness) env() *testsuite.TestActivityEnvironment {
	env := h.suite.NewTestActivityEnvironment()
	env.RegisterActivity(h.acts)
	return env
}

// run executes one activity in a fresh test activity environment.
func run[T any](h *harness, fn any, args ...any) (T, error) {
	h.t.Helper()
	return runIn[T](h.env(), fn, args...)
}

func runIn[T any](env *testsuite.TestActivityEnvironment, fn any, args ...any) (T, error) {
	var out T
	val, err := env.ExecuteActivity(fn, args...)
	if err != nil {
		return out, err
	}
	if val != nil && val.HasValue() {
		err = val.Get(&out)
	}
	return out, err
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// poll runs PollAccount for the harness bot.
func (h *harness) poll(probe bool) (activities.PollResult, error) {
	return run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1, Probe: probe})
}

func (h *harness) inject(req ilinksim.InjectRequest) ilinksim.Injected {
	h.t.Helper()
	in, err := h.ctl.Inject(h.ctx, h.bot.BotID, req)
	if err != nil {
		h.t.Fatal(err)
	}
	return in
}

// deliver injects a text, polls it into a window and hands it off: the session to send with.
func (h *harness) deliver(text string) (activities.WindowRef, activities.HandOffOutput) {
	h.t.Helper()
	h.inject(ilinksim.InjectRequest{Text: text})
	res := must[activities.PollResult](h.t)(h.poll(false))
	if len(res.Opened) != 1 || !res.Opened[0].Deliverable {
		h.t.Fatalf("poll opened %+v, want one deliverable window", res.Opened)
	}
	ho := must[activities.HandOffOutput](h.t)(run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Attempt: 1}))
	return res.Opened[0], ho
}

func (h *harness) send(sessionID, requestID, text string) (activities.SendOutput, error) {
	out, err := run[activities.SendAnswer](h, h.acts.Send, activities.SendInput{SessionID: sessionID, RequestID: requestID,
		Content: vocab.Content{Type: "text", Text: text}})
	return out.SendOutput, err
}

// requests counts the simulator's recorded requests to an endpoint.
func (h *harness) requests(endpoint string) int {
	h.t.Helper()
	reqs, err := h.ctl.Requests(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, r := range reqs {
		if r.Endpoint == endpoint {
			n++
		}
	}
	return n
}

func (h *harness) sent() []ilinksim.SentMessage {
	h.t.Helper()
	s, err := h.ctl.Sent(h.ctx, h.bot.BotID)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(h.ctx, query, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) account() store.Account {
	h.t.Helper()
	a, err := h.store.GetAccount(h.ctx, h.key)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// appErr returns the application error an activity failed with.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an application error", err)
	}
	return ae
}

func wantNonRetryable(t *testing.T, err error, typ string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a non-retryable %s error, got nil", typ)
	}
	ae := appErr(t, err)
	if !ae.NonRetryable() || ae.Type() != typ {
		t.Fatalf("error %v: non-retryable %v type %q, want non-retryable %q", err, ae.NonRetryable(), ae.Type(), typ)
	}
}

func wantRetryable(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want a retryable error, got nil")
	}
	if ae := appErr(t, err); ae.NonRetryable() {
		t.Fatalf("error %v is non-retryable, want retryable", err)
	}
}
