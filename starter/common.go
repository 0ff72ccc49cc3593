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

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// conn holds the settings every operator command shares with the worker: the same flags
// and environment variables.
type conn struct {
	temporal, namespace, taskQueue, databaseURL string
	json                                        bool
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
		fs.StringVar(&c.temporal, "temporal-address", envOr(getenv, "TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
		fs.StringVar(&c.namespace, "temporal-namespace", envOr(getenv, "TEMPORAL_NAMESPACE", "default"), "Temporal namespace (env TEMPORAL_NAMESPACE)")
		fs.StringVar(&c.taskQueue, "task-queue", envOr(getenv, "ILINKFLOW_TASK_QUEUE", wfapi.DefaultTaskQueue), "task queue of the workflows (env ILINKFLOW_TASK_QUEUE)")
	}
	if with&withDB != 0 {
		fs.StringVar(&c.databaseURL, "database-url", databaseURL(getenv), "PostgreSQL URL (env DATABASE_URL)")
	}
	if with&withJSON != 0 {
		fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
	}
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
// seal nothing work with an ephemeral key ring when no sealing key is configured.
func openStore(ctx context.Context, c *conn, getenv func(string) string) (*store.Store, func(), error) {
	pool, err := connectDB(ctx, c.databaseURL)
	if err != nil {
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

func dialTemporal(ctx context.Context, c *conn, stderr io.Writer) (client.Client, error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tc, err := client.DialContext(ctx, client.Options{HostPort: c.temporal, Namespace: c.namespace, Logger: logger,
		DataConverter: codecConverter()})
	if err != nil {
		return nil, fmt.Errorf("connect Temporal at %s: %w", c.temporal, err)
	}
	return tc, nil
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
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return true, nil
	}
	if err != nil {
		return false, usagef("%s: %v (see \"starter %s --help\")", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return false, usagef("%s: unexpected argument %q (see \"starter %s --help\")", fs.Name(), fs.Arg(0), fs.Name())
	}
	return false, nil
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
	c := &conn{}
	c.register(fs, getenv, with)
	return fs, c
}
