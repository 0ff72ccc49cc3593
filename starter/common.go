package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// conn holds the settings every operator command shares with the worker: the same flags
// and environment variables.
type conn struct {
	temporal, namespace, taskQueue, databaseURL string
	json                                        bool
}

func (c *conn) register(fs *flag.FlagSet, getenv func(string) string) {
	{
		fs.StringVar(&c.temporal, "temporal-address", envOr(getenv, "TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
		fs.StringVar(&c.namespace, "temporal-namespace", envOr(getenv, "TEMPORAL_NAMESPACE", "default"), "Temporal namespace (env TEMPORAL_NAMESPACE)")
		fs.StringVar(&c.taskQueue, "task-queue", envOr(getenv, "ILINKFLOW_TASK_QUEUE", wfapi.DefaultTaskQueue), "task queue of the workflows (env ILINKFLOW_TASK_QUEUE)")
	}
	fs.StringVar(&c.databaseURL, "database-url", databaseURL(getenv), "PostgreSQL URL (env DATABASE_URL)")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts")
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
	pool, err := pgxpool.New(ctx, c.databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect PostgreSQL: %w", err)
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
	tc, err := client.DialContext(ctx, client.Options{HostPort: c.temporal, Namespace: c.namespace, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("connect Temporal at %s: %w", c.temporal, err)
	}
	return tc, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// parse parses a command's flags; -h prints usage and is not an error.
func parse(fs *flag.FlagSet, args []string) (bool, error) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// commandFlags is the flag set of an operator command with the shared connection flags
// registered and usage printed to stderr: usage first, then the flags.
func commandFlags(name, usage string, stderr io.Writer, getenv func(string) string) (*flag.FlagSet, *conn) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	c := &conn{}
	c.register(fs, getenv)
	return fs, c
}
