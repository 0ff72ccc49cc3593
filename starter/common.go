package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/redact"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/temporalconn"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// conn holds the settings every operator command shares with the worker: the same flags
// and environment variables.
type conn struct {
	temporal, namespace, taskQueue, databaseURL string
	json                                        bool
	// profile and configFile choose a Temporal client config profile; tconn is the
	// connection resolve made from them, the TEMPORAL_* variables and the flags.
	profile, configFile string
	getenv              func(string) string
	tconn               temporalconn.Conn
}

// Flag groups a command registers with commandFlags: each command lists only the flags
// it uses.
const (
	withTemporal = 1 << iota // --temporal-address, --temporal-namespace, --task-queue
	withDB                   // --database-url
	withJSON                 // --json
)

func (c *conn) register(fs *flag.FlagSet, getenv func(string) string, with int) {
	if with&withTemporal != 0 {
		// No default shown: the profile file and TEMPORAL_* variables give them unless a
		// flag is given (temporalconn); the API key and client keys have no flag.
		fs.StringVar(&c.temporal, "temporal-address", "", "Temporal frontend host:port (env TEMPORAL_ADDRESS, else the client config profile's, else "+temporalconn.DefaultAddress+")")
		fs.StringVar(&c.namespace, "temporal-namespace", "", "Temporal namespace (env TEMPORAL_NAMESPACE, else the profile's, else "+temporalconn.DefaultNamespace+")")
		fs.StringVar(&c.profile, "temporal-profile", "", "profile of the Temporal client config file (env TEMPORAL_PROFILE; TLS, API key and address as the temporal CLI reads them)")
		fs.StringVar(&c.configFile, "temporal-config-file", "", "Temporal client config file (env TEMPORAL_CONFIG_FILE, else the user's temporalio/temporal.toml when present)")
		fs.StringVar(&c.taskQueue, "task-queue", envOr(getenv, "ILINKFLOW_TASK_QUEUE", wfapi.DefaultTaskQueue), "task queue of the workflows (env ILINKFLOW_TASK_QUEUE)")
	}
	if with&withDB != 0 {
		// The default comes from DATABASE_URL: --help shows it with its password hidden.
		redact.DatabaseURLVar(fs, &c.databaseURL, "database-url", databaseURL(getenv), "PostgreSQL URL (env DATABASE_URL; its password is not shown)")
	}
	if with&withJSON != 0 {
		fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
	}
}

// resolve builds the Temporal connection once the flags are parsed: the client config
// profile, the TEMPORAL_* variables, then the flags given; c.temporal and c.namespace
// become the resolved address and namespace.
func (c *conn) resolve() error {
	if !c.tconn.IsZero() {
		return nil
	}
	tc, err := temporalconn.Load(c.getenv, temporalconn.Overrides{Address: c.temporal, Namespace: c.namespace,
		Profile: c.profile, ConfigFile: c.configFile})
	if err != nil {
		return err
	}
	c.tconn, c.temporal, c.namespace = tc, tc.Address, tc.Namespace
	return nil
}

func envOr(getenv func(string) string, key, def string) string {
	if getenv != nil {
		if v := getenv(key); v != "" {
			return v
		}
	}
	return def
}

// openStore opens the store for operator commands. Reads need no key; commands that
// seal nothing work with an ephemeral key ring when no sealing key is configured. A
// database that lacks migrations of this build is refused first, with the one line of
// db.NotMigratedHint, instead of a store error about a missing table.
func openStore(ctx context.Context, c *conn, getenv func(string) string) (*store.Store, func(), error) {
	pool, err := connectDB(ctx, c.databaseURL)
	if err != nil {
		return nil, nil, err
	}
	if _, err := db.Check(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	keys, err := sealing.LoadKeyring(getenv)
	if err != nil {
		spec, gerr := sealing.GenerateKeySpec(1)
		if gerr != nil {
			pool.Close()
			return nil, nil, gerr
		}
		if keys, err = sealing.ParseKeyring(spec); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	st, err := store.New(pool, keys, store.DefaultLimits())
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return st, pool.Close, nil
}

// dialTemporal connects to Temporal as the worker does (temporalconn): a failure is one
// line naming its cause with a stable code.
func dialTemporal(ctx context.Context, c *conn, stderr io.Writer) (client.Client, error) {
	if err := c.resolve(); err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	icpt, err := clientInterceptors(ctx)
	if err != nil {
		return nil, err
	}
	return temporalconn.Dial(ctx, c.tconn, client.Options{Logger: logger, DataConverter: codecConverter(), Interceptors: icpt})
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// usageError is a mistake on the command line (unknown command or flag, bad flag value,
// missing argument): the command exits with status 2 instead of 1.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitCode maps run's result to the process exit status: 0 success, 2 usage, 1 failure.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

// oneOf refuses a filter value that is not empty and not in allowed, naming the allowed
// values.
func oneOf(flagName, v string, allowed ...string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	return usagef("--%s %q: must be one of %s", flagName, v, strings.Join(allowed, ", "))
}

// connectDB opens a pool and checks that PostgreSQL answers, so a wrong host, user or
// database name is reported as such (not as a store error of the first query).
func connectDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, usagef("--database-url: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot connect to PostgreSQL (database %q on %s:%d; set --database-url or DATABASE_URL): %w",
			cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// parse parses a command's flags. -h/--help prints the command's help on stdout and is
// not an error; a bad flag, a bad value or a stray argument is a usageError naming the
// problem once (the flag package's own message and usage dump are discarded).
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (bool, error) {
	help, rest, err := parseArgs(fs, args, stdout)
	if help || err != nil {
		return help, err
	}
	if len(rest) > 0 {
		return false, usagef("%s: unexpected argument %q (see \"starter %s --help\")", fs.Name(), rest[0], fs.Name())
	}
	return false, nil
}

// parseArgs is parse for a command that takes arguments besides its flags: it returns
// them, in order, wherever they stand among the flags.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) (help bool, rest []string, err error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return true, nil, nil
		}
		if err != nil {
			return false, nil, usagef("%s: %v (see \"starter %s --help\")", fs.Name(), err, fs.Name())
		}
		if fs.NArg() == 0 {
			return false, rest, nil
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// help is what `starter <command> --help` prints above the flags.
type help struct {
	usage   string // the synopsis after "usage: starter "
	what    string // one line
	example string // one or more command lines
}

// commandFlags is the flag set of a command with the connection flags it uses (with:
// withTemporal, withDB, withJSON) registered. Its help is the synopsis, a one-line
// description, an example and the command's flags.
func commandFlags(name string, h help, with int, stderr io.Writer, getenv func(string) string) (*flag.FlagSet, *conn) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: starter %s\n\n%s\n\nexample:\n", h.usage, h.what)
		for _, line := range strings.Split(h.example, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
		fmt.Fprintf(w, "\nflags:\n")
		fs.PrintDefaults()
	}
	c := &conn{getenv: getenv}
	c.register(fs, getenv, with)
	return fs, c
}
