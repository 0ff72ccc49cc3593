package gateway

import (
	"fmt"
	"go.temporal.io/sdk/client"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/temporalconn"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// DefaultDatabaseURL is the database used when DATABASE_URL is unset (the local test
// server of the README).
const DefaultDatabaseURL = vocab.DefaultDatabaseURL

// Config is the configuration of a worker process. Build it with [ConfigFromEnv] or start
// from [DefaultConfig]; [Run] validates it.
type Config struct {
	// Tracing is the OpenTelemetry export (off unless OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; docs/operations.md#tracing).
	Tracing tracing.Config
	// TemporalAddress is the Temporal frontend host:port.
	TemporalAddress string
	// TemporalNamespace is the Temporal namespace.
	TemporalNamespace string
	// TemporalProfile and TemporalConfigFile choose the profile of a Temporal client
	// config file (TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE; "" the SDK's defaults).
	TemporalProfile    string
	TemporalConfigFile string
	// TemporalCompression is the gRPC compression of the worker's requests to Temporal:
	// CompressionNone (the default) or CompressionGzip. Every payload is encrypted
	// (docs/payload-codec.md), so gzip finds little to shrink and costs CPU in the worker
	// and the server on every call; gzip may still pay on a slow link.
	TemporalCompression string
	// Temporal is the resolved connection (TLS, client certificate, API key) that
	// ConfigFromEnv builds with package temporalconn; its address and namespace are
	// TemporalAddress and TemporalNamespace. Zero (a configuration built in code):
	// plaintext to TemporalAddress.
	Temporal temporalconn.Conn
	// DeploymentName and BuildID, both set, make the worker a Worker Deployment Version
	// (Worker Versioning, docs/operations.md): each workflow type declares its versioning
	// behaviour. Both empty: an unversioned worker.
	DeploymentName string
	BuildID        string
	// TaskQueue is the task queue of the workflows and activity.
	TaskQueue string
	// DatabaseURL is the PostgreSQL connection string. It may hold a password: it is never
	// logged or echoed in an error.
	DatabaseURL string
	// ILinkBaseURL is the default iLink API base (accounts keep the base URL iLink gave
	// them at enrollment).
	ILinkBaseURL string
	// ILinkCDNBaseURL is the iLink media CDN base.
	ILinkCDNBaseURL string
	// Keyring seals and opens secrets at rest (from ILINKFLOW_SEALING_KEYS or _FILE).
	Keyring *sealing.Keyring

	// Limits are iLink's observed limits and the gateway's bounds (window lifetime, reply
	// quota, text size, ...).
	Limits store.Limits
	// SendGap is the minimum gap between two sends of one bot.
	SendGap time.Duration
	// ThrottlePenalty is how long a bot's sends stop after an unexplained ret -2.
	ThrottlePenalty time.Duration
	// StalePause is how long an account pauses after a stale bot token (-14).
	StalePause time.Duration
	// PollSession bounds one polling activity on an idle account.
	PollSession time.Duration
	// PollLeaseTTL is how long a bot's poll lease lives without renewal: how soon another
	// worker resumes the bots of a dead worker (about this plus a third of it). Renewals
	// cost one statement per worker every third of it, and no Temporal action.
	PollLeaseTTL time.Duration
	// DBMaxConns bounds this worker's PostgreSQL connections, whatever the number of bots
	// (a pool_max_conns parameter in DatabaseURL wins).
	DBMaxConns int
	// MaxAccounts bounds the number of active accounts at enrollment.
	MaxAccounts int
	// SessionTTL bounds agent sessions (0: the window's expiry).
	SessionTTL time.Duration
	// Heartbeat is the heartbeat period of long-running activity.
	Heartbeat time.Duration
	// ShutdownGrace is how long a stopping worker lets in-flight activities (sends, the long
	// polls in flight) finish.
	ShutdownGrace time.Duration
	// DeferredBefore, when set, defers messages sent before it (backlog at first start).
	DeferredBefore *time.Time

	// Migrate applies the pending schema migrations at start (the default). False: the
	// worker only checks the schema and refuses to start when it lacks a migration (a
	// migration job or "starter migrate" applies them).
	Migrate bool
	// MigrateLockTimeout and MigrateStatementTimeout are the lock_timeout and
	// statement_timeout of each migration's transaction (package db).
	MigrateLockTimeout      time.Duration
	MigrateStatementTimeout time.Duration

	// LogLevel is the minimum level logged; LogFormat is "text" or "json".
	LogLevel  slog.Level
	LogFormat string

	// HTTPAddr is where the agent-facing reply API (/v1/) is served, and, when AdminAddr
	// is empty, the admin endpoints too; empty disables it (see gateway/http.go).
	HTTPAddr string
	// AdminAddr is where the admin endpoints are served: /metrics, /livez, /readyz,
	// /healthz, /codec/ and /ui/. Empty: they are served on HTTPAddr.
	AdminAddr string
	// HealthWindow is how long an active account may go without a successful getupdates
	// round trip before /healthz fails (default 3 long-poll periods).
	HealthWindow time.Duration
	// APIStoreTimeout bounds each store call the reply API makes for a request (503
	// store_unavailable past it); APIMaxUploads bounds the media replies it reads and
	// stages at once (see gateway/http.go).
	APIStoreTimeout time.Duration
	APIMaxUploads   int

	// Handler is the agent hand-off (docs/agents.md#agent-hand-off): none, echo, webhook
	// or workflow (package handoff); Options.Handler overrides it.
	Handler string
	// WebhookURL and WebhookSecret (from ILINKFLOW_WEBHOOK_SECRET only, never logged)
	// configure the webhook handler; WebhookTimeout bounds one webhook request.
	WebhookURL     string
	WebhookSecret  sealing.Secret
	WebhookTimeout time.Duration
	// AgentWorkflow and AgentTaskQueue name the agent workflow the workflow handler starts.
	AgentWorkflow  string
	AgentTaskQueue string
	// ReofferAfter is how long an unhandled message waits before it is offered again
	// while its window is open (0: never).
	ReofferAfter time.Duration

	// CodecToken (from ILINKFLOW_CODEC_TOKEN only, never logged) enables the payload
	// codec endpoint /codec/ on the HTTP server for the Temporal UI and CLI: requests
	// must carry "Authorization: Bearer <token>". Unset: the endpoint answers 404.
	// CodecCORSOrigin is the one browser origin (the Temporal UI) allowed to call it.
	// See docs/payload-codec.md.
	CodecToken      sealing.Secret
	CodecCORSOrigin string

	// UIToken (from ILINKFLOW_UI_TOKEN only, never logged) enables the enrollment web front
	// end under /ui/ on the HTTP server (docs/web-ui.md): operators log in with it. Unset:
	// /ui/ answers 404. UISecureCookie marks its session cookie Secure (served over TLS,
	// directly or behind a TLS-terminating proxy).
	UIToken        sealing.Secret
	UISecureCookie bool
	// UIClientAddressHeader names the header a trusted reverse proxy sets to the client's
	// address, by which the web front end throttles wrong logins ("": the peer address).
	// UIPublicURL is where owners reach the front end (scheme://host/prefix), for the
	// links the enrollment page hands them ("": the request's own).
	UIClientAddressHeader string
	UIPublicURL           string
	// ILinkPublicURL is where iLink clients reach the agent-facing address (the base URL
	// of the iLink facade, scheme://host/prefix), for the media and login URLs it hands
	// them ("": the request's own).
	ILinkPublicURL string
	// TemporalUIURL is the base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233):
	// the web front end links each bot to its workflows there ("": no links).
	TemporalUIURL string

	// Retention is how long the store keeps each kind of data, 0 forever
	// (docs/operations.md, "Retention"); RetentionEvery is the interval of the
	// installation's retention schedule, which the worker creates or updates at start.
	Retention      store.RetentionPolicy
	RetentionEvery time.Duration
}

// Defaults of the retention settings.
const (
	DefaultRetainContent    = 30 * 24 * time.Hour
	DefaultRetainRows       = 90 * 24 * time.Hour
	DefaultRetainQuarantine = 30 * 24 * time.Hour
	DefaultRetainAudit      = 365 * 24 * time.Hour
	DefaultRetentionEvery   = time.Hour
	// MinRetainRows bounds the rows horizon from below: a message's key must outlive any
	// chance that iLink hands the message out again (docs/operations.md, "Retention").
	MinRetainRows = 7 * 24 * time.Hour
	// MinRetentionEvery bounds the schedule's interval from below.
	MinRetentionEvery = time.Minute
)

// DefaultShutdownGrace is how long a stopping worker waits for its activities: above
// iLink's long-poll timeout (35 s), so that a graceful stop lets every long poll in flight
// end by itself instead of cutting it (a page iLink hands out as it is cut is lost).
const DefaultShutdownGrace = 40 * time.Second

// MaxHeartbeat bounds the heartbeat period: the workflows give long-running activities a
// heartbeat timeout of twice this, after which a crashed worker's activity is retried.
const MaxHeartbeat = 10 * time.Second

// Bounds of Config.PollLeaseTTL.
const (
	MinPollLeaseTTL = 3 * time.Second
	MaxPollLeaseTTL = 10 * time.Minute
)

// The gRPC compressions of Config.TemporalCompression.
const (
	CompressionNone = "none"
	CompressionGzip = "gzip"
)

// grpcCompression is the SDK's option for a TemporalCompression the config validated.
func grpcCompression(name string) client.GrpcCompression {
	if name == CompressionGzip {
		return &client.GrpcCompressionGzip{}
	}
	return &client.GrpcCompressionNone{}
}

// DefaultDBMaxConns is the default bound of a worker's PostgreSQL connections.
const DefaultDBMaxConns = 16

// DefaultConfig returns the defaults of every setting. It has no key ring: the sealing
// key has no default.
func DefaultConfig() Config {
	return Config{
		Tracing:                 tracing.Config{ServiceName: tracing.ServiceWorker},
		TemporalAddress:         "127.0.0.1:7233",
		TemporalNamespace:       "default",
		TaskQueue:               wfapi.DefaultTaskQueue,
		TemporalCompression:     CompressionNone,
		DatabaseURL:             DefaultDatabaseURL,
		ILinkBaseURL:            ilink.DefaultBaseURL,
		ILinkCDNBaseURL:         ilink.DefaultCDNBaseURL,
		Limits:                  store.DefaultLimits(),
		SendGap:                 vocab.DefaultSendGap,
		ThrottlePenalty:         vocab.DefaultThrottlePenalty,
		StalePause:              vocab.DefaultStalePause,
		PollLeaseTTL:            30 * time.Second,
		DBMaxConns:              DefaultDBMaxConns,
		PollSession:             activity.DefaultPollSession,
		MaxAccounts:             activity.DefaultMaxAccounts,
		SessionTTL:              0,
		Heartbeat:               10 * time.Second,
		ShutdownGrace:           DefaultShutdownGrace,
		Migrate:                 true,
		MigrateLockTimeout:      db.DefaultLockTimeout,
		MigrateStatementTimeout: db.DefaultStatementTimeout,
		LogLevel:                slog.LevelInfo,
		LogFormat:               "text",
		HTTPAddr:                DefaultHTTPAddr,
		HealthWindow:            DefaultHealthWindow,
		APIStoreTimeout:         replyapi.DefaultStoreTimeout,
		APIMaxUploads:           replyapi.DefaultMaxUploads,
		Handler:                 handoff.KindNone,
		WebhookTimeout:          handoff.DefaultTimeout,
		ReofferAfter:            wfapi.DefaultReofferAfter,
		Retention: store.RetentionPolicy{Content: DefaultRetainContent, Rows: DefaultRetainRows,
			Quarantine: DefaultRetainQuarantine, Audit: DefaultRetainAudit},
		RetentionEvery: DefaultRetentionEvery,
	}
}

// Versioned reports whether the worker runs as a Worker Deployment Version.
func (c Config) Versioned() bool { return c.DeploymentName != "" && c.BuildID != "" }

// HandoffConfig is the agent handler's share of the configuration.
func (c Config) HandoffConfig() handoff.Config {
	return handoff.Config{Kind: c.Handler, WebhookURL: c.WebhookURL, WebhookSecret: c.WebhookSecret,
		Timeout: c.WebhookTimeout, WorkflowType: c.AgentWorkflow, TaskQueue: c.AgentTaskQueue}
}

// ILinkConfig is the iLink client configuration the activities use.
func (c Config) ILinkConfig() ilink.Config {
	return ilink.Config{BaseURL: c.ILinkBaseURL, CDNBaseURL: c.ILinkCDNBaseURL}
}

// NewLogger returns the process logger: LogFormat to w, at LogLevel.
func (c Config) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// LogValue summarises the configuration for the log: no secret, and the database URL
// reduced to host, port, database and user.
func (c Config) LogValue() slog.Value {
	db := "invalid"
	if pc, err := pgxpool.ParseConfig(c.DatabaseURL); err == nil {
		db = fmt.Sprintf("%s@%s:%d/%s", pc.ConnConfig.User, pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	}
	keys := "none"
	if c.Keyring != nil {
		keys = c.Keyring.String()
	}
	conn := c.Temporal
	if conn.IsZero() {
		conn = temporalconn.Plain(c.TemporalAddress, c.TemporalNamespace)
	}
	conn = conn.WithTarget(c.TemporalAddress, c.TemporalNamespace)
	versioning := "off"
	if c.Versioned() {
		versioning = c.DeploymentName + "/" + c.BuildID
	}
	return slog.GroupValue(
		slog.Any("temporal", conn),
		slog.String("versioning", versioning),
		slog.String("task_queue", c.TaskQueue),
		slog.String("temporal_compression", c.TemporalCompression),
		slog.String("database", db),
		slog.String("ilink", c.ILinkBaseURL),
		slog.String("ilink_cdn", c.ILinkCDNBaseURL),
		slog.String("keys", keys),
		slog.Duration("window_lifetime", c.Limits.WindowLifetime),
		slog.Int("max_sends", int(c.Limits.MaxSends)),
		slog.Int("final_slots", int(c.Limits.FinalSlots)),
		slog.Duration("send_gap", c.SendGap),
		slog.Duration("throttle_penalty", c.ThrottlePenalty),
		slog.Duration("stale_pause", c.StalePause),
		slog.Duration("poll_session", c.PollSession),
		slog.Duration("poll_lease_ttl", c.PollLeaseTTL),
		slog.Int("db_max_conns", c.DBMaxConns),
		slog.Int("max_accounts", c.MaxAccounts),
		slog.Duration("session_ttl", c.SessionTTL),
		slog.Duration("heartbeat", c.Heartbeat),
		slog.Duration("shutdown_grace", c.ShutdownGrace),
		slog.Bool("migrate", c.Migrate),
		slog.Duration("migrate_lock_timeout", c.MigrateLockTimeout),
		slog.Duration("migrate_statement_timeout", c.MigrateStatementTimeout),
		slog.String("http_addr", c.HTTPAddr),
		slog.String("admin_addr", c.AdminAddr),
		slog.Duration("health_window", c.HealthWindow),
		slog.Duration("api_store_timeout", c.APIStoreTimeout),
		slog.Int("api_max_uploads", c.APIMaxUploads),
		slog.Bool("codec_endpoint", !c.CodecToken.IsZero()),
		slog.Bool("web_ui", !c.UIToken.IsZero()),
		slog.Duration("retain_content", c.Retention.Content),
		slog.Duration("retain_rows", c.Retention.Rows),
		slog.Duration("retain_quarantine", c.Retention.Quarantine),
		slog.Duration("retain_audit", c.Retention.Audit),
		slog.Duration("retention_every", c.RetentionEvery),
		slog.Any("tracing", c.Tracing),
	)
}
