package workflows_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	ilkactivity "github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// rig is one workflow test: the SDK's time-skipping test environment driving the real
// activities against a real PostgreSQL schema and the real simulator over loopback. Only
// the activities that talk to the Temporal server itself (starting and signalling other
// workflows) are recorded instead of run: the test environment has no server; the
// end-to-end tests run them for real.
type rig struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *store.Store
	sim   *ilinksim.Server
	srv   *httptest.Server
	ctl   *ilinksim.Control
	acts  *ilkactivity.Activities
	env   *testsuite.TestWorkflowEnvironment

	mu      sync.Mutex
	synced  []activities.WindowsInput
	started []activities.AccountRef
	stopped []string
}

var keyring = testkit.Keyring

func newRig(t *testing.T, limits store.Limits) *rig {
	t.Helper()
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, keyring, limits)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = 50 * time.Millisecond
	cfg.ThrottleBurst = 0
	sim := ilinksim.New(cfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	r := &rig{t: t, ctx: context.Background(), pool: pool, store: st, sim: sim, srv: srv,
		ctl: ilinksim.NewControl(srv.URL, srv.Client())}
	r.acts = &ilkactivity.Activities{
		Store: st, Pool: pool,
		Config: ilkactivity.Config{
			Client:         ilink.Config{BaseURL: srv.URL, CDNBaseURL: srv.URL + "/c2c", RedirectScheme: "http", PollTimeout: 200 * time.Millisecond},
			PollSession:    time.Second,
			HeartbeatEvery: time.Second,
			SendGap:        time.Millisecond,
			MaxAccounts:    10,
		},
	}
	r.resetEnv()
	return r
}

// resetEnv gives the rig a fresh workflow test environment (one workflow run each).
func (r *rig) resetEnv() {
	var suite testsuite.WorkflowTestSuite
	r.env = suite.NewTestWorkflowEnvironment()
	r.env.SetTestTimeout(2 * time.Minute)
	workflows.Register(r.env)
	r.env.RegisterActivity(r.acts)
	r.env.OnActivity(r.acts.SyncWindows, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.WindowsInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.synced = append(r.synced, in)
		return nil
	})
	r.env.OnActivity(r.acts.StartPoller, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.AccountRef) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.started = append(r.started, in)
		return nil
	})
	r.env.OnActivity(r.acts.StopPollers, mock.Anything, mock.Anything).Return(func(_ context.Context, keys []string) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stopped = append(r.stopped, keys...)
		return nil
	})
}

// simBot is a bot created in the simulator and registered in the store.
type simBot struct {
	info ilinksim.BotInfo
	key  string
}

func (r *rig) bot() simBot {
	r.t.Helper()
	info, err := r.ctl.CreateBot(r.ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := storetest.RegisterAccount(r.ctx, r.store, time.Now(), store.ConfirmInput{
		ProviderAccountID: info.BotID, OwnerPeerID: info.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(info.Token),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return simBot{info: info, key: a.AccountKey}
}

// deliver injects a user message and commits it by running one poll activity.
func (r *rig) deliver(b simBot, text string) activities.WindowRef {
	r.t.Helper()
	if _, err := r.ctl.InjectText(r.ctx, b.info.BotID, "", text); err != nil {
		r.t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	aenv := suite.NewTestActivityEnvironment()
	aenv.RegisterActivity(r.acts)
	v, err := aenv.ExecuteActivity(r.acts.PollAccount, activities.PollInput{AccountKey: b.key, Generation: 1})
	if err != nil {
		r.t.Fatal(err)
	}
	var res activities.PollResult
	if err := v.Get(&res); err != nil {
		r.t.Fatal(err)
	}
	if len(res.Opened) != 1 {
		r.t.Fatalf("poll opened %d windows: %+v", len(res.Opened), res)
	}
	return res.Opened[0]
}

func windowInput(w activities.WindowRef, limits store.Limits) wfapi.WindowInput {
	return wfapi.WindowInput{ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey,
		ExpiresAt: w.ExpiresAt, MaxSends: limits.MaxSends, Deliverable: w.Deliverable}
}

type activityInfo = activity.Info

func asCAN(err error, target **workflow.ContinueAsNewError) bool { return errors.As(err, target) }
