// Command starter is the operator's CLI of ilinkflow. This version carries the commands
// the store needs: migrate (apply the embedded schema migrations) and keygen (print a new
// sealing key entry). Enrollment and account commands arrive with the workflows.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/sealing"
)

const usage = `usage: starter <command> [flags]

commands:
  migrate   apply the embedded PostgreSQL migrations (idempotent, safe to run concurrently)
  keygen    print a new sealing key entry "N:<base64>" for ILINKFLOW_SEALING_KEYS
  enroll    enroll a bot: QR code in the terminal, status as it moves, verification code prompt
  accounts  list accounts with status, generation, last successful poll and open window
  windows   list reply windows
  pause     pause an account (--account KEY --for 1h)
  resume    resume a paused account
  remove    disable an account: cancel its windows and stop its poller
  dev       run everything locally (Temporal dev server, simulator, worker, echo agent, demo bot) and chat

Commands share the worker's settings: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
ILINKFLOW_TASK_QUEUE, DATABASE_URL (or the matching flags). --json prints JSON.

Run "starter <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr, getenv)
	case "keygen":
		return keygen(args[1:], stdout, stderr)
	case "enroll":
		return enrollCmd(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "accounts":
		return accountsCmd(ctx, args[1:], stdout, stderr, getenv)
	case "windows":
		return windowsCmd(ctx, args[1:], stdout, stderr, getenv)
	case "dev":
		return devCmd(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "pause", "resume", "remove":
		return steerCmd(ctx, args[0], args[1:], stdout, stderr, getenv)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func databaseURL(getenv func(string) string) string {
	if u := getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database-url", databaseURL(getenv), "PostgreSQL URL (env DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	res, err := db.Migrate(ctx, pool, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema at version %d (%d migration(s) applied)\n", res.Version, len(res.Applied))
	return nil
}

func keygen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gen := fs.String("generation", "1", "key generation (increase it to rotate keys)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	g, err := strconv.ParseInt(*gen, 10, 32)
	if err != nil || g < 1 {
		return fmt.Errorf("generation must be a positive integer")
	}
	spec, err := sealing.GenerateKeySpec(int32(g))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, spec)
	return nil
}
