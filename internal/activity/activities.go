// Package activity implements the Temporal activities of ilinkflow, one exported method
// of *Activities for each name of the public contract (package activities). Each transactional
// activity is one store call (one database transaction); protocol activities call iLink
// through the ilink client. Activities are idempotent under Temporal retries and return
// no secret: tokens are read from the store (sealed at rest) inside the activity.
package activity

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Config holds the activities' tunables. Durations are configuration so that tests stay
// short.
type Config struct {
	// TaskQueue is where workflows started by activities run.
	TaskQueue string
	// Client is the iLink client configuration (base URL, CDN, versions, timeouts).
	Client ilink.Config
	// PollSession bounds one PollAccount activity on an idle account (default 10m).
	PollSession time.Duration
	// HeartbeatEvery is the heartbeat period of long-running activities (default 10s).
	HeartbeatEvery time.Duration
	// LeaseTTL is how long a poll lease lives without renewal (default 30s): how soon a
	// dead worker's bots may be polled by another worker.
	LeaseTTL time.Duration
	// LeaseRenewEvery is the period of the lease keeper's renewals (default LeaseTTL/3).
	LeaseRenewEvery time.Duration
	// SuperviseEvery is the period of the lease supervisor's scans for dead poll
	// activities (default 1s): with a liveness session, about how long after a worker's
	// death its bots' polls are replaced.
	SuperviseEvery time.Duration
	// Namespace is the Temporal namespace of the workflows (for the calls that name it).
	Namespace string
	// SendGap is the minimum gap between two sends of one bot (default 2s; negative: no
	// gap).
	SendGap time.Duration
	// ThrottlePenalty is how long a bot's sends stop after an unexplained ret -2 (60m).
	ThrottlePenalty time.Duration
	// MaxAccounts bounds the number of active accounts at enrollment (default 100).
	MaxAccounts int
	// DeferredBefore, when set, defers messages sent before it (backlog at first start).
	DeferredBefore *time.Time
	// SessionTTL bounds agent sessions (0: the window's expiry).
	SessionTTL time.Duration
	// Poller is the configuration of the pollers StartPoller starts (stale pause,
	// back-offs); zero values take the workflow's defaults.
	Poller wfapi.PollerConfig
	// ReofferAfter is the re-offer interval of the ReplyWindow workflows SyncWindows
	// starts (wfapi.WindowInput.ReofferAfter: 0 the workflow's default, negative never).
	ReofferAfter time.Duration
	// Retention is how long the store keeps each kind of data (PurgeExpired; zero:
	// forever).
	Retention store.RetentionPolicy
}

// Activities carries the dependencies of every activity. Register a *Activities with the
// worker; its exported methods are the activities.
type Activities struct {
	Store    Store
	Pool     *pgxpool.Pool
	Temporal client.Client
	// Handler is the default route's agent handler (nil: none), for the bots without a
	// route of their own (store.Route); a bot's route, read at each hand-off, wins.
	Handler handoff.Handler
	Metrics *metrics.Product
	Config  Config
	Logger  *slog.Logger
	// NewClient builds an iLink client for a base URL and bot token (nil: ilink.New).
	NewClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
	// Typer shows "typing" while an agent works (nil: one of the activities' own). Share
	// it with the reply API so that an agent's POST /v1/typing stops the keep-alive.
	Typer     *Typer
	typerOnce sync.Once

	// hooks lets tests of this package observe fixed points of an activity (nil in
	// production).
	hooks *testHooks

	keeperOnce sync.Once
	leases     *leaseKeeper // this worker's poll leases (keeper())

	// unreadable: the accounts whose bot token this worker cannot open (logged once each).
	unreadable unreadableAccounts

	// routes caches the handlers of the bots' routes by route version.
	routes routeHandlers
}

// testHooks are called, when set, at fixed points of the activities.
type testHooks struct {
	// leased runs once PollAccount holds its lease.
	leased func(store.PollLease)
	// beforeFetch runs before the n-th getupdates (from 0) of a PollAccount, after the
	// lease was checked.
	beforeFetch func(n int)
	// afterFetch runs after a getupdates answered a page with messages, before its commit.
	afterFetch func(messages int)
	// fetched runs after every getupdates returned (with a page or an error).
	fetched func()
}

// Defaults of Config.
const (
	DefaultPollSession     = 10 * time.Minute
	DefaultHeartbeatEvery  = 10 * time.Second
	DefaultSendGap         = vocab.DefaultSendGap
	DefaultThrottlePenalty = vocab.DefaultThrottlePenalty
	DefaultMaxAccounts     = 1000
	DefaultSuperviseEvery  = time.Second
)

// withDefaults returns the configuration with every zero tunable at its default.
func (c Config) withDefaults() Config {
	if c.TaskQueue == "" {
		c.TaskQueue = wfapi.DefaultTaskQueue
	}
	if c.PollSession <= 0 {
		c.PollSession = DefaultPollSession
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseRenewEvery <= 0 || c.LeaseRenewEvery >= c.LeaseTTL/2 {
		c.LeaseRenewEvery = c.LeaseTTL / 3
	}
	if c.SuperviseEvery <= 0 {
		c.SuperviseEvery = DefaultSuperviseEvery
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.HeartbeatEvery <= 0 {
		c.HeartbeatEvery = DefaultHeartbeatEvery
	}
	if c.SendGap < 0 {
		c.SendGap = 0
	} else if c.SendGap == 0 {
		c.SendGap = DefaultSendGap
	}
	if c.ThrottlePenalty <= 0 {
		c.ThrottlePenalty = DefaultThrottlePenalty
	}
	if c.MaxAccounts <= 0 {
		c.MaxAccounts = DefaultMaxAccounts
	}
	if c.SessionTTL < 0 {
		c.SessionTTL = 0
	}
	return c
}

func (a *Activities) cfg() Config { return a.Config.withDefaults() }

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// client builds an iLink client for baseURL ("" keeps Config.Client.BaseURL) and token.
func (a *Activities) client(baseURL string, token ilink.Secret) (*ilink.Client, error) {
	cfg := a.Config.Client
	if baseURL != "" {
		cfg.BaseURL = baseURL
	}
	if a.NewClient != nil {
		return a.NewClient(cfg, token)
	}
	return ilink.New(cfg, token)
}

// botClient builds the iLink client of a stored account with its opened bot token.
func (a *Activities) botClient(acct store.AccountWithSecret) (*ilink.Client, error) {
	return a.client(acct.BaseURL, ilink.Secret(acct.BotToken.Reveal()))
}

// now is the activities' clock (activities may read the wall clock; the store never does).
func now() time.Time { return time.Now() }

// nowOr returns t, or the wall clock when t is zero (inputs carry the workflow's time).
func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t
}

// detached returns a context that outlives ctx's cancellation for at most d: used to
// record an outcome (or release a lock) after the activity was cancelled.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
