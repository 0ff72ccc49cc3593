package activity

import (
	"fmt"
	"sync"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/store"
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

// handlerFor is the handler of a bot's route r (found false: the default route), read
// with each hand-off's session: the route's own handler (built with handoff.New from
// handoff.RouteConfig, the one mapping of a route to a handler) or, on the default route,
// Activities.Handler (nil: none). A change of the route applies from the next hand-off. A
// route that cannot be built is a retryable error: the next attempt reads it again.
func (a *Activities) handlerFor(r store.Route, found bool) (handoff.Handler, error) {
	accountKey := r.AccountKey
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
