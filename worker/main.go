// Command worker runs an ilinkflow worker: it migrates PostgreSQL, serves the Temporal
// workflows and activities on the task queue, makes sure every active account has its
// poller and every open reply window its workflow, and runs until SIGINT or SIGTERM, when
// it lets in-flight sends finish before exiting. Run "worker --help" for the settings and
// "worker --version" for the build's version, commit and date.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/version"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(version.Line("worker"))
		return
	}
	cfg, err := gateway.ConfigFromEnv(os.Getenv, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		gateway.Usage(os.Stdout)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: invalid configuration:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = gateway.Run(ctx, cfg, gateway.Options{Logger: cfg.NewLogger(os.Stderr)})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
