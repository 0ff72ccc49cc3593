// Package activities holds the Temporal activities of ilinkflow. Each transactional
// activity is one store call (one database transaction); protocol activities call iLink
// through the ilink client. Activities are idempotent under Temporal retries and return
// no secret: tokens are read from the store (sealed at rest) inside the activity.
package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/ilink"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
)

// Config holds the activities' tunables. Durations are configuration so that tests stay
// short.
type Config struct {
	// TaskQueue is where workflows started by activities run.
	TaskQueue string
	// Client is the iLink client configuration (base URL, CDN, versions, timeouts).
	Client ilink.Config
	// PollSession bounds one PollAccount activity on an idle account (default 10m).
	PollSession time.Duration
	// HeartbeatEvery is the heartbeat period of long-running activities (default 10s).
	HeartbeatEvery time.Duration
	// SendGap is the minimum gap between two sends of one bot (default 2s).
	SendGap time.Duration
	// ThrottlePenalty is how long a bot's sends stop after an unexplained ret -2 (60m).
	ThrottlePenalty time.Duration
	// MaxAccounts bounds the number of active accounts at enrollment.
	MaxAccounts int
	// DeferredBefore, when set, defers messages sent before it (backlog at first start).
	DeferredBefore *time.Time
	// SessionTTL bounds agent sessions (0: the window's expiry).
	SessionTTL time.Duration
}

// Handler receives deliverable messages (the agent hand-off, design.md §5).
type Handler interface {
	// Deliver hands a message to the agent. The session token is the agent's capability
	// to reply; it must not be logged. A nil error means the agent has it.
	Deliver(ctx context.Context, d Delivery) error
}

// Delivery is what an agent receives.
type Delivery struct {
	Message      store.Message
	SessionID    string
	SessionToken sealing.Secret
	Window       store.Window
}

// Activities carries the dependencies of every activity. Register a *Activities with the
// worker; its exported methods are the activities.
type Activities struct {
	Store    *store.Store
	Pool     *pgxpool.Pool
	Temporal client.Client
	Handler  Handler
	Config   Config
	Logger   *slog.Logger
	// NewClient builds an iLink client for a base URL and bot token (nil: ilink.New).
	NewClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
}

var errNotImplemented = errors.New("activities: not implemented yet")

// PollAccount long-polls one account generation, committing each non-empty page with its
// cursor before anything else happens, under a per-account PostgreSQL lock so that two
// attempts never poll the same bot at once.
func (a *Activities) PollAccount(ctx context.Context, in PollInput) (PollResult, error) {
	return PollResult{}, errNotImplemented
}

// NotifyStart tells iLink that the account's poller started (failures are ignored).
func (a *Activities) NotifyStart(ctx context.Context, in AccountRef) error { return errNotImplemented }

// NotifyStop tells iLink that the account's poller stopped (failures are ignored).
func (a *Activities) NotifyStop(ctx context.Context, in AccountRef) error { return errNotImplemented }

// PauseAccount pauses an account (stale-token pause).
func (a *Activities) PauseAccount(ctx context.Context, in PauseInput) error { return errNotImplemented }

// ResumeAccount makes a paused account active again.
func (a *Activities) ResumeAccount(ctx context.Context, in StatusInput) error {
	return errNotImplemented
}

// MarkNeedsRelogin records a dead bot token; its windows are cancelled.
func (a *Activities) MarkNeedsRelogin(ctx context.Context, in StatusInput) (StatusOutput, error) {
	return StatusOutput{}, errNotImplemented
}

// SyncWindows starts a ReplyWindow workflow for each opened window (idempotent) and
// signals each retired one to end (a window without a workflow is ignored).
func (a *Activities) SyncWindows(ctx context.Context, in WindowsInput) error {
	return errNotImplemented
}

// HandOff opens an agent session for the window's deliverable message and delivers it.
func (a *Activities) HandOff(ctx context.Context, in HandOffInput) (HandOffOutput, error) {
	return HandOffOutput{}, errNotImplemented
}

// Send runs one reply through a window: reserve (idempotent by request id), pace and
// gate per bot, start, transmit once, complete. A transmit whose outcome is unknown
// completes the attempt as unknown and is never re-sent; a retried activity that finds
// its attempt already sending completes it as unknown.
func (a *Activities) Send(ctx context.Context, in SendInput) (SendOutput, error) {
	return SendOutput{}, errNotImplemented
}

// GetWindowState reads a window's stored state.
func (a *Activities) GetWindowState(ctx context.Context, windowID int64) (WindowState, error) {
	return WindowState{}, errNotImplemented
}

// ExpireWindow retires a window whose expiry passed (idempotent).
func (a *Activities) ExpireWindow(ctx context.Context, in ExpireInput) (WindowState, error) {
	return WindowState{}, errNotImplemented
}

// CreateOffer records a QR login offer (idempotent).
func (a *Activities) CreateOffer(ctx context.Context, in OfferInput) error { return errNotImplemented }

// FetchQRCode asks iLink for a QR code, listing the tokens of our live bots so that iLink
// can answer binded_redirect.
func (a *Activities) FetchQRCode(ctx context.Context, offerID string) (QRCodeOutput, error) {
	return QRCodeOutput{}, errNotImplemented
}

// PollQRStatus polls the QR status once; on "scaned" it marks the offer scanned, on
// "confirmed" it runs the confirm transaction.
func (a *Activities) PollQRStatus(ctx context.Context, in QRPollInput) (QRPollOutput, error) {
	return QRPollOutput{}, errNotImplemented
}

// CloseOffer deletes an offer that expired or was cancelled (idempotent).
func (a *Activities) CloseOffer(ctx context.Context, in CloseOfferInput) error {
	return errNotImplemented
}

// StartPoller starts the AccountPoller of an account generation, or tells the running one
// to rotate to it (signal-with-start).
func (a *Activities) StartPoller(ctx context.Context, in AccountRef) error { return errNotImplemented }

// StopPollers tells the pollers of the given accounts to stop (a missing one is ignored).
func (a *Activities) StopPollers(ctx context.Context, accountKeys []string) error {
	return errNotImplemented
}
