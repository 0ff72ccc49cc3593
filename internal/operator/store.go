package operator

import (
	"context"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Store is what the operator's actions read and change in the store (a *store.Store).
type Store interface {
	DisableAccount(ctx context.Context, now time.Time, accountKey string, generation int32, reason string) (store.StatusChange, error)
	GetAccount(ctx context.Context, accountKey string) (store.Account, error)
	Installation(ctx context.Context) (wfapi.Installation, error)
	ListAccounts(ctx context.Context, status string) ([]store.Account, error)
	ListRoutes(ctx context.Context) ([]store.Route, error)
	ListWindows(ctx context.Context, f store.WindowFilter) ([]store.Window, error)
	OpenWindowIDs(ctx context.Context, accountKey string) ([]int64, error)
	PauseAccount(ctx context.Context, now time.Time, accountKey string, generation int32, until time.Time, reason string) (store.Account, error)
	ResumeAccount(ctx context.Context, now time.Time, accountKey string, generation int32) (store.Account, error)
	UnreadableTokens(ctx context.Context, accounts []store.Account) ([]store.UnreadableToken, error)
}
