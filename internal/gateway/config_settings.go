package gateway

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/webui"
)

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
	{flag: "temporal-compression", env: "ILINKFLOW_TEMPORAL_COMPRESSION", help: "gRPC compression of requests to Temporal: none or gzip (payloads are encrypted, so gzip mostly costs CPU)",
		def: func(c Config) string { return c.TemporalCompression },
		set: func(c *Config, v string) error {
			if v != CompressionNone && v != CompressionGzip {
				return errors.New("want none or gzip")
			}
			c.TemporalCompression = v
			return nil
		}},
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
	{flag: "db-max-conns", env: "ILINKFLOW_DB_MAX_CONNS", help: "maximum PostgreSQL connections of this worker, its liveness session and the iLink facade's listener (from 4) included (pool_max_conns in the URL bounds the pool instead)",
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
	// Retention (docs/operations.md, "Retention"): 0 keeps that kind of data forever.
	{flag: "retain-content", env: "ILINKFLOW_RETAIN_CONTENT", help: "how long a message's content (text, attachments' locators, context token, replies, held and staged replies) is kept after its window closed (0: forever)",
		def: func(c Config) string { return shortDuration(c.Retention.Content) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Retention.Content }, true)},
	{flag: "retain-rows", env: "ILINKFLOW_RETAIN_ROWS", help: "how long a message's rows (its key, which deduplicates a redelivery, its window, attempts, sessions, held replies) are kept after its window closed; at least --retain-content and 168h (0: forever)",
		def: func(c Config) string { return shortDuration(c.Retention.Rows) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Retention.Rows }, true)},
	{flag: "retain-quarantine", env: "ILINKFLOW_RETAIN_QUARANTINE", help: "how long a quarantined page is kept (0: forever)",
		def: func(c Config) string { return shortDuration(c.Retention.Quarantine) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Retention.Quarantine }, true)},
	{flag: "retain-audit", env: "ILINKFLOW_RETAIN_AUDIT", help: "how long the enrollment, route and erasure audit lines are kept (0: forever)",
		def: func(c Config) string { return shortDuration(c.Retention.Audit) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.Retention.Audit }, true)},
	{flag: "retention-every", env: "ILINKFLOW_RETENTION_EVERY", help: "interval of the installation's retention schedule (at least 1m)",
		def: func(c Config) string { return shortDuration(c.RetentionEvery) },
		set: durationSetter(func(c *Config) *time.Duration { return &c.RetentionEvery }, false)},
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
	{flag: "ilink-public-url", env: "ILINKFLOW_ILINK_PUBLIC_URL", help: "where iLink clients reach the agent-facing address (e.g. https://bots.example.com), the base URL of the iLink facade, for the media and login URLs it hands them (default: the request's scheme and host)",
		def: func(c Config) string { return c.ILinkPublicURL },
		set: func(c *Config, v string) (err error) {
			c.ILinkPublicURL, err = webui.BaseURL(v)
			return err
		}},
	{flag: "temporal-ui-url", env: "ILINKFLOW_TEMPORAL_UI_URL", help: "base URL of the Temporal Web UI (e.g. http://127.0.0.1:8233): the web front end links each bot to its workflows there (default: no links)",
		def: func(c Config) string { return c.TemporalUIURL },
		set: func(c *Config, v string) (err error) {
			c.TemporalUIURL, err = webui.BaseURL(v)
			return err
		}},
}
