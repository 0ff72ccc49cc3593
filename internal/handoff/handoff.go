// Package handoff holds the agent handlers of ilinkflow (docs/agents.md#agent-hand-off):
// the ways a deliverable message reaches the agent that answers it. Each is an
// [Handler] run by the HandOff activity of the message's ReplyWindow workflow:
//
//   - webhook: an HTTP POST of the delivery as JSON, signed with HMAC-SHA256 ([Sign],
//     [Verify]); a 2xx answer may carry replies to send at once and mark the message
//     handled;
//   - workflow: starts a Temporal workflow type on a task queue for the message (package
//     agent is the Go helper such an agent replies and finishes with);
//   - mcp: puts the message in the inbox of an agent connected to the MCP server, whose
//     wait tool takes it ([MCP]);
//   - ilink: queues the message for an iLink client, which takes it with the iLink
//     facade's getupdates ([ILink]);
//   - echo: built in, answers "echo: <summary>" and marks the message handled.
//
// The session token a handler receives is the agent's capability to reply; no handler
// logs it or puts it in an error.
package handoff

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Handler kinds. A bot's route (store.Route) names one of the last four; mcp is a route
// kind only (an MCP agent answers the bots routed to it).
const (
	KindNone     = "none"
	KindEcho     = vocab.RouteEcho
	KindWebhook  = vocab.RouteWebhook
	KindWorkflow = vocab.RouteWorkflow
	KindMCP      = vocab.RouteMCP
	KindILink    = vocab.RouteILink
)

// Bounds of Config.Timeout. The HandOff activity's start-to-close timeout (2 minutes) must
// outlast one webhook call.
const (
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = vocab.MaxWebhookTimeout
)

// MinSecretBytes is the shortest webhook secret accepted.
const MinSecretBytes = vocab.MinWebhookSecretBytes

// Config selects and configures the handler.
type Config struct {
	// Kind is none, echo, webhook or workflow ("" is none).
	Kind string
	// WebhookURL is the absolute http(s) URL the webhook handler POSTs to.
	WebhookURL string
	// WebhookSecret signs the webhook's requests (at least MinSecretBytes bytes).
	WebhookSecret sealing.Secret
	// Timeout bounds one webhook request (0: DefaultTimeout; at most MaxTimeout).
	Timeout time.Duration
	// WorkflowType and TaskQueue name the agent workflow the workflow handler starts.
	WorkflowType string
	TaskQueue    string
	// MCPAgent names the MCP agent of the mcp handler (a route's only).
	MCPAgent string
	// ILinkClient names the iLink client of the ilink handler (a route's only).
	ILinkClient string
}

// Validate reports what is wrong with the configuration, without a Temporal client (New
// also needs one for the workflow handler). No error text holds the secret.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("handler "+format, args...)) }
	switch c.Kind {
	case "", KindNone, KindEcho:
	case KindWebhook:
		if c.WebhookURL == "" {
			bad("webhook: the webhook URL is required (--webhook-url or ILINKFLOW_WEBHOOK_URL)")
		} else if err := checkURL(c.WebhookURL); err != nil {
			bad("webhook: webhook URL: %v", err)
		}
		switch n := len(c.WebhookSecret.Reveal()); {
		case n == 0:
			bad("webhook: the webhook secret is required (ILINKFLOW_WEBHOOK_SECRET)")
		case n < MinSecretBytes:
			bad("webhook: the webhook secret must be at least %d bytes (it has %d)", MinSecretBytes, n)
		}
		if c.Timeout < 0 || c.Timeout > MaxTimeout {
			bad("webhook: timeout %v must be between 0 (default %v) and %v", c.Timeout, DefaultTimeout, MaxTimeout)
		}
	case KindWorkflow:
		if strings.TrimSpace(c.WorkflowType) == "" {
			bad("workflow: the agent workflow type is required (--agent-workflow or ILINKFLOW_AGENT_WORKFLOW)")
		}
		if strings.TrimSpace(c.TaskQueue) == "" {
			bad("workflow: the agent task queue is required (--agent-task-queue or ILINKFLOW_AGENT_TASK_QUEUE)")
		}
	case KindMCP:
		if err := store.CheckMCPAgentName(c.MCPAgent); err != nil {
			bad("mcp: %v", err)
		}
	case KindILink:
		if err := store.CheckILinkClientName(c.ILinkClient); err != nil {
			bad("ilink: %v", err)
		}
	default:
		bad("kind %q is unknown: want none, echo, webhook or workflow", c.Kind)
	}
	return errors.Join(errs...)
}

// New builds the handler cfg selects: nil (and no error) for none, so that the hand-off
// only opens the agent session; tc is the Temporal client the workflow handler starts
// agent workflows with, inbox the store the mcp and ilink handlers queue messages in (each
// unused by the others).
func New(cfg Config, tc client.Client, inbox Inbox) (Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Kind {
	case KindEcho:
		return Echo{}, nil
	case KindWebhook:
		return NewWebhook(cfg.WebhookURL, cfg.WebhookSecret, cfg.Timeout)
	case KindWorkflow:
		if tc == nil {
			return nil, errors.New("handler workflow: a Temporal client is required")
		}
		return &Workflow{Client: tc, WorkflowType: cfg.WorkflowType, TaskQueue: cfg.TaskQueue}, nil
	case KindMCP:
		if inbox == nil {
			return nil, errors.New("handler mcp: a store is required")
		}
		return &MCP{Agent: cfg.MCPAgent, Inbox: inbox}, nil
	case KindILink:
		if inbox == nil {
			return nil, errors.New("handler ilink: a store is required")
		}
		return &ILink{Client: cfg.ILinkClient, Inbox: inbox}, nil
	}
	return nil, nil
}

// RouteConfig is the handler configuration of a bot's route (store.Route, as GetRoute
// returns it with its webhook URL and secret): the one place a route becomes a Config,
// which New builds as it builds the worker's default handler.
func RouteConfig(r store.Route) Config {
	switch r.Kind {
	case vocab.RouteWebhook:
		return Config{Kind: KindWebhook, WebhookURL: r.WebhookURL, WebhookSecret: r.WebhookSecret, Timeout: r.WebhookTimeout}
	case vocab.RouteWorkflow:
		return Config{Kind: KindWorkflow, WorkflowType: r.WorkflowType, TaskQueue: r.TaskQueue}
	case vocab.RouteEcho:
		return Config{Kind: KindEcho}
	case vocab.RouteMCP:
		return Config{Kind: KindMCP, MCPAgent: r.MCPAgent}
	case vocab.RouteILink:
		return Config{Kind: KindILink, ILinkClient: r.ILinkClient}
	}
	// An unknown kind (a route of a newer release) fails New's validation.
	return Config{Kind: r.Kind}
}
