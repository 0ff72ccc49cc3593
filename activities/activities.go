// Package activities is the contract of ilinkflow's Temporal activities: the name of every
// activity, their inputs and outputs (what a workflow history shows for each, and what a
// codec-aware tool reads back), and the types of the errors a workflow branches on. It
// imports no database or network package, so the workflows (which schedule activities by
// these names) stay free of them. The worker implements each name as a method of its
// internal activities type; nothing here runs an activity.
package activities

import (
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Everything in this file crosses Temporal history: no field may hold a secret (bot
// token, context token, session token, image locator, AES key).

// AccountRef names one generation of an account.
type AccountRef struct {
	AccountKey string
	Generation int32
}

// PollInput asks PollAccount to long-poll one account generation.
type PollInput struct {
	AccountKey string
	Generation int32
	// Probe makes one getupdates round trip and returns, whatever it finds (the probe
	// after a stale-token pause).
	Probe bool
	// LeaseEpoch orders the poll activities of the account (the AccountPoller gives each
	// one it schedules a larger epoch; Temporal's attempt orders the retries of one): a
	// newer activity takes the poll lease over from an older one.
	LeaseEpoch int64
	// PagesBefore and MessagesBefore are what the poller's earlier poll sessions
	// committed (wfapi.PollerState): the progress in heartbeat details counts from them,
	// so it shows the totals the state query shows once this session returns.
	PagesBefore    int `json:",omitempty"`
	MessagesBefore int `json:",omitempty"`
}

// WindowRef describes an open window that needs a ReplyWindow workflow (WindowRefOf).
type WindowRef struct {
	ReplyWindowID int64
	AccountKey    string
	MessageKey    string
	// PeerID is the WeChat user the window answers.
	PeerID    string
	ExpiresAt time.Time
	// Deliverable is false for a window whose message was deferred (backlog) or finished.
	Deliverable bool
	// MaxSends is the window's quota; SendsUsed what of it is already reserved or
	// transmitted.
	MaxSends  int32
	SendsUsed int32
	// FinalSlots is how many of the last sends are kept for the final answer;
	// HeldWaiting counts the conversation's held replies the window sends first.
	FinalSlots  int32
	HeldWaiting int32
	// RemindBefore is the bot's reminder before the window ends (0: off).
	RemindBefore time.Duration
}

// PollResult is what one PollAccount activity found. The activity keeps polling across
// pages (it starts the workflows of the windows its commits open itself), so neither an
// idle account nor a page adds history; it returns on a stale token, an upstream error, a
// stop condition, when a window workflow could not be started or signalled, or after its
// session length.
type PollResult struct {
	Pages    int
	Messages int
	// Opened windows need a ReplyWindow workflow; Retired ones must be told to end (only
	// those the activity could not start or signal itself).
	Opened  []WindowRef
	Retired []int64
	// StaleToken: iLink answered -14.
	StaleToken bool
	// UpstreamError is the ilink error code of a failed round trip ("" when none).
	UpstreamError string
	// Stopped is set when the account can no longer be polled by this generation
	// (account_not_active, generation_conflict, account_not_found).
	Stopped string
	// Config is the poller settings of the worker that ran the activity (nil when it has
	// none): a poller takes them in after each poll, so settings changed at a restart reach
	// pollers started before it.
	Config *wfapi.PollerConfig `json:",omitempty"`
}

// AccountState is an account's stored status as its poller acts on it.
type AccountState struct {
	Status      string
	Generation  int32
	PausedUntil *time.Time
}

// PauseInput pauses an account until Until.
type PauseInput struct {
	AccountKey string
	Generation int32
	Until      time.Time
	Reason     string
	Now        time.Time
}

// StatusInput changes the status of an account (resume, needs-relogin).
type StatusInput struct {
	AccountKey string
	Generation int32
	Reason     string
	Now        time.Time
}

// StatusOutput reports the windows a status change cancelled.
type StatusOutput struct {
	Status             string
	CancelledWindowIDs []int64
}

// WindowsInput starts ReplyWindow workflows for opened windows and signals retired ones.
type WindowsInput struct {
	Opened  []WindowRef
	Retired []int64
}

// HandOffInput opens an agent session for the deliverable message of a window and hands
// the message to the configured agent handler.
type HandOffInput struct {
	ReplyWindowID int64
	// Attempt counts hand-offs of this window (re-offers); it keys the session.
	Attempt int
}

// HandOffOutput names the session opened (the token itself went to the agent only).
type HandOffOutput struct {
	SessionID  string
	MessageKey string
	SessionEnd time.Time
	// Delivered is false when no handler is configured or the handler refused for now.
	Delivered bool
	// Replies and Handled are the handler's answer (see Answer). A reply never holds the
	// session token (the activity redacts it).
	Replies []string
	Handled bool
}

// FinishInput records the verdict on a message: Status is handled or failed (with
// Reason).
type FinishInput struct {
	MessageKey string
	Status     string
	Reason     string
}

// FinishOutput is the message's status after FinishMessage.
type FinishOutput struct {
	Status string
}

// SendInput is one reply through a window: reserve → start → transmit → complete, as one
// idempotent activity keyed by RequestID.
type SendInput struct {
	SessionID string
	RequestID string
	Content   vocab.Content
	// ReplyWindowID, when set, is the window the session must belong to (checked before
	// anything is written).
	ReplyWindowID int64
	// Final marks the agent's final answer (it may use the window's kept slots).
	Final bool `json:",omitempty"`
	// FinishHandled, when set, is the key of the message this reply answers: once the
	// reply is confirmed sent, the same activity marks the message handled (FinishMessage's
	// store rule), saving the workflow a FinishMessage activity per answered message.
	FinishHandled string `json:",omitempty"`
}

// SendAnswer is Send's result: the send's outcome (the send Update's answer) and, when the
// send finished its message (SendInput.FinishHandled), the message's status after that.
type SendAnswer struct {
	SendOutput
	// MessageStatus is handled, or held while a held reply of the answer waits, when this
	// send finished its message; "" when it did not (not asked, not confirmed sent, or the
	// store refused: another verdict was recorded first).
	MessageStatus string `json:",omitempty"`
}

// SendOutput is the outcome of a send: the send Update's answer (ErrorCode is a store
// code such as reply_quota_exhausted, or an iLink outcome: throttled, rejected,
// stale_token, not_sent, outcome_unknown; RetryAfter is set while the bot's sends are
// blocked; SendsLeft is the window's quota after this send).
type SendOutput = wfapi.SendResult

// HoldInput is a reply to hold because its window cannot carry it (store.HoldReply):
// made under SessionID, checked against ReplyWindowID.
type HoldInput struct {
	SessionID     string
	ReplyWindowID int64
	RequestID     string
	Content       vocab.Content
	Final         bool
}

// Conversation names one bot's conversation with its owner.
type Conversation struct {
	AccountKey string
	PeerID     string
}

// ReminderInput names the window whose reminder is due.
type ReminderInput struct {
	ReplyWindowID int64
}

// SendHeldInput is a held reply to send through an open window of its conversation.
type SendHeldInput struct {
	ReplyWindowID int64
	HeldID        string
}

// ExpireInput retires a window whose expiry passed. Now is the workflow's time.
type ExpireInput struct {
	ReplyWindowID int64
	Now           time.Time
}

// PurgeInput runs the retention purge: the worker's retention horizons counted back from
// Now (the workflow's time). Limit bounds each batch (0: the store's default), Budget the
// activity's time (0: DefaultPurgeBudget).
type PurgeInput struct {
	Now    time.Time
	Limit  int
	Budget wfapi.Duration
}

// DefaultPurgeBudget is how long one PurgeExpired runs batches before it returns what it
// did (the next scheduled run goes on).
const DefaultPurgeBudget = 4 * time.Minute

// PurgeOutput counts what a PurgeExpired purged, by retention class; Done is false when
// the budget ran out with some class still due.
type PurgeOutput struct {
	Purged map[string]int
	Done   bool
}

// WindowState is the stored state of a window, for the workflow.
type WindowState struct {
	State     string
	ExpiresAt time.Time
	SendsLeft int32
}

// OfferInput records a login offer.
type OfferInput struct {
	OfferID     string
	RequestedBy string
	ExpiresAt   time.Time
	Now         time.Time
}

// QRCodeOutput is the QR code of an offer: the poll key and the URL to render as a QR code.
type QRCodeOutput struct {
	QRCode    string
	QRContent string
}

// QRPollInput polls the QR status once.
type QRPollInput struct {
	OfferID string
	QRCode  string
	// Host is the redirect host to poll ("" for the default base URL).
	Host       string
	VerifyCode string
	Now        time.Time
}

// QRPollOutput is the QR status; on confirmation the activity itself ran the confirm
// transaction (the bot token never leaves the activity).
type QRPollOutput struct {
	Status       string
	RedirectHost string
	Confirmed    *Confirmed
}

// Confirmed is the outcome of a confirmed enrollment.
type Confirmed struct {
	AccountKey          string
	Generation          int32
	Registered          bool
	ReplacedAccountKeys []string
	CancelledWindowIDs  []int64
}

// CloseOfferInput closes an offer that expired or was cancelled.
type CloseOfferInput struct {
	OfferID string
	Now     time.Time
}

// Error types of the non-retryable application errors the activities raise besides the
// store codes (which are used as they are).
const (
	// ErrTypeInvalidInput: an activity input that can never succeed.
	ErrTypeInvalidInput = string(vocab.CodeInvalidInput)
	// ErrTypeUpstream: an iLink call failed in a way a retry cannot fix.
	ErrTypeUpstream = "upstream"
	// ErrTypeHandOffFailed: HandOff's handler failed permanently (a
	// *handoff.PermanentError); the message was marked failed.
	ErrTypeHandOffFailed = "handoff_failed"
)

// The activities, by the name a workflow schedules them with (each the name of a method
// of the worker's *activity.Activities, in internal/activity).
const (
	PollAccount      = "PollAccount"
	ReadAccountState = "ReadAccountState"
	PauseAccount     = "PauseAccount"
	ResumeAccount    = "ResumeAccount"
	MarkNeedsRelogin = "MarkNeedsRelogin"
	SyncWindows      = "SyncWindows"
	StartPoller      = "StartPoller"
	StopPollers      = "StopPollers"
	NotifyStart      = "NotifyStart"
	NotifyStop       = "NotifyStop"
	HandOff          = "HandOff"
	FinishMessage    = "FinishMessage"
	Send             = "Send"
	ExpireWindow     = "ExpireWindow"
	PurgeExpired     = "PurgeExpired"
	CreateOffer      = "CreateOffer"
	FetchQRCode      = "FetchQRCode"
	PollQRStatus     = "PollQRStatus"
	CloseOffer       = "CloseOffer"
	HoldReply        = "HoldReply"
	WaitingHeld      = "WaitingHeld"
	SendHeld         = "SendHeld"
	SendReminder     = "SendReminder"
)

// Names lists every activity name above.
var Names = []string{PollAccount, ReadAccountState, PauseAccount, ResumeAccount, MarkNeedsRelogin, SyncWindows,
	StartPoller, StopPollers, NotifyStart, NotifyStop, HandOff, FinishMessage, Send, ExpireWindow, CreateOffer,
	FetchQRCode, PollQRStatus, CloseOffer, HoldReply, WaitingHeld, SendHeld, SendReminder, PurgeExpired}

// Failures of the media fetch and typing helpers, which the activities return and the
// reply API maps to its answers.

// Media fetch failures (a *MediaError's Code).
const (
	// MediaGone: the CDN no longer serves the object (expired or removed).
	MediaGone = "media_expired"
	// MediaTooLarge: the object exceeds the download cap.
	MediaTooLarge = "media_too_large"
	// MediaUndecryptable: the object does not decrypt with the message's key.
	MediaUndecryptable = "media_undecryptable"
	// MediaUnavailable: the CDN could not be reached or failed (retry later).
	MediaUnavailable = "cdn_unavailable"
	// MediaBadLocator: the stored locator does not decode (never expected).
	MediaBadLocator = "media_locator_invalid"
)

// MediaError is a typed fetch failure. Its text names the code and the iLink failure
// kind only, never a URL, key or byte of media.
type MediaError struct {
	Code string
	// Status is the CDN's HTTP status, when it answered one.
	Status int
}

// Error implements error.
func (e *MediaError) Error() string { return "media fetch failed: " + e.Code }

// TypingError is a failed typing call: Code is the iLink failure kind (or the store's
// code when the account could not be read). It never carries a ticket or token.
type TypingError struct{ Code string }

// Error implements error.
func (e *TypingError) Error() string { return "typing failed: " + e.Code }
