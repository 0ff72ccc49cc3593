package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// routeResult is what `starter route` prints: the bot's route after the change (never
// the secret, nor the webhook's full URL).
type routeResult struct {
	AccountKey   string `json:"account_key"`
	Route        string `json:"route"` // a vocab.RouteKinds kind, or "default"
	WebhookHost  string `json:"webhook_host,omitempty"`
	WorkflowType string `json:"workflow_type,omitempty"`
	TaskQueue    string `json:"task_queue,omitempty"`
	MCPAgent     string `json:"mcp_agent,omitempty"`
	ILinkClient  string `json:"ilink_client,omitempty"`
	Version      int64  `json:"version,omitempty"`
	// Changed is false when --default found the bot on the default route already.
	Changed bool `json:"changed"`
}

// routeDefault is the route of a bot without one of its own: the worker's --handler.
const routeDefault = "default"

// maxSecretFileBytes bounds what is read of a webhook secret file.
const maxSecretFileBytes = vocab.MaxWebhookSecretBytes + 2

func routeCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("route", help{
		"route --account KEY (--webhook-url URL --webhook-secret-file FILE [--webhook-timeout D] | --workflow-type T --task-queue Q | --mcp-agent NAME | --ilink-client NAME | --echo | --default) [flags]",
		"Routes one bot to its own agent (a webhook with its own signing secret, a workflow, an MCP agent, an iLink client, the echo) or back to the worker's --handler (--default); applies from the bot's next hand-off.",
		"starter route --account ilk_0123abcd --webhook-url https://agent.example/hook --webhook-secret-file ./agent.secret\n" +
			"openssl rand -hex 32 | starter route --account ilk_0123abcd --webhook-url https://agent.example/hook --webhook-secret-file -\n" +
			"starter route --account ilk_0123abcd --workflow-type MyAgent --task-queue agents\n" +
			"starter route --account ilk_0123abcd --mcp-agent support   # after: starter mcp-agent add support\n" +
			"starter route --account ilk_0123abcd --ilink-client openclaw   # after: starter ilink-client add openclaw\n" +
			"starter route --account ilk_0123abcd --default\n" +
			"starter route --changes --account ilk_0123abcd"}, withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "account key of the bot (required, but with --changes)")
	rf := addRouteFlags(fs, true, "task-queue")
	rf.addILinkClientFlag(fs)
	by := fs.String("by", envOr(getenv, "USER", "operator"), "who changes the route (recorded in the route audit)")
	changes := fs.Bool("changes", false, "list the audited route changes (of --account, or of every bot) instead of changing one")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *changes {
		if rf.modes() > 0 {
			return usagef("route: --changes lists changes; it takes no route")
		}
		return listRouteChanges(ctx, c, *account, stdout, getenv)
	}
	if *account == "" {
		return usagef("route: --account is required")
	}
	if rf.modes() == 0 {
		return usagef("route: give one route: --webhook-url with --webhook-secret-file, --workflow-type with --task-queue, --mcp-agent, --ilink-client, --echo or --default")
	}
	in, err := rf.input("route", *by, stdin, getenv)
	if err != nil {
		return err
	}
	in.AccountKey = *account
	toDefault := rf.toDefault
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
		out.MCPAgent, out.ILinkClient = r.MCPAgent, r.ILinkClient
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

// routeFlags are the flags that choose a route (starter route; starter enroll without
// --default and --ilink-client).
type routeFlags struct {
	webhookURL, secretFile            *string
	timeout                           *time.Duration
	workflowType, taskQueue, mcpAgent *string
	// iLinkClient is set by --ilink-client (addILinkClientFlag), else empty.
	iLinkClient     *string
	echo, toDefault *bool
	taskQueueFlag   string
	// iLinkClientFlag: --ilink-client is registered.
	iLinkClientFlag bool
}

// addRouteFlags registers the route flags (--default only with withDefault); taskQueue
// names the workflow route's task queue flag (starter enroll's --task-queue is ilinkflow's
// own).
func addRouteFlags(fs *flag.FlagSet, withDefault bool, taskQueue string) *routeFlags {
	f := &routeFlags{
		webhookURL:    fs.String("webhook-url", "", "webhook route: the URL deliveries are POSTed to"),
		secretFile:    fs.String("webhook-secret-file", "", `webhook route: file holding the signing secret (at least 16 bytes; "-" reads stdin); the secret is stored sealed and never printed`),
		timeout:       fs.Duration("webhook-timeout", 0, "webhook route: timeout of one request (0: the default 10s, at most 90s)"),
		workflowType:  fs.String("workflow-type", "", "workflow route: the agent workflow type started for each message"),
		taskQueue:     fs.String(taskQueue, "", "workflow route: the agent workflow's task queue"),
		mcpAgent:      fs.String("mcp-agent", "", "mcp route: the MCP agent (starter mcp-agent add) that answers the bot through the MCP server"),
		echo:          fs.Bool("echo", false, "echo route: the built-in echo answers the bot's messages"),
		iLinkClient:   new(string),
		toDefault:     new(bool),
		taskQueueFlag: taskQueue,
	}
	if withDefault {
		f.toDefault = fs.Bool("default", false, "back to the worker's default route (its --handler)")
	}
	return f
}

// addILinkClientFlag registers --ilink-client (starter route: a bot is usually given to an
// iLink client by approving the client's QR login, starter ilink-client approve).
func (f *routeFlags) addILinkClientFlag(fs *flag.FlagSet) {
	f.iLinkClient = fs.String("ilink-client", "", "ilink route: the iLink client (starter ilink-client add) that answers the bot through the iLink facade")
	f.iLinkClientFlag = true
}

func (f *routeFlags) webhook() bool {
	return *f.webhookURL != "" || *f.secretFile != "" || *f.timeout != 0
}
func (f *routeFlags) workflow() bool { return *f.workflowType != "" || *f.taskQueue != "" }

// modes counts the routes the flags name (one is right).
func (f *routeFlags) modes() int {
	n := 0
	for _, on := range []bool{f.webhook(), f.workflow(), *f.mcpAgent != "", *f.iLinkClient != "", *f.echo, *f.toDefault} {
		if on {
			n++
		}
	}
	return n
}

// input is the route the flags name (Kind "" for --default), without its account; a
// webhook's secret is read from its file or stdin. cmd names the command in errors.
func (f *routeFlags) input(cmd, by string, stdin io.Reader, getenv func(string) string) (store.RouteInput, error) {
	routes := "webhook, workflow, --mcp-agent, --echo or --default"
	if f.iLinkClientFlag {
		routes = "webhook, workflow, --mcp-agent, --ilink-client, --echo or --default"
	}
	switch {
	case f.modes() > 1:
		return store.RouteInput{}, usagef("%s: give one route only (%s)", cmd, routes)
	case f.webhook() && (*f.webhookURL == "" || *f.secretFile == ""):
		return store.RouteInput{}, usagef("%s: a webhook route needs --webhook-url and --webhook-secret-file", cmd)
	case f.workflow() && (*f.workflowType == "" || *f.taskQueue == ""):
		return store.RouteInput{}, usagef("%s: a workflow route needs --workflow-type and --%s", cmd, f.taskQueueFlag)
	case *f.timeout < 0 || *f.timeout > vocab.MaxWebhookTimeout:
		return store.RouteInput{}, usagef("%s: --webhook-timeout %s: must be between 0 and %s", cmd, *f.timeout, vocab.MaxWebhookTimeout)
	}
	in := store.RouteInput{By: by}
	switch {
	case f.webhook():
		// The worker opens the secret with its sealing keys: a throwaway key would seal a
		// secret nobody can open.
		if _, err := sealing.LoadKeyring(getenv); err != nil {
			return store.RouteInput{}, fmt.Errorf("%s: a webhook route's secret is sealed with the worker's keys: set %s (or %s): %w",
				cmd, sealing.EnvKeys, sealing.EnvKeysFile, err)
		}
		secret, err := readSecret(*f.secretFile, stdin)
		if err != nil {
			return store.RouteInput{}, err
		}
		in.Kind, in.WebhookURL, in.WebhookSecret, in.WebhookTimeout = vocab.RouteWebhook, *f.webhookURL, secret, *f.timeout
	case f.workflow():
		in.Kind, in.WorkflowType, in.TaskQueue = vocab.RouteWorkflow, *f.workflowType, *f.taskQueue
	case *f.mcpAgent != "":
		in.Kind, in.MCPAgent = vocab.RouteMCP, *f.mcpAgent
	case *f.iLinkClient != "":
		in.Kind, in.ILinkClient = vocab.RouteILink, *f.iLinkClient
	case *f.echo:
		in.Kind = vocab.RouteEcho
	}
	return in, nil
}

// routeText shows a route in one phrase: "webhook at agent.example", "workflow MyAgent on
// task queue agents", "MCP agent support", "iLink client openclaw", "echo".
func routeText(r routeResult) string {
	switch r.Route {
	case vocab.RouteWebhook:
		return "webhook at " + r.WebhookHost
	case vocab.RouteWorkflow:
		return fmt.Sprintf("workflow %s on task queue %s", r.WorkflowType, r.TaskQueue)
	case vocab.RouteMCP:
		return "MCP agent " + r.MCPAgent
	case vocab.RouteILink:
		return "iLink client " + r.ILinkClient
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
		return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: the secret is over %d bytes", vocab.MaxWebhookSecretBytes)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if len(s) < vocab.MinWebhookSecretBytes {
		return sealing.Secret{}, fmt.Errorf("route: --webhook-secret-file: the secret must be at least %d bytes (it has %d)", vocab.MinWebhookSecretBytes, len(s))
	}
	return sealing.NewSecret(s), nil
}

// routeChangeRow is one audited route change as `starter route --changes` prints it.
type routeChangeRow struct {
	AccountKey string    `json:"account_key"`
	ChangedAt  time.Time `json:"changed_at"`
	ChangedBy  string    `json:"changed_by"`
	// From and To are route kinds, or "default".
	From    string `json:"from"`
	To      string `json:"to"`
	Detail  string `json:"detail"`
	Version int64  `json:"version,omitempty"`
}

// listRouteChanges prints the route audit, oldest first: who changed which bot's route
// when, from which kind to which, and what the new route names (never a secret or a
// webhook's full URL: the audit holds neither).
func listRouteChanges(ctx context.Context, c *conn, account string, stdout io.Writer, getenv func(string) string) error {
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	changes, err := st.ListRouteChanges(ctx, account)
	if err != nil {
		return err
	}
	kind := func(k string) string {
		if k == "" {
			return routeDefault
		}
		return k
	}
	rows := make([]routeChangeRow, 0, len(changes))
	for _, ch := range changes {
		rows = append(rows, routeChangeRow{AccountKey: ch.AccountKey, ChangedAt: ch.ChangedAt, ChangedBy: ch.ChangedBy,
			From: kind(ch.OldKind), To: kind(ch.NewKind), Detail: ch.Detail, Version: ch.NewVersion})
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANGED AT\tACCOUNT\tBY\tFROM\tTO\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ChangedAt.UTC().Format(time.RFC3339), r.AccountKey, r.ChangedBy, r.From, r.To, r.Detail)
	}
	return tw.Flush()
}
