package activities

import (
	"context"
	"fmt"
	"sync"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// routeHandlers caches the handler of each bot's route by its version, so that a route is
// built once per change and not per message. A new version replaces the account's entry;
// a hand-off that took the old handler finishes with it.
type routeHandlers struct {
	mu        sync.Mutex
	byAccount map[string]routeHandler
}

type routeHandler struct {
	version int64
	handler handoff.Handler
}

// handlerFor is the handler of the account's route, read at each hand-off: the route's
// own handler (built with handoff.New from handoff.RouteConfig, the one mapping of a
// route to a handler) or, on the default route, Activities.Handler (nil: none). A change
// of the route applies from the next hand-off. A route that cannot be read or built is
// a retryable error: the next attempt reads it again.
func (a *Activities) handlerFor(ctx context.Context, accountKey string) (handoff.Handler, error) {
	r, found, err := a.Store.GetRoute(ctx, accountKey)
	if err != nil {
		return nil, fmt.Errorf("read the route of account %s: %w", accountKey, err)
	}
	if !found {
		return a.Handler, nil
	}
	c := &a.routes
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.byAccount[accountKey]; ok && h.version == r.Version {
		return h.handler, nil
	}
	h, err := handoff.New(handoff.RouteConfig(r), a.Temporal, a.Store)
	if err != nil {
		// The error names the fault, never the secret (handoff.Config.Validate).
		return nil, fmt.Errorf("the %s route (version %d) of account %s cannot be used: %w", r.Kind, r.Version, accountKey, err)
	}
	if c.byAccount == nil {
		c.byAccount = map[string]routeHandler{}
	}
	c.byAccount[accountKey] = routeHandler{version: r.Version, handler: h}
	attrs := []any{"account", accountKey, "route", r.Kind, "route_version", r.Version}
	switch r.Kind {
	case vocab.RouteWebhook:
		attrs = append(attrs, "webhook_host", r.WebhookHost) // not the URL: it may hold a key
	case vocab.RouteWorkflow:
		attrs = append(attrs, "agent_workflow", r.WorkflowType, "agent_task_queue", r.TaskQueue)
	case vocab.RouteMCP:
		attrs = append(attrs, "mcp_agent", r.MCPAgent)
	}
	a.log().Info("agent route", attrs...)
	return h, nil
}
