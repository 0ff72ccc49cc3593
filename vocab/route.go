package vocab

import "time"

// Route kinds: the agent a bot's messages are handed to. A bot without a route has the
// worker's default handler (its --handler flags). The set is open: a new kind is a
// constant here, a case of the store's route validation and the CHECK of account_routes
// (migrations 00013, 00014 and 00026).
const (
	// RouteWebhook POSTs each message to the route's URL, signed with its own secret.
	RouteWebhook = "webhook"
	// RouteWorkflow starts the route's workflow type on its task queue for each message.
	RouteWorkflow = "workflow"
	// RouteEcho answers each message with the built-in echo.
	RouteEcho = "echo"
	// RouteMCP offers each message to the route's MCP agent, which takes it with the MCP
	// server's wait tool.
	RouteMCP = "mcp"
	// RouteILink queues each message for the route's iLink client, which takes it with
	// the iLink facade's getupdates.
	RouteILink = "ilink"
)

// RouteKinds lists the route kinds, in the order help texts name them.
var RouteKinds = []string{RouteWebhook, RouteWorkflow, RouteMCP, RouteILink, RouteEcho}

// Bounds of a webhook route's settings, shared by the store, the handler and the
// operator's commands.
const (
	// MinWebhookSecretBytes is the shortest webhook signing secret accepted.
	MinWebhookSecretBytes = 16
	// MaxWebhookSecretBytes is the longest.
	MaxWebhookSecretBytes = 4096
	// MaxWebhookTimeout bounds one webhook request (the HandOff activity's start-to-close
	// timeout, 2 minutes, must outlast it).
	MaxWebhookTimeout = 90 * time.Second
)
