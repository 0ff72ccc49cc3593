package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// routeResult is what `starter route` prints: the bot's route after the change (never
// the secret, nor the webhook's full URL).
type routeResult struct {
	AccountKey   string `json:"account_key"`
	Route        string `json:"route"` // a store.RouteKinds kind, or "default"
	WebhookHost  string `json:"webhook_host,omitempty"`
	WorkflowType string `json:"workflow_type,omitempty"`
	TaskQueue    string `json:"task_queue,omitempty"`
	MCPAgent     string `json:"mcp_agent,omitempty"`
	Version      int64  `json:"version,omitempty"`
	// Changed is false when --default found the bot on the default route already.
	Changed bool `json:"changed"`
}

// routeDefault is the route of a bot without one of its own: the worker's --handler.
const routeDefault = "default"

// maxSecretFileBytes bounds what is read of a webhook secret file.
const maxSecretFileBytes = store.MaxWebhookSecretBytes + 2

func routeCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("route", help{
		"route --account KEY (--webhook-url URL --webhook-secret-file FILE [--webhook-timeout D] | --workflow-type T --task-queue Q | --mcp-agent NAME | --echo | --default) [flags]",
		"Routes one bot to its own agent (a webhook with its own signing secret, a workflow, an MCP agent, the echo) or back to the worker's --handler (--default); applies from the bot's next hand-off.",
		"starter route --account ilk_0123abcd --webhook-url https://agent.example/hook --webhook-secret-file ./agent.secret\n" +
			"openssl rand -hex 32 | starter route --account ilk_0123abcd --webhook-url https://agent.example/hook --webhook-secret-file -\n" +
			"starter route --account ilk_0123abcd --workflow-type MyAgent --task-queue agents\n" +
			"starter route --account ilk_0123abcd --mcp-agent support   # after: starter mcp-agent add support\n" +
			"starter route --account ilk_0123abcd --default"}, withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "account key of the bot (required)")
	webhookURL := fs.String("webhook-url", "", "webhook route: the URL deliveries are POSTed to")
	secretFile := fs.String("webhook-secret-file", "", `webhook route: file holding the signing secret (at least 16 bytes; "-" reads stdin); the secret is stored sealed and never printed`)
	timeout := fs.Duration("webhook-timeout", 0, "webhook route: timeout of one request (0: the default 10s, at most 90s)")
	workflowType := fs.String("workflow-type", "", "workflow route: the agent workflow type started for each message")
	taskQueue := fs.String("task-queue", "", "workflow route: the agent workflow's task queue")
	mcpAgent := fs.String("mcp-agent", "", "mcp route: the MCP agent (starter mcp-agent add) that answers the bot through the MCP server")
	echo := fs.Bool("echo", false, "echo route: the built-in echo answers the bot's messages")
	toDefault := fs.Bool("default", false, "back to the worker's default route (its --handler)")
	by := fs.String("by", envOr(getenv, "USER", "operator"), "who changes the route (recorded in the route audit)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *account == "" {
		return usagef("route: --account is required")
	}
	webhook := *webhookURL != "" || *secretFile != "" || *timeout != 0
	workflow := *workflowType != "" || *taskQueue != ""
	modes := 0
	for _, on := range []bool{webhook, workflow, *mcpAgent != "", *echo, *toDefault} {
		if on {
			modes++
		}
	}
	switch {
	case modes == 0:
		return usagef("route: give one route: --webhook-url with --webhook-secret-file, --workflow-type with --task-queue, --mcp-agent, --echo or --default")
	case modes > 1:
		return usagef("route: give one route only (webhook, workflow, --mcp-agent, --echo or --default)")
	case webhook && (*webhookURL == "" || *secretFile == ""):
		return usagef("route: a webhook route needs --webhook-url and --webhook-secret-file")
	case workflow && (*workflowType == "" || *taskQueue == ""):
		return usagef("route: a workflow route needs --workflow-type and --task-queue")
	case *timeout < 0 || *timeout > store.MaxWebhookTimeout:
		return usagef("route: --webhook-timeout %s: must be between 0 and %s", *timeout, store.MaxWebhookTimeout)
	}
	in := store.RouteInput{AccountKey: *account, By: *by}
	switch {
	case webhook:
		// The worker opens the secret with its sealing keys: a throwaway key would seal a
		// secret nobody can open.
		if _, err := sealing.LoadKeyring(getenv); err != nil {
			return fmt.Errorf("route: a webhook route's secret is sealed with the worker's keys: set %s (or %s): %w",
				sealing.EnvKeys, sealing.EnvKeysFile, err)
		}
		secret, err := readSecret(*secretFile, stdin)
		if err != nil {
			return err
		}
		in.Kind, in.WebhookURL, in.WebhookSecret, in.WebhookTimeout = store.RouteWebhook, *webhookURL, secret, *timeout
	case workflow:
		in.Kind, in.WorkflowType, in.TaskQueue = store.RouteWorkflow, *workflowType, *taskQueue
	case *mcpAgent != "":
		in.Kind, in.MCPAgent = store.RouteMCP, *mcpAgent
	case *echo:
		in.Kind = store.RouteEcho
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	out := routeResult{AccountKey: *account, Route: routeDefault, Changed: true}
	if *toDefault {
		if out.Changed, err = st.ClearRoute(ctx, time.Now(), *account, *by); err != nil {
			return err
		}
	} else {
		r, err := st.SetRoute(ctx, time.Now(), in)
		if err != nil {
			return err
		}
		out.Route, out.WebhookHost, out.WorkflowType, out.TaskQueue, out.Version = r.Kind, r.WebhookHost, r.WorkflowType, r.TaskQueue, r.Version
		out.MCPAgent = r.MCPAgent
	}
	if c.json {
		return printJSON(stdout, out)
	}
	switch out.Route {
	case routeDefault:
		if !out.Changed {
			fmt.Fprintf(stdout, "%s is on the default route already (the worker's --handler)\n", out.AccountKey)
		} else {
			fmt.Fprintf(stdout, "%s is back on the default route (the worker's --handler) from its next message\n", out.AccountKey)
		}
	default:
		fmt.Fprintf(stdout, "%s routes to %s from its next message (route version %d)\n", out.AccountKey, routeText(out), out.Version)
	}
	return nil
}

// routeText shows a route in one phrase: "webhook at agent.example", "workflow MyAgent on
// task queue agents", "MCP agent support", "echo".
func routeText(r routeResult) string {
	switch r.Route {
	case store.RouteWebhook:
		return "webhook at " + r.WebhookHost
	case store.RouteWorkflow:
		return fmt.Sprintf("workflow %s on task queue %s", r.WorkflowType, r.TaskQueue)
	case store.RouteMCP:
		return "MCP agent " + r.MCPAgent
	}
	return r.Route
}

// readSecret reads a webhook secret from a file ("-": stdin), without its trailing line
// end. No error holds the secret.
func readSecret(path string, stdin io.Reader) (sealing.Secret, error) {
	var r io.Reader
	if path == "-" {
		if stdin == nil {
			return sealing.Secret{}, errors.New("route: --webhook-secret-file -: no standard input")
		}
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: %w", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretFileBytes+1))
	if err != nil {
		return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: %w", err)
	}
	defer clear(b)
	if len(b) > maxSecretFileBytes {
		return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: the secret is over %d bytes", store.MaxWebhookSecretBytes)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if len(s) < store.MinWebhookSecretBytes {
		return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: the secret must be at least %d bytes (it has %d)", store.MinWebhookSecretBytes, len(s))
	}
	return sealing.NewSecret(s), nil
}
