package gateway

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/redact"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/internal/webui"
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
	// TaskQueue is the task queue of the workflows and activities.
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
	// Heartbeat is the heartbeat period of long-running activities.
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

	// Handler is the agent hand-off (design.md §5): none, echo, webhook or workflow
	// (package handoff); Options.Handler overrides it.
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
	// TemporalUIURL is the base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233):
	// the web front end links each bot to its workflows there ("": no links).
	TemporalUIURL string
}

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
		DatabaseURL:             DefaultDatabaseURL,
		ILinkBaseURL:            ilink.DefaultBaseURL,
		ILinkCDNBaseURL:         ilink.DefaultCDNBaseURL,
		Limits:                  store.DefaultLimits(),
		SendGap:                 vocab.DefaultSendGap,
		ThrottlePenalty:         vocab.DefaultThrottlePenalty,
		StalePause:              vocab.DefaultStalePause,
		PollLeaseTTL:            30 * time.Second,
		DBMaxConns:              DefaultDBMaxConns,
		PollSession:             activities.DefaultPollSession,
		MaxAccounts:             activities.DefaultMaxAccounts,
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
	}
}

// setting is one configuration value: a flag, its environment fallback and its default.
type setting struct {
	flag, env, help string
	// def renders the default from DefaultConfig.
	def func(c Config) string
	// set parses a value into c; its error says what is wrong without naming the source.
	set func(c *Config, v string) error
	// secret values are never echoed in errors.
	secret bool
	// boolean flags may be given without a value (--migrate means --migrate=true).
	boolean bool
}

var settings = []setting{
	{flag: "temporal-address", env: "TEMPORAL_ADDRESS", help: "Temporal frontend host:port",
		def: func(c Config) string { return c.TemporalAddress },
		set: func(c *Config, v string) error {
			host, port, err := net.SplitHostPort(v)
			if err != nil || host == "" {
				return errors.New("want host:port, e.g. 127.0.0.1:7233")
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return errors.New("port must be a number in 1..65535")
			}
			c.TemporalAddress = v
			return nil
		}},
	{flag: "temporal-namespace", env: "TEMPORAL_NAMESPACE", help: "Temporal namespace",
		def: func(c Config) string { return c.TemporalNamespace },
		set: func(c *Config, v string) error { c.TemporalNamespace = v; return nil }},
	{flag: "temporal-profile", env: "TEMPORAL_PROFILE", help: "profile of the Temporal client config file (TLS, API key and address as the temporal CLI reads them)",
		def: func(c Config) string { return c.TemporalProfile },
		set: func(c *Config, v string) error { c.TemporalProfile = v; return nil }},
	{flag: "temporal-config-file", env: "TEMPORAL_CONFIG_FILE", help: "Temporal client config file (TOML profiles; unset: the user's temporalio/temporal.toml when present)",
		def: func(c Config) string { return c.TemporalConfigFile },
		set: func(c *Config, v string) error { c.TemporalConfigFile = v; return nil }},
	{flag: "deployment-name", env: EnvDeploymentName, help: "Worker Deployment name: with --build-id, the worker runs as that deployment version (Worker Versioning)",
		def: func(c Config) string { return c.DeploymentName },
		set: func(c *Config, v string) error { c.DeploymentName = v; return nil }},
	{flag: "build-id", env: EnvBuildID, help: "build id of this worker within --deployment-name",
		def: func(c Config) string { return c.BuildID },
		set: func(c *Config, v string) error { c.BuildID = v; return nil }},
	{flag: "task-queue", env: "ILINKFLOW_TASK_QUEUE", help: "task queue of the workflows and activities",
		def: func(c Config) string { return c.TaskQueue },
		set: func(c *Config, v string) error { c.TaskQueue = v; return nil }},
	{flag: "database-url", env: "DATABASE_URL", secret: true,
		help: "PostgreSQL URL; prefer the environment when it holds a password",
		def:  func(c Config) string { return c.DatabaseURL },
		set: func(c *Config, v string) error {
			if _, err := pgxpool.ParseConfig(v); err != nil {
				return errors.New("not a valid PostgreSQL URL or DSN (the value is not shown: it may hold a password)")
			}
			c.DatabaseURL = v
			return nil
		}},
	{flag: "ilink-base-url", env: "ILINK_BASE_URL", help: "iLink API base URL",
		def: func(c Config) string { return c.ILinkBaseURL },
		set: func(c *Config, v string) error {
			if _, err := ilink.New(ilink.Config{BaseURL: v}, ""); err != nil {
				return errors.New("want an absolute http(s) URL without query or user info")
			}
			c.ILinkBaseURL = v
			return nil
		}},
	{flag: "ilink-cdn-base-url", env: "ILINK_CDN_BASE_URL", help: "iLink media CDN base URL",
		def: func(c Config) string { return c.ILinkCDNBaseURL },
		set: func(c *Config, v string) error {
			if _, err := ilink.New(ilink.Config{CDNBaseURL: v}, ""); err != nil {
				return errors.New("want an absolute http(s) URL without query or user info")
			}
			c.ILinkCDNBaseURL = v
			return nil
		}},
	{flag: "window-lifetime", env: "ILINKFLOW_WINDOW_LIFETIME", help: "how long a context token allows replies",
		def: func(c Config) string { return shortDuration(c.Limits.WindowLifetime) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Limits.WindowLifetime }, false)},
	{flag: "max-sends", env: "ILINKFLOW_MAX_SENDS", help: "reply quota of one context token (1..1000)",
		def: func(c Config) string { return strconv.Itoa(int(c.Limits.MaxSends)) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1, 1000)
			c.Limits.MaxSends = int32(n)
			return err
		}},
	{flag: "final-slots", env: "ILINKFLOW_FINAL_SLOTS", help: "how many of a window's last sends are kept for replies marked final (0..max-sends-1)",
		def: func(c Config) string { return strconv.Itoa(int(c.Limits.FinalSlots)) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 0, 999)
			c.Limits.FinalSlots = int32(n)
			return err
		}},
	{flag: "max-held-replies", env: "ILINKFLOW_MAX_HELD_REPLIES", help: "most replies one conversation holds for its next window (1..1000)",
		def: func(c Config) string { n, _, _ := c.Limits.HeldLimits(); return strconv.Itoa(int(n)) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1, 1000)
			c.Limits.MaxHeldReplies = int32(n)
			return err
		}},
	{flag: "max-held-bytes", env: "ILINKFLOW_MAX_HELD_BYTES", help: "most bytes of text one conversation holds for its next window (1024..16777216)",
		def: func(c Config) string { _, n, _ := c.Limits.HeldLimits(); return strconv.FormatInt(n, 10) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1024, 16<<20)
			c.Limits.MaxHeldBytes = n
			return err
		}},
	{flag: "max-held-age", env: "ILINKFLOW_MAX_HELD_AGE", help: "how long a held reply waits for the user's next message before it is dropped unsent",
		def: func(c Config) string { _, _, d := c.Limits.HeldLimits(); return shortDuration(d) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Limits.MaxHeldAge }, false)},
	{flag: "max-media-bytes", env: "ILINKFLOW_MAX_MEDIA_BYTES", help: "cap of one media reply's file in bytes (1024..104857600)",
		def: func(c Config) string { return strconv.FormatInt(c.Limits.MediaCap(), 10) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1024, 100<<20)
			c.Limits.MaxMediaBytes = n
			return err
		}},
	{flag: "send-gap", env: "ILINKFLOW_SEND_GAP", help: "minimum gap between two sends of one bot",
		def: func(c Config) string { return shortDuration(c.SendGap) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.SendGap }, true)},
	{flag: "throttle-penalty", env: "ILINKFLOW_THROTTLE_PENALTY", help: "how long a throttled bot stops sending",
		def: func(c Config) string { return shortDuration(c.ThrottlePenalty) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.ThrottlePenalty }, false)},
	{flag: "stale-pause", env: "ILINKFLOW_STALE_PAUSE", help: "pause of an account after a stale bot token",
		def: func(c Config) string { return shortDuration(c.StalePause) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.StalePause }, false)},
	{flag: "poll-session", env: "ILINKFLOW_POLL_SESSION", help: "length of one polling activity on an idle account",
		def: func(c Config) string { return shortDuration(c.PollSession) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.PollSession }, false)},
	{flag: "poll-lease-ttl", env: "ILINKFLOW_POLL_LEASE_TTL", help: "life of an unrenewed poll lease: how soon a dead worker's bots move elsewhere",
		def: func(c Config) string { return shortDuration(c.PollLeaseTTL) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.PollLeaseTTL }, false)},
	{flag: "db-max-conns", env: "ILINKFLOW_DB_MAX_CONNS", help: "maximum PostgreSQL connections of this worker, its liveness session included (pool_max_conns in the URL bounds the pool instead)",
		def: func(c Config) string { return strconv.Itoa(c.DBMaxConns) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 2, 1000)
			c.DBMaxConns = int(n)
			return err
		}},
	{flag: "max-accounts", env: "ILINKFLOW_MAX_ACCOUNTS", help: "maximum number of active accounts",
		def: func(c Config) string { return strconv.Itoa(c.MaxAccounts) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1, 1_000_000)
			c.MaxAccounts = int(n)
			return err
		}},
	{flag: "session-ttl", env: "ILINKFLOW_SESSION_TTL", help: "lifetime of an agent session (0: until the window expires)",
		def: func(c Config) string { return shortDuration(c.SessionTTL) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.SessionTTL }, true)},
	{flag: "heartbeat", env: "ILINKFLOW_HEARTBEAT", help: "heartbeat period of long-running activities",
		def: func(c Config) string { return shortDuration(c.Heartbeat) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Heartbeat }, false)},
	{flag: "shutdown-grace", env: "ILINKFLOW_SHUTDOWN_GRACE", help: "how long a stopping worker lets in-flight sends and long polls finish (keep it above iLink's 35s long poll)",
		def: func(c Config) string { return shortDuration(c.ShutdownGrace) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.ShutdownGrace }, true)},
	{flag: "defer-before", env: "ILINKFLOW_DEFER_BEFORE", help: "RFC 3339 instant: messages sent before it are stored but not dispatched",
		def: func(c Config) string {
			if c.DeferredBefore == nil {
				return ""
			}
			return c.DeferredBefore.Format(time.RFC3339)
		},
		set: func(c *Config, v string) error {
			if v == "" {
				c.DeferredBefore = nil
				return nil
			}
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return errors.New("want an RFC 3339 time such as 2026-11-30T08:00:00Z")
			}
			c.DeferredBefore = &t
			return nil
		}},
	{flag: "migrate", env: "ILINKFLOW_MIGRATE", boolean: true,
		help: "apply pending schema migrations at start; false: refuse to start on a schema that lacks one (run starter migrate first)",
		def:  func(c Config) string { return strconv.FormatBool(c.Migrate) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			c.Migrate = b
			return nil
		}},
	{flag: "migrate-lock-timeout", env: EnvMigrateLockTimeout, help: "lock_timeout of each migration: how long it may wait for a table lock (queueing writes behind it) before it fails",
		def: func(c Config) string { return shortDuration(c.MigrateLockTimeout) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.MigrateLockTimeout }, false)},
	{flag: "migrate-statement-timeout", env: EnvMigrateStatementTimeout, help: "statement_timeout of each migration statement",
		def: func(c Config) string { return shortDuration(c.MigrateStatementTimeout) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.MigrateStatementTimeout }, false)},
	{flag: "log-level", env: "ILINKFLOW_LOG_LEVEL", help: "debug, info, warn or error",
		def: func(c Config) string { return strings.ToLower(c.LogLevel.String()) },
		set: func(c *Config, v string) error {
			if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
				return errors.New("want debug, info, warn or error")
			}
			return nil
		}},
	{flag: "log-format", env: "ILINKFLOW_LOG_FORMAT", help: "text or json",
		def: func(c Config) string { return c.LogFormat },
		set: func(c *Config, v string) error {
			if v != "text" && v != "json" {
				return errors.New("want text or json")
			}
			c.LogFormat = v
			return nil
		}},
	{flag: "http-addr", env: "ILINKFLOW_HTTP_ADDR", help: "host:port of the agent-facing reply API, and of the admin endpoints when --admin-addr is unset (\"\" or off: disabled)",
		def: func(c Config) string { return c.HTTPAddr },
		set: setHTTPAddr},
	{flag: "admin-addr", env: EnvAdminAddr, help: "host:port of /metrics, /livez, /readyz, /healthz, /codec/ and /ui/ (unset: they are on --http-addr)",
		def: func(c Config) string { return c.AdminAddr },
		set: setAdminAddr},
	{flag: "health-window", env: "ILINKFLOW_HEALTH_WINDOW", help: "how long an active account may go without a successful poll before /healthz fails",
		def: func(c Config) string { return shortDuration(c.HealthWindow) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.HealthWindow }, false)},
	{flag: "api-store-timeout", env: "ILINKFLOW_API_STORE_TIMEOUT", help: "bound of each store call the reply API makes for a request (503 store_unavailable past it; at most 1m)",
		def: func(c Config) string { return shortDuration(c.APIStoreTimeout) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.APIStoreTimeout }, false)},
	{flag: "api-max-uploads", env: "ILINKFLOW_API_MAX_UPLOADS", help: "media replies the reply API reads and stages at once (1..64; each holds a few times --max-media-bytes in memory)",
		def: func(c Config) string { return strconv.Itoa(c.APIMaxUploads) },
		set: func(c *Config, v string) error {
			n, err := parseInt(v, 1, MaxAPIUploads)
			c.APIMaxUploads = int(n)
			return err
		}},
	{flag: "handler", env: "ILINKFLOW_HANDLER", help: "agent hand-off: none, echo, webhook or workflow",
		def: func(c Config) string { return c.Handler },
		set: func(c *Config, v string) error {
			switch v {
			case handoff.KindNone, handoff.KindEcho, handoff.KindWebhook, handoff.KindWorkflow:
				c.Handler = v
				return nil
			}
			return errors.New("want none, echo, webhook or workflow")
		}},
	{flag: "webhook-url", env: "ILINKFLOW_WEBHOOK_URL", help: "URL the webhook handler POSTs deliveries to (secret: " + EnvWebhookSecret + ")",
		def: func(c Config) string { return c.WebhookURL },
		set: func(c *Config, v string) error { c.WebhookURL = v; return nil }},
	{flag: "webhook-timeout", env: "ILINKFLOW_WEBHOOK_TIMEOUT", help: "timeout of one webhook request (at most 90s)",
		def: func(c Config) string { return shortDuration(c.WebhookTimeout) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.WebhookTimeout }, false)},
	{flag: "agent-workflow", env: "ILINKFLOW_AGENT_WORKFLOW", help: "workflow type the workflow handler starts for each message",
		def: func(c Config) string { return c.AgentWorkflow },
		set: func(c *Config, v string) error { c.AgentWorkflow = v; return nil }},
	{flag: "agent-task-queue", env: "ILINKFLOW_AGENT_TASK_QUEUE", help: "task queue of the agent workflow",
		def: func(c Config) string { return c.AgentTaskQueue },
		set: func(c *Config, v string) error { c.AgentTaskQueue = v; return nil }},
	{flag: "reoffer-after", env: "ILINKFLOW_REOFFER_AFTER", help: "how long an unhandled message waits before it is offered to the agent again (0: never)",
		def: func(c Config) string { return shortDuration(c.ReofferAfter) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.ReofferAfter }, true)},
	// The payload codec endpoint (docs/payload-codec.md); its token is EnvCodecToken only.
	{flag: "codec-cors-origin", env: "ILINKFLOW_CODEC_CORS_ORIGIN", help: "the one browser origin (the Temporal UI, e.g. http://127.0.0.1:8233) allowed to call the codec endpoint /codec/ (token: " + EnvCodecToken + ")",
		def: func(c Config) string { return c.CodecCORSOrigin },
		set: setCodecCORSOrigin},
	// The enrollment web front end (docs/web-ui.md); its token is ILINKFLOW_UI_TOKEN only.
	{flag: "ui-secure-cookie", env: "ILINKFLOW_UI_SECURE_COOKIE", help: "mark the web front end's session cookie Secure (served over TLS or behind a TLS proxy; token: " + webui.TokenEnv + ")",
		def: func(c Config) string { return strconv.FormatBool(c.UISecureCookie) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			c.UISecureCookie = b
			return nil
		}},
	{flag: "ui-client-address-header", env: "ILINKFLOW_UI_CLIENT_ADDRESS_HEADER", help: "the header a trusted reverse proxy sets to the client's address (e.g. X-Forwarded-For, whose last address counts), by which the web front end throttles wrong logins; only behind such a proxy (default: the peer address)",
		def: func(c Config) string { return c.UIClientAddressHeader },
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v != "" && !headerName.MatchString(v) {
				return errors.New("want a header name, e.g. X-Forwarded-For")
			}
			c.UIClientAddressHeader = v
			return nil
		}},
	{flag: "ui-public-url", env: "ILINKFLOW_UI_PUBLIC_URL", help: "where bot owners reach the web front end (e.g. https://bots.example.com/ui), for the enrollment links it hands them (default: the request's scheme and host)",
		def: func(c Config) string { return c.UIPublicURL },
		set: func(c *Config, v string) (err error) {
			c.UIPublicURL, err = webui.BaseURL(v)
			return err
		}},
	{flag: "temporal-ui-url", env: "ILINKFLOW_TEMPORAL_UI_URL", help: "base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233): the web front end links each bot to its workflows there (default: no links)",
		def: func(c Config) string { return c.TemporalUIURL },
		set: func(c *Config, v string) (err error) {
			c.TemporalUIURL, err = webui.BaseURL(v)
			return err
		}},
}

// headerName is the form of an HTTP header's name the flags take.
var headerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

// Environment variables of Worker Versioning, as the Temporal worker controller for
// Kubernetes sets them.
const (
	EnvDeploymentName = "TEMPORAL_DEPLOYMENT_NAME"
	EnvBuildID        = "TEMPORAL_WORKER_BUILD_ID"
)

// Environment variables of the admin listener and of the migration settings, which
// "starter migrate" reads too.
const (
	EnvAdminAddr               = "ILINKFLOW_ADMIN_ADDR"
	EnvMigrateLockTimeout      = "ILINKFLOW_MIGRATE_LOCK_TIMEOUT"
	EnvMigrateStatementTimeout = "ILINKFLOW_MIGRATE_STATEMENT_TIMEOUT"
)

// EnvWebhookSecret names the environment variable of the webhook signing secret. It has
// no flag: a command line is visible to every local user.
const EnvWebhookSecret = "ILINKFLOW_WEBHOOK_SECRET"

// EnvCodecToken names the environment variable of the codec endpoint's bearer token. It
// has no flag: a command line is visible to every local user.
const EnvCodecToken = "ILINKFLOW_CODEC_TOKEN"

// keysFileFlag names the flag that overrides ILINKFLOW_SEALING_KEYS_FILE. The key spec
// itself has no flag: a command line is visible to every local user.
const keysFileFlag = "sealing-keys-file"

// flagValue is a setting's command-line value: the raw text, parsed later with the
// environment's; a boolean one may be given without a value.
type flagValue struct {
	p       *string
	boolean bool
}

func (f *flagValue) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	return *f.p
}

func (f *flagValue) Set(v string) error { *f.p = v; return nil }

// IsBoolFlag lets a boolean setting be given as --name alone (flag.boolFlag).
func (f *flagValue) IsBoolFlag() bool { return f.boolean }

func durationSetter(field func(*Config) *time.Duration, allowZero bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("want a duration such as 2s, 1m30s or 24h")
		}
		if d < 0 || (d == 0 && !allowZero) {
			if allowZero {
				return errors.New("must not be negative")
			}
			return errors.New("must be positive")
		}
		*field(c) = d
		return nil
	}
}

// shortDuration formats d without trailing zero units: 24h, 10m, 1m30s, 0s.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = out[:len(out)-2]
	}
	if strings.HasSuffix(out, "h0m") {
		out = out[:len(out)-2]
	}
	return out
}

func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer in %d..%d", lo, hi)
	}
	return n, nil
}

// ConfigFromEnv builds the configuration from command-line flags, falling back to the
// environment (read through getenv), then to the defaults. A flag given on the command
// line wins over its environment variable. The sealing key ring comes from
// ILINKFLOW_SEALING_KEYS or the file named by ILINKFLOW_SEALING_KEYS_FILE (or
// --sealing-keys-file). It returns an error wrapping flag.ErrHelp for -h/--help (print
// [Usage] then), and a clear error naming the flag or variable for a bad value.
func ConfigFromEnv(getenv func(string) string, args []string) (Config, error) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cfg := DefaultConfig()
	values := make(map[string]*string, len(settings))
	for _, s := range settings {
		v := new(string)
		fs.Var(&flagValue{p: v, boolean: s.boolean}, s.flag, s.help)
		values[s.flag] = v
	}
	keysFile := fs.String(keysFileFlag, "", "file of sealing keys")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		return Config{}, fmt.Errorf("%w (run with --help for the settings)", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (run with --help for the settings)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var errs []error
	for _, s := range settings {
		raw, source := "", ""
		switch {
		case given[s.flag]:
			raw, source = *values[s.flag], "flag --"+s.flag
		case strings.TrimSpace(getenv(s.env)) != "":
			raw, source = getenv(s.env), "environment variable "+s.env
		default:
			continue // DefaultConfig holds it
		}
		raw = strings.TrimSpace(raw)
		if raw == "" && s.flag != "defer-before" && s.flag != "http-addr" && s.flag != "admin-addr" {
			errs = append(errs, fmt.Errorf("%s is empty", source))
			continue
		}
		if err := s.set(&cfg, raw); err != nil {
			if s.secret {
				errs = append(errs, fmt.Errorf("%s: %v", source, err))
			} else {
				errs = append(errs, fmt.Errorf("%s=%q: %v", source, raw, err))
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	// The Temporal connection: the client config profile, the TEMPORAL_* variables, then
	// the flags given explicitly.
	var over temporalconn.Overrides
	if given["temporal-address"] {
		over.Address = cfg.TemporalAddress
	}
	if given["temporal-namespace"] {
		over.Namespace = cfg.TemporalNamespace
	}
	over.Profile, over.ConfigFile = cfg.TemporalProfile, cfg.TemporalConfigFile
	conn, err := temporalconn.Load(getenv, over)
	if err != nil {
		return Config{}, err
	}
	cfg.Temporal, cfg.TemporalAddress, cfg.TemporalNamespace = conn, conn.Address, conn.Namespace

	keyEnv := getenv
	if given[keysFileFlag] {
		path := strings.TrimSpace(*keysFile)
		if path == "" {
			return Config{}, fmt.Errorf("flag --%s is empty", keysFileFlag)
		}
		keyEnv = func(k string) string {
			switch k {
			case sealing.EnvKeysFile:
				return path
			case sealing.EnvKeys:
				return "" // the flag wins over the environment
			}
			return getenv(k)
		}
	}
	keys, err := sealing.LoadKeyring(keyEnv)
	if err != nil {
		return Config{}, fmt.Errorf("sealing keys: %w", err)
	}
	cfg.Keyring = keys
	if cfg.Tracing, err = tracing.ConfigFromEnv(getenv, tracing.ServiceWorker); err != nil {
		return Config{}, err
	}
	if v := strings.TrimSpace(getenv(EnvWebhookSecret)); v != "" {
		cfg.WebhookSecret = sealing.NewSecret(v)
	}
	if v := strings.TrimSpace(getenv(EnvCodecToken)); v != "" {
		cfg.CodecToken = sealing.NewSecret(v)
	}
	if v := strings.TrimSpace(getenv(webui.TokenEnv)); v != "" {
		cfg.UIToken = sealing.NewSecret(v)
	}
	if err := cfg.validate(false); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports the first problems of a configuration built by hand; ConfigFromEnv
// returns only configurations that pass it.
func (c Config) Validate() error { return c.validate(true) }

func (c Config) validate(needKeys bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.TemporalAddress); err != nil {
		bad("Temporal address %q: want host:port", c.TemporalAddress)
	}
	if strings.TrimSpace(c.TemporalNamespace) == "" {
		bad("Temporal namespace is empty")
	}
	if strings.TrimSpace(c.TaskQueue) == "" {
		bad("task queue is empty")
	}
	if (c.DeploymentName == "") != (c.BuildID == "") {
		bad("Worker Versioning needs both a deployment name (%s) and a build id (%s), or neither", EnvDeploymentName, EnvBuildID)
	}
	if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
		bad("database URL is not a valid PostgreSQL URL or DSN")
	}
	if _, err := ilink.New(c.ILinkConfig(), ""); err != nil {
		bad("iLink configuration: %v", err)
	}
	if needKeys && c.Keyring == nil {
		bad("no sealing key ring (set %s or %s)", sealing.EnvKeys, sealing.EnvKeysFile)
	}
	l := c.Limits
	if l.WindowLifetime <= 0 || l.MaxSends < 1 || l.MaxSends > 1000 || l.MaxMergedSummaryBytes < 256 ||
		l.MaxTextBytes <= 0 || l.MaxClockSkew < 0 {
		bad("store limits are invalid: window lifetime and text size must be positive, max sends in 1..1000, merged summary at least 256 bytes")
	}
	if l.FinalSlots < 0 || l.FinalSlots >= l.MaxSends {
		bad("final slots %d: must be at least 0 and less than max sends (%d)", l.FinalSlots, l.MaxSends)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		zero bool
	}{
		{"send gap", c.SendGap, true}, {"throttle penalty", c.ThrottlePenalty, false},
		{"stale pause", c.StalePause, false}, {"poll session", c.PollSession, false},
		{"poll lease ttl", c.PollLeaseTTL, false},
		{"session TTL", c.SessionTTL, true}, {"heartbeat", c.Heartbeat, false},
		{"shutdown grace", c.ShutdownGrace, true},
		{"migration lock timeout", c.MigrateLockTimeout, true}, {"migration statement timeout", c.MigrateStatementTimeout, true},
	} {
		if d.v < 0 || (d.v == 0 && !d.zero) {
			bad("%s %v must be positive", d.name, d.v)
		}
	}
	if c.Heartbeat > 0 && c.PollSession > 0 && c.Heartbeat >= c.PollSession {
		bad("heartbeat %v must be shorter than the poll session %v", c.Heartbeat, c.PollSession)
	}
	if c.Heartbeat > MaxHeartbeat {
		bad("heartbeat %v must be at most %v (the workflows' heartbeat timeout is %v)", c.Heartbeat, MaxHeartbeat, 2*MaxHeartbeat)
	}
	if c.PollLeaseTTL != 0 && (c.PollLeaseTTL < MinPollLeaseTTL || c.PollLeaseTTL > MaxPollLeaseTTL) {
		bad("poll lease ttl %v must be between %v and %v", c.PollLeaseTTL, MinPollLeaseTTL, MaxPollLeaseTTL)
	}
	if c.DBMaxConns != 0 && (c.DBMaxConns < 2 || c.DBMaxConns > 1000) {
		bad("database connections %d must be between 2 and 1000", c.DBMaxConns)
	}
	if c.MaxAccounts < 1 {
		bad("max accounts must be at least 1")
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log format %q: want text or json", c.LogFormat)
	}
	if err := c.validateHTTP(); err != nil {
		errs = append(errs, err)
	}
	if err := c.HandoffConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ReofferAfter < 0 {
		bad("re-offer interval %v must not be negative", c.ReofferAfter)
	}
	return errors.Join(errs...)
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
		slog.Any("tracing", c.Tracing),
	)
}

// Usage writes the worker's settings: each flag with its environment variable and default.
func Usage(w io.Writer) {
	def := DefaultConfig()
	fmt.Fprint(w, `usage: worker [flags]

Runs an ilinkflow worker: migrates PostgreSQL, connects to Temporal, serves the workflows
and activities on the task queue, and makes sure every active account has its poller and
every open reply window its workflow. Every flag falls back to its environment variable,
then to the default; a flag given on the command line wins.

flags (environment variable, default):
`)
	for _, s := range settings {
		d := s.def(def)
		switch {
		case s.secret && s.env == "DATABASE_URL":
			d = redact.DatabaseURL(d) // the URL without its password
		case s.secret:
			d = redact.Secret(d)
		}
		if d == "" {
			d = "unset"
		}
		fmt.Fprintf(w, "  --%s (%s, default %s)\n      %s\n", s.flag, s.env, d, s.help)
	}
	fmt.Fprintf(w, "  --%s (%s)\n      %s\n", keysFileFlag, sealing.EnvKeysFile, "file of sealing keys, one \"N:<base64>\" per line")
	fmt.Fprintf(w, `
sealing keys (required): %s="2:<base64 32 bytes>,1:<base64 32 bytes>" (the highest
generation seals, all open), or a file named by %s / --%s.
Generate one with: go run ./starter keygen --generation 1
`, sealing.EnvKeys, sealing.EnvKeysFile, keysFileFlag)
	fmt.Fprint(w, `
Temporal connection: as the temporal CLI and the SDKs read it: a profile of the client
config file (--temporal-config-file, --temporal-profile), then the environment over it:
TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY (turns TLS on), TEMPORAL_TLS,
TEMPORAL_TLS_CLIENT_CERT_PATH / _DATA, TEMPORAL_TLS_CLIENT_KEY_PATH / _DATA,
TEMPORAL_TLS_SERVER_CA_CERT_PATH / _DATA, TEMPORAL_TLS_SERVER_NAME,
TEMPORAL_TLS_DISABLE_HOST_VERIFICATION; --temporal-address and --temporal-namespace given
on the command line win. The API key and client keys have no flag (docs/operations.md).
`)
	fmt.Fprintf(w, "\nwebhook secret (required by --handler webhook, at least %d bytes): %s\n", handoff.MinSecretBytes, EnvWebhookSecret)
	fmt.Fprintf(w, "codec endpoint token (enables /codec/, at least %d bytes): %s\n", MinCodecTokenBytes, EnvCodecToken)
}
