package webui

import (
	"context"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// Store is what the web front end reads and changes in the store (a *store.Store): the
// operator's actions it shares with the CLI, the console's own reads, routes, MCP agents
// and iLink clients (and their logins' approval), and its sessions, owner links, flashes
// and login throttle.
type Store interface {
	operator.Store
	operator.ForgetStore
	AccountActivity(ctx context.Context, since time.Time) (map[string]store.AccountActivity, error)
	ApproveILinkLogin(ctx context.Context, now time.Time, code, client, accountKey, by string) error
	ClearRoute(ctx context.Context, now time.Time, accountKey, by string) (bool, error)
	Conversations(ctx context.Context, accountKey string, limit int32) (store.Conversations, error)
	EndWebUISession(ctx context.Context, token string) error
	ForgetExpiredWebUIState(ctx context.Context, now time.Time) (int64, error)
	GetRoute(ctx context.Context, accountKey string) (r store.Route, found bool, err error)
	ListILinkClients(ctx context.Context) ([]store.ILinkClient, error)
	ListMCPAgents(ctx context.Context) ([]store.MCPAgent, error)
	MessageText(ctx context.Context, accountKey, messageKey string) (content store.MessageContent, found bool, err error)
	NewOwnerLink(ctx context.Context, now time.Time, offer string, expires time.Time) (sealing.Secret, error)
	NewWebUISession(ctx context.Context, now time.Time, ttl time.Duration) (store.WebUISession, error)
	OwnerLink(ctx context.Context, now time.Time, token string) (offer string, expires time.Time, found bool, err error)
	SetRoute(ctx context.Context, now time.Time, in store.RouteInput) (store.Route, error)
	SetWebUIFlash(ctx context.Context, token, kind, msg string) error
	TakeWebUIFlash(ctx context.Context, token string) (kind, msg string, err error)
	WaitingHeldCounts(ctx context.Context) ([]store.HeldCount, error)
	WebUILoginAttempt(ctx context.Context, rule store.LoginThrottle, clientAddress string, wrong bool) (allowed bool, err error)
	WebUISession(ctx context.Context, now time.Time, token string) (sess store.LiveWebUISession, found bool, err error)
}

var _ Store = (*store.Store)(nil)
