package gateway

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/redact"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/temporalconn"
)

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
