package gateway_test

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

var keySpec = testkit.KeySpec

// envOf is a getenv over a map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func withKeys(m map[string]string) map[string]string {
	out := map[string]string{sealing.EnvKeys: keySpec}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Keyring == nil || cfg.Keyring.Current() != 1 {
		t.Fatalf("key ring %v", cfg.Keyring)
	}
	want := gateway.DefaultConfig()
	want.Keyring = cfg.Keyring
	want.Temporal = cfg.Temporal // the resolved connection: plaintext to the defaults
	if cfg.Temporal.TLS || cfg.Temporal.APIKey || cfg.Temporal.ClientCert || cfg.Versioned() {
		t.Fatalf("without settings the connection is plaintext and unversioned: %+v", cfg.Temporal)
	}
	if fmt.Sprintf("%+v", cfg) != fmt.Sprintf("%+v", want) {
		t.Fatalf("defaults\n got %+v\nwant %+v", cfg, want)
	}
	if cfg.TemporalAddress != "127.0.0.1:7233" || cfg.TemporalNamespace != "default" || cfg.TaskQueue != "ilinkflow" ||
		cfg.ILinkBaseURL != "https://ilinkai.weixin.qq.com" || cfg.Limits.MaxSends != 10 ||
		cfg.Limits.WindowLifetime != 24*time.Hour || cfg.SendGap != 2*time.Second || cfg.ThrottlePenalty != time.Hour ||
		cfg.StalePause != time.Hour || cfg.DeferredBefore != nil || cfg.TemporalCompression != gateway.CompressionNone {
		t.Fatalf("documented defaults changed: %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	env := withKeys(map[string]string{
		"TEMPORAL_ADDRESS":               "temporal.internal:7233",
		"TEMPORAL_NAMESPACE":             "prod",
		"ILINKFLOW_TASK_QUEUE":           "ilinkflow-eu",
		"DATABASE_URL":                   "postgres://app:pw@db.internal:5432/ilinkflow",
		"ILINK_BASE_URL":                 "http://127.0.0.1:9000",
		"ILINK_CDN_BASE_URL":             "http://127.0.0.1:9001/c2c",
		"ILINKFLOW_WINDOW_LIFETIME":      "12h",
		"ILINKFLOW_MAX_SENDS":            "5",
		"ILINKFLOW_MAX_MEDIA_BYTES":      "1048576",
		"ILINKFLOW_SEND_GAP":             "0s",
		"ILINKFLOW_THROTTLE_PENALTY":     "30m",
		"ILINKFLOW_STALE_PAUSE":          "2h",
		"ILINKFLOW_POLL_SESSION":         "5m",
		"ILINKFLOW_POLL_LEASE_TTL":       "2m",
		"ILINKFLOW_DB_MAX_CONNS":         "7",
		"ILINKFLOW_TEMPORAL_COMPRESSION": "gzip",
		"ILINKFLOW_MAX_ACCOUNTS":         "3",
		"ILINKFLOW_SESSION_TTL":          "1h",
		"ILINKFLOW_HEARTBEAT":            "3s",
		"ILINKFLOW_SHUTDOWN_GRACE":       "45s",
		"ILINKFLOW_DEFER_BEFORE":         "2026-11-30T08:00:00Z",
		"ILINKFLOW_LOG_LEVEL":            "debug",
		"ILINKFLOW_LOG_FORMAT":           "json",
		"UNRELATED_VARIABLE_IS_FINE":     "x",
		"ILINKFLOW_UNKNOWN_IS_IGNORED":   "x",
	})
	cfg, err := gateway.ConfigFromEnv(envOf(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	deferred := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if cfg.TemporalAddress != "temporal.internal:7233" || cfg.TemporalNamespace != "prod" || cfg.TaskQueue != "ilinkflow-eu" ||
		cfg.DatabaseURL != "postgres://app:pw@db.internal:5432/ilinkflow" ||
		cfg.ILinkBaseURL != "http://127.0.0.1:9000" || cfg.ILinkCDNBaseURL != "http://127.0.0.1:9001/c2c" ||
		cfg.Limits.WindowLifetime != 12*time.Hour || cfg.Limits.MaxSends != 5 || cfg.Limits.MaxMediaBytes != 1<<20 || cfg.SendGap != 0 ||
		cfg.ThrottlePenalty != 30*time.Minute || cfg.StalePause != 2*time.Hour || cfg.PollSession != 5*time.Minute || cfg.PollLeaseTTL != 2*time.Minute || cfg.DBMaxConns != 7 ||
		cfg.MaxAccounts != 3 || cfg.SessionTTL != time.Hour || cfg.Heartbeat != 3*time.Second ||
		cfg.ShutdownGrace != 45*time.Second || cfg.DeferredBefore == nil || !cfg.DeferredBefore.Equal(deferred) ||
		cfg.LogLevel.String() != "DEBUG" || cfg.LogFormat != "json" || cfg.TemporalCompression != gateway.CompressionGzip {
		t.Fatalf("environment not applied: %+v", cfg)
	}
	// The store's other limits keep their defaults.
	if def := gateway.DefaultConfig().Limits; cfg.Limits.MaxTextBytes != def.MaxTextBytes || cfg.Limits.MaxClockSkew != def.MaxClockSkew {
		t.Fatalf("limits %+v", cfg.Limits)
	}
}

func TestConfigFlagsOverrideEnvironment(t *testing.T) {
	t.Parallel()
	env := withKeys(map[string]string{
		"TEMPORAL_ADDRESS":     "from-env:7233",
		"ILINKFLOW_TASK_QUEUE": "env-queue",
		"ILINKFLOW_MAX_SENDS":  "5",
		"ILINKFLOW_SEND_GAP":   "5s",
	})
	cfg, err := gateway.ConfigFromEnv(envOf(env), []string{
		"--temporal-address", "from-flag:7233", "-max-sends=7", "--send-gap=1s",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalAddress != "from-flag:7233" || cfg.Limits.MaxSends != 7 || cfg.SendGap != time.Second {
		t.Fatalf("flags did not win: %+v", cfg)
	}
	if cfg.TaskQueue != "env-queue" {
		t.Fatalf("an environment value without a flag was lost: %q", cfg.TaskQueue)
	}
}

func TestConfigRefusesBadValuesClearly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string // substrings of the error
	}{
		{"duration", map[string]string{"ILINKFLOW_SEND_GAP": "2 seconds"}, nil,
			[]string{"environment variable ILINKFLOW_SEND_GAP", `"2 seconds"`, "duration"}},
		{"negative duration", nil, []string{"--stale-pause", "-1h"},
			[]string{"flag --stale-pause", "positive"}},
		{"zero where positive", map[string]string{"ILINKFLOW_HEARTBEAT": "0s"}, nil,
			[]string{"ILINKFLOW_HEARTBEAT", "positive"}},
		{"heartbeat beyond the workflows' heartbeat timeout", nil, []string{"--heartbeat", "15s"},
			[]string{"heartbeat 15s must be at most 10s"}},
		{"max sends range", nil, []string{"--max-sends", "1001"},
			[]string{"flag --max-sends", "1..1000"}},
		{"max sends not a number", map[string]string{"ILINKFLOW_MAX_SENDS": "ten"}, nil,
			[]string{"ILINKFLOW_MAX_SENDS", `"ten"`}},
		{"max media bytes range", nil, []string{"--max-media-bytes", "200000000"},
			[]string{"flag --max-media-bytes", "1024..104857600"}},
		{"max accounts", map[string]string{"ILINKFLOW_MAX_ACCOUNTS": "0"}, nil,
			[]string{"ILINKFLOW_MAX_ACCOUNTS"}},
		{"temporal address", map[string]string{"TEMPORAL_ADDRESS": "localhost"}, nil,
			[]string{"TEMPORAL_ADDRESS", "host:port"}},
		{"temporal port", nil, []string{"--temporal-address", "localhost:99999"},
			[]string{"flag --temporal-address", "1..65535"}},
		{"ilink base url", map[string]string{"ILINK_BASE_URL": "ilinkai.weixin.qq.com"}, nil,
			[]string{"ILINK_BASE_URL", "http(s) URL"}},
		{"ilink cdn url", nil, []string{"--ilink-cdn-base-url", "ftp://cdn"},
			[]string{"flag --ilink-cdn-base-url"}},
		{"defer before", map[string]string{"ILINKFLOW_DEFER_BEFORE": "yesterday"}, nil,
			[]string{"ILINKFLOW_DEFER_BEFORE", "RFC 3339"}},
		{"log level", nil, []string{"--log-level", "loud"},
			[]string{"flag --log-level", "debug, info, warn or error"}},
		{"log format", map[string]string{"ILINKFLOW_LOG_FORMAT": "xml"}, nil,
			[]string{"ILINKFLOW_LOG_FORMAT", "text or json"}},
		{"empty flag", nil, []string{"--task-queue", ""},
			[]string{"flag --task-queue is empty"}},
		{"unknown flag", nil, []string{"--no-such-flag"},
			[]string{"no-such-flag", "--help"}},
		{"positional argument", nil, []string{"serve"},
			[]string{`unexpected argument "serve"`}},
		{"poll lease ttl too short", nil, []string{"--poll-lease-ttl", "1s"},
			[]string{"poll lease ttl 1s must be between 3s and 10m0s"}},
		{"poll lease ttl too long", map[string]string{"ILINKFLOW_POLL_LEASE_TTL": "1h"}, nil,
			[]string{"poll lease ttl 1h0m0s must be between 3s and 10m0s"}},
		{"Temporal compression unknown", map[string]string{"ILINKFLOW_TEMPORAL_COMPRESSION": "brotli"}, nil,
			[]string{"ILINKFLOW_TEMPORAL_COMPRESSION", "none or gzip"}},
		{"database connections under two", nil, []string{"--db-max-conns", "1"},
			[]string{"db-max-conns"}},
		{"heartbeat not shorter than poll session", nil, []string{"--heartbeat", "10m", "--poll-session", "10m"},
			[]string{"heartbeat", "poll session"}},
	}
	for _, c := range cases {
		_, err := gateway.ConfigFromEnv(envOf(withKeys(c.env)), c.args)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestConfigReportsEveryBadValueAtOnce(t *testing.T) {
	t.Parallel()
	_, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{
		"ILINKFLOW_SEND_GAP": "x", "ILINKFLOW_MAX_SENDS": "y",
	})), nil)
	if err == nil || !strings.Contains(err.Error(), "ILINKFLOW_SEND_GAP") || !strings.Contains(err.Error(), "ILINKFLOW_MAX_SENDS") {
		t.Fatalf("error %v", err)
	}
}

func TestConfigNeverEchoesTheDatabaseURL(t *testing.T) {
	t.Parallel()
	_, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{
		"DATABASE_URL": "postgres://app:hunter2-secret@db:notaport/x",
	})), nil)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("bad database URL: %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error echoes the password: %v", err)
	}

	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{
		"DATABASE_URL": "postgres://app:hunter2-secret@db.internal:5432/ilinkflow",
	})), nil)
	if err != nil {
		t.Fatal(err)
	}
	logged := fmt.Sprint(cfg.LogValue())
	if strings.Contains(logged, "hunter2") || !strings.Contains(logged, "app@db.internal:5432/ilinkflow") {
		t.Fatalf("config log value %s", logged)
	}
	if strings.Contains(logged, base64.StdEncoding.EncodeToString([]byte(testkit.SealingKey))) {
		t.Fatalf("config log value shows key material: %s", logged)
	}
}

func TestConfigNeedsASealingKey(t *testing.T) {
	t.Parallel()
	_, err := gateway.ConfigFromEnv(envOf(nil), nil)
	if !errors.Is(err, sealing.ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
	if !strings.Contains(err.Error(), sealing.EnvKeys) || !strings.Contains(err.Error(), sealing.EnvKeysFile) {
		t.Fatalf("the error does not say what to set: %v", err)
	}

	_, err = gateway.ConfigFromEnv(envOf(map[string]string{sealing.EnvKeys: "1:not-base64"}), nil)
	if !errors.Is(err, sealing.ErrMalformedKey) || strings.Contains(err.Error(), "not-base64") {
		t.Fatalf("malformed key: %v", err)
	}

	_, err = gateway.ConfigFromEnv(envOf(map[string]string{sealing.EnvKeysFile: filepath.Join(t.TempDir(), "missing")}), nil)
	if err == nil || !strings.Contains(err.Error(), sealing.EnvKeysFile) {
		t.Fatalf("missing key file: %v", err)
	}
}

func TestConfigSealingKeysFileFlagWinsOverTheEnvironment(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	spec2 := "2:" + base64.StdEncoding.EncodeToString([]byte("abcdef0123456789abcdef0123456789"))
	if err := os.WriteFile(path, []byte("# rotated\n"+spec2+"\n"+keySpec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), []string{"--sealing-keys-file", path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Keyring.Current() != 2 {
		t.Fatalf("key ring from the file: current generation %d", cfg.Keyring.Current())
	}
}

func TestConfigHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help", "-help"} {
		// Help needs no key and no valid environment.
		_, err := gateway.ConfigFromEnv(envOf(map[string]string{"ILINKFLOW_SEND_GAP": "bad"}), []string{arg})
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: %v", arg, err)
		}
	}
	var b strings.Builder
	gateway.Usage(&b)
	for _, want := range []string{
		"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "ILINKFLOW_TASK_QUEUE", "DATABASE_URL", "ILINK_BASE_URL",
		"ILINK_CDN_BASE_URL", sealing.EnvKeys, sealing.EnvKeysFile, "--send-gap", "default 2s", "default 24h",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage does not mention %q", want)
		}
	}
}

func TestValidateAHandBuiltConfig(t *testing.T) {
	t.Parallel()
	cfg := gateway.DefaultConfig()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "sealing key") {
		t.Fatalf("a config without a key ring: %v", err)
	}
	keys, err := sealing.ParseKeyring(keySpec)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keyring = keys
	cfg.Limits.MaxSends = 0
	cfg.TaskQueue = ""
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "max sends") || !strings.Contains(err.Error(), "task queue") {
		t.Fatalf("bad limits and queue: %v", err)
	}
}
