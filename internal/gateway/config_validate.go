package gateway

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/sealing"
)

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
	if c.TemporalCompression != "" && c.TemporalCompression != CompressionNone && c.TemporalCompression != CompressionGzip {
		bad("Temporal compression %q: want %s or %s", c.TemporalCompression, CompressionNone, CompressionGzip)
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
	c.validateRetention(bad)
	return errors.Join(errs...)
}

// validateRetention checks the retention settings: no negative horizon, the rows kept at
// least as long as their content (and at least MinRetainRows: the dedupe key), a content
// horizon set when the rows one is, and a schedule interval of at least MinRetentionEvery
// (0 in a configuration built in code: DefaultRetentionEvery).
func (c Config) validateRetention(bad func(format string, args ...any)) {
	r := c.Retention
	if r.Content < 0 || r.Rows < 0 || r.Quarantine < 0 || r.Audit < 0 {
		bad("retention horizons must not be negative (0 keeps forever)")
	}
	if r.Rows > 0 && r.Content == 0 {
		bad("retain-rows %v deletes the content that retain-content 0 keeps forever: set retain-content at most retain-rows", r.Rows)
	}
	if r.Rows > 0 && r.Content > r.Rows {
		bad("retain-content %v must not be longer than retain-rows %v (deleting a row deletes its content)", r.Content, r.Rows)
	}
	if r.Rows > 0 && r.Rows < MinRetainRows {
		bad("retain-rows %v must be at least %v: a message's key must outlive a redelivery by iLink", r.Rows, MinRetainRows)
	}
	if c.RetentionEvery != 0 && c.RetentionEvery < MinRetentionEvery { // 0: the default
		bad("retention-every %v must be at least %v", c.RetentionEvery, MinRetentionEvery)
	}
}
