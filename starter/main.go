// Command starter is the operator's CLI of ilinkflow: migrate, keygen, enroll, accounts,
// windows, held, reminder, quarantine, pause, resume, remove, route, mcp-agent,
// ilink-client, forget and dev. It exits 0 on success, 1 on failure and 2 on a usage mistake.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"

	"github.com/ilinkflow/ilinkflow/internal/version"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

const usage = `usage: starter <command> [flags]

commands:
  migrate   apply the embedded PostgreSQL migrations (idempotent, safe to run concurrently)
  keygen    print a new sealing key entry "N:<base64>" for ILINKFLOW_SEALING_KEYS
  enroll    enroll a bot: QR code in the terminal, status as it moves, verification code prompt
  accounts  list accounts with status, generation, last successful poll and open window
  windows   list reply windows, with the replies held for each one's conversation
  held      list the replies held for a conversation's next window, or drop one still waiting
  reminder  turn a bot's reminder before a window closes on or off
  quarantine list the pages the store could not take as iLink handed them out (kept sealed)
  pause     pause an account (--account KEY --for 1h)
  resume    resume a paused account
  remove    disable an account: cancel its windows and stop its poller
  route     route a bot to its own agent (webhook, workflow, MCP agent, iLink client, echo) or back to the default
  mcp-agent add, token, revoke or list the agents that connect to the MCP server
  ilink-client add, token, revoke or list the iLink clients (OpenClaw plugin, ...); list and approve their QR logins
  forget    erase a WeChat user's content and their workflows' histories (--peer ID, --dry-run or --yes)
  dev       run everything locally (Temporal dev server, simulator, worker, echo agent, demo bot) and chat
  version   print the version, commit and build date (also --version)

Commands share the worker's settings: the Temporal connection as the temporal CLI
reads it (a profile of TEMPORAL_CONFIG_FILE, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY, TEMPORAL_TLS_*), ILINKFLOW_TASK_QUEUE, DATABASE_URL (or the matching
flags). Exit status: 0 success, 1 failure, 2 usage mistake.

Run "starter <command> --help" for the flags of a command and an example.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first Ctrl-C the default handling is back: a second one ends the process.
	go func() { <-ctx.Done(); stop() }()
	code := runMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// runMain runs a command, prints its error once on stderr and returns the exit status:
// 0 success, 1 failure, 2 usage (unknown command or flag, bad value, missing argument).
func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	err := run(ctx, args, stdin, stdout, stderr, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
	}
	return exitCode(err)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	ctx, stopTracing, err := withTracing(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer stopTracing()
	switch args[0] {
	case "version", "--version", "-version":
		if len(args) > 1 {
			return usagef("%s: unexpected argument %q", args[0], args[1])
		}
		fmt.Fprintln(stdout, version.Line("starter"))
		return nil
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
	case "held":
		return heldCmd(ctx, args[1:], stdout, stderr, getenv)
	case "reminder":
		return reminderCmd(ctx, args[1:], stdout, stderr, getenv)
	case "quarantine":
		return quarantineCmd(ctx, args[1:], stdout, stderr, getenv)
	case "dev":
		return devCmd(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "route":
		return routeCmd(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "mcp-agent":
		return mcpAgentCmd(ctx, args[1:], stdout, stderr, getenv)
	case "ilink-client":
		return iLinkClientCmd(ctx, args[1:], stdout, stderr, getenv)
	case "forget":
		return forgetCmd(ctx, args[1:], stdout, stderr, getenv)
	case "pause", "resume", "remove":
		return steerCmd(ctx, args[0], args[1:], stdout, stderr, getenv)
	default:
		return usagef("unknown command %q (run \"starter help\" for the list)", args[0])
	}
}

func databaseURL(getenv func(string) string) string {
	if getenv != nil {
		if u := getenv("DATABASE_URL"); u != "" {
			return u
		}
	}
	return vocab.DefaultDatabaseURL
}

func keygen(args []string, stdout, stderr io.Writer) error {
	fs, _ := commandFlags("keygen", help{"keygen [--generation N]",
		`Prints a new sealing key entry "N:<base64>" to append to ILINKFLOW_SEALING_KEYS.`,
		"export ILINKFLOW_SEALING_KEYS=$(starter keygen --generation 1)"}, 0, stderr, nil)
	gen := fs.Int("generation", 1, "key generation (increase it to rotate keys)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *gen < 1 || *gen > math.MaxInt32 {
		return usagef("--generation %d: must be a positive integer", *gen)
	}
	spec, err := sealing.GenerateKeySpec(int32(*gen))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, spec)
	return nil
}
