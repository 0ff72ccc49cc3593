package activity

import (
	"context"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Store is what the activities call in the store (a *store.Store): its operations the
// activities run, and the MCP agents' inbox a route's handler puts hand-offs in.
type Store interface {
	handoff.Inbox
	AdoptDeadPollLeases(ctx context.Context, adopter string, adopterKey int64, ttl, grace, session, overrun time.Duration, max int) ([]store.AdoptedPollLease, error)
	AnyDeadPollWorker(ctx context.Context, asker string) (bool, error)
	BlockSends(ctx context.Context, now time.Time, accountKey string, until time.Time) (store.Account, error)
	ClaimDeadPollLeases(ctx context.Context, claimer string, grace time.Duration, max int, leave store.Adoptable) ([]store.DeadPollLease, error)
	CloseLoginOffer(ctx context.Context, now time.Time, offerID string) (bool, error)
	CommitPage(ctx context.Context, now time.Time, in store.PageInput) (store.PageResult, error)
	CompleteSend(ctx context.Context, now time.Time, c store.Completion) (store.SendOutcome, error)
	ConfirmEnrollment(ctx context.Context, now time.Time, in store.ConfirmInput) (store.ConfirmResult, error)
	CreateLoginOffer(ctx context.Context, now time.Time, offerID, requestedBy string, expiresAt time.Time) (store.Offer, error)
	ExpireWindow(ctx context.Context, now time.Time, windowID int64) (store.Window, error)
	FinishMessage(ctx context.Context, now time.Time, messageKey, status, reason string) (store.Message, error)
	ForgetDeadPollWorkers(ctx context.Context, keep time.Duration) (int64, error)
	GetAccount(ctx context.Context, accountKey string) (store.Account, error)
	GetAccountWithSecret(ctx context.Context, accountKey string) (store.AccountWithSecret, error)
	GetAttempt(ctx context.Context, attemptID string) (store.Attempt, error)
	GetMessage(ctx context.Context, messageKey string) (store.Message, error)
	GetStagedMedia(ctx context.Context, mediaID string) (store.StagedMediaData, error)
	GetWindow(ctx context.Context, windowID int64) (store.Window, error)
	HandOnPollLease(ctx context.Context, l store.PollLease) (bool, error)
	HoldReply(ctx context.Context, now time.Time, in store.HoldInput) (store.HeldReply, error)
	Installation(ctx context.Context) (wfapi.Installation, error)
	Limits() store.Limits
	ListActiveAccountsWithSecrets(ctx context.Context) (readable []store.AccountWithSecret, unreadable []store.UnreadableToken, err error)
	ListOpenWindows(ctx context.Context, accountKey string, createdSince time.Time, limit int32) ([]store.OpenedWindow, error)
	ListUnleasedAccounts(ctx context.Context, max int) ([]string, error)
	MarkDeadPollWorkers(ctx context.Context, claimer string) ([]store.DeadPollWorker, error)
	MarkNeedsRelogin(ctx context.Context, now time.Time, accountKey string, generation int32, reason string) (store.StatusChange, error)
	MarkOfferScanned(ctx context.Context, now time.Time, offerID string) error
	OpenAgentSession(ctx context.Context, now time.Time, in store.OpenSessionInput) (store.OpenedSession, error)
	OpenWindowIDs(ctx context.Context, accountKey string) ([]int64, error)
	PauseAccount(ctx context.Context, now time.Time, accountKey string, generation int32, until time.Time, reason string) (store.Account, error)
	PollAttemptAdopted(ctx context.Context, l store.PollLease) (bool, error)
	PurgeBatch(ctx context.Context, now time.Time, policy store.RetentionPolicy, class string, limit int) (int, error)
	QuarantinePage(ctx context.Context, now time.Time, in store.QuarantineInput) (store.QuarantinedPage, error)
	ReadPollLoad(ctx context.Context, seenWithin time.Duration) (store.PollLoad, error)
	RecheckClaimedPollLeases(ctx context.Context, after, afterDead time.Duration, max int) ([]store.ClaimedPollLease, error)
	RecordMediaUpload(ctx context.Context, now time.Time, mediaID string, upload sealing.Secret) (sealing.Secret, error)
	RecordPoll(ctx context.Context, now time.Time, accountKey string, generation int32) error
	RegisterPollWorker(ctx context.Context, holder string, key int64) error
	ReleasePollLease(ctx context.Context, l store.PollLease) (bool, error)
	ReleaseSend(ctx context.Context, now time.Time, attemptID, reason string) (store.Release, error)
	RenewPollLeases(ctx context.Context, holder string, accountKeys []string, ttl time.Duration) ([]store.LeaseRenewal, error)
	ReserveAndStart(ctx context.Context, now time.Time, in store.ReplyInput, pacing store.SendPacing) (store.PreparedSend, error)
	ResumeAccount(ctx context.Context, now time.Time, accountKey string, generation int32) (store.Account, error)
	StartHeldDelivery(ctx context.Context, now time.Time, windowID int64, heldID string, pacing store.SendPacing) (store.HeldDelivery, error)
	StartReminder(ctx context.Context, now time.Time, windowID int64, pacing store.SendPacing) (store.ReminderStart, error)
	StartSend(ctx context.Context, now time.Time, ref store.SessionRef, attemptID string, pacing store.SendPacing) (store.PreparedSend, error)
	SweepMedia(ctx context.Context, now time.Time) (int64, error)
	TakePollLease(ctx context.Context, l store.PollLease, ttl time.Duration) (taken bool, expires time.Time, err error)
	TouchPollWorker(ctx context.Context, holder string) error
	WaitingHeld(ctx context.Context, accountKey, peerID string) ([]string, error)
	WindowWorkflowID(ctx context.Context, windowID int64) (string, error)
	WorkersAtWork(ctx context.Context, seenWithin time.Duration) (map[string]bool, error)
}
