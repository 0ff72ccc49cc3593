// Package wfapi is the public contract of ilinkflow's Temporal workflows: task queue,
// workflow type names and ids, signal, update and query names, and their payloads. The
// workflows implement it; activities, the worker, the operator CLI and agents use it.
// No payload here may carry a secret: everything in it lands in Temporal history.
package wfapi

import (
	"strconv"
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// DefaultTaskQueue is the task queue of every ilinkflow workflow and activity.
const DefaultTaskQueue = "ilinkflow"

// Workflow type names.
const (
	AccountPollerWorkflow = "AccountPoller"
	ReplyWindowWorkflow   = "ReplyWindow"
	EnrollmentWorkflow    = "Enrollment"
)

// Workflow ids. Every workflow id an installation (one database) starts for a reply
// window, an account's poller or an agent names the installation (Installation.ID, the
// store's installation id), so that installations sharing one Temporal namespace never
// address each other's workflows (docs/workflow-ids.md):
//
//	ilink-window/<installation>/<reply window id>
//	ilink-account/<installation>/<account key>
//	ilink-agent/<installation>/<message key>
//	ilink-enrollment/<offer id>   (offer ids are random: unique without the installation)
//
// Installations in one namespace also need their own task queues: a worker runs whatever
// its task queue carries, against its own database.

// Installation names one installation's workflows. store.Store.Installation reads it.
type Installation struct {
	// ID is the installation id (12 lowercase hex digits).
	ID string
}

// WindowWorkflowID is the workflow id of a reply window's workflow (ReplyWindowID).
func (i Installation) WindowWorkflowID(windowID int64) string { return ReplyWindowID(i.ID, windowID) }

// AgentWorkflowID is the workflow id of the agent workflow of a reply window's message
// (one agent workflow per message; AgentWorkflowID).
func (i Installation) AgentWorkflowID(messageKey string) string {
	return AgentWorkflowID(i.ID, messageKey)
}

// PollerID is the workflow id of an account's poller (AccountPollerID).
func (i Installation) PollerID(accountKey string) string { return AccountPollerID(i.ID, accountKey) }

// AccountPollerID is the workflow id of an account's poller in an installation: one per
// account, kept across continue-as-new and rotations.
func AccountPollerID(installationID, accountKey string) string {
	return AccountPollerIDPrefix(installationID) + accountKey
}

// AccountPollerIDPrefix starts the workflow id of every account poller of an installation.
func AccountPollerIDPrefix(installationID string) string {
	return "ilink-account/" + installationID + "/"
}

// ReplyWindowIDPrefix starts the workflow id of every reply window of an installation.
func ReplyWindowIDPrefix(installationID string) string {
	return "ilink-window/" + installationID + "/"
}

// ReplyWindowID is the workflow id of a reply window's workflow in an installation.
func ReplyWindowID(installationID string, windowID int64) string {
	return ReplyWindowIDPrefix(installationID) + strconv.FormatInt(windowID, 10)
}

// EnrollmentID is the workflow id of an enrollment. Offer ids are random, so it needs no
// installation id.
func EnrollmentID(offerID string) string { return "ilink-enrollment/" + offerID }

// AccountPoller signals and query.
const (
	// SignalRotate carries RotateSignal: poll a new generation.
	SignalRotate = "rotate"
	// SignalPause carries PauseSignal: an operator's pause.
	SignalPause = "pause"
	// SignalResume resumes a paused poller (no payload).
	SignalResume = "resume"
	// SignalStop stops the poller (StopSignal).
	SignalStop = "stop"
	// SignalPollLost carries PollLostSignal: a worker's lease supervisor found the lease of
	// the poller's poll activity expired (its worker died): the poller replaces it.
	SignalPollLost = "poll-lost"
	// QueryPollerState answers PollerState.
	QueryPollerState = "state"
)

// PollerInput starts (or continues as new) an AccountPoller. The timing fields are
// configuration so that tests stay short; zero values take the documented defaults.
type PollerInput struct {
	AccountKey string
	Generation int32
	// Carried across continue-as-new.
	Failures    int        // upstream failures in a row
	PausedUntil *time.Time // operator or stale-token pause in progress
	StaleProbe  bool       // the next poll is the probe after a stale-token pause
	Stopped     bool
	Loops       int // loops in this run (continue-as-new after MaxLoops)
	Config      PollerConfig
	// Pages and Messages are what the poller's poll sessions committed since it started
	// (PollerState), carried across continue-as-new.
	Pages    int `json:",omitempty"`
	Messages int `json:",omitempty"`
}

// PollerConfig holds the poller's durations (Duration: readable in the Temporal UI).
type PollerConfig struct {
	StalePause   Duration // pause after -14 (default 1h)
	ShortBackoff Duration // after an upstream error (default 2s)
	LongBackoff  Duration // after three failures in a row (default 30s)
	MaxLoops     int      // continue-as-new after this many loops (default 500)
	// PollSession is the workers' long-poll session (0: unknown). It bounds a poll
	// activity's run: a poll dispatched to a worker that died before it took the bot's
	// lease is retried after the session and its slack, not after 20 minutes.
	PollSession Duration `json:",omitempty"`
}

// PollSlack is what a poll activity may run past its poll session: the window starts and
// first offers of its last page, and, for a poll adopted from a dead worker in its last
// long poll, one more long poll by each adopter while workers crash one after another
// (activities.adoptOverrun): its start-to-close is the session plus this.
const PollSlack = 4 * time.Minute

// PollLostSignal names the poll activity whose lease expired by its place in the order of
// the bot's poll activities (PollInput.LeaseEpoch and its attempt).
type PollLostSignal struct {
	Epoch   int64
	Attempt int32
}

// RotateSignal moves a poller to a new generation.
type RotateSignal struct{ Generation int32 }

// PauseSignal pauses a poller until Until.
type PauseSignal struct {
	Until  time.Time
	Reason string
}

// StopSignal stops a poller.
type StopSignal struct{ Reason string }

// PollerState is the answer to QueryPollerState.
type PollerState struct {
	AccountKey  string
	Generation  int32
	Status      string // one of the Poller* statuses
	PausedUntil *time.Time
	Failures    int
	// Pages and Messages count what the poller's poll sessions committed since it
	// started (across continue-as-new), as of the last session that returned: one session
	// polls for --poll-session across many pages and reports its counts when it ends
	// (its PollResult), so a message committed by the running session counts once that
	// session returns. Heartbeat details of a poll session, where recorded, count the
	// same totals (activities.PollProgress).
	Pages    int
	Messages int
}

// Statuses of an account's poller (PollerState.Status).
const (
	PollerPolling    = "polling"
	PollerPaused     = vocab.AccountPaused
	PollerBackingOff = "backing_off"
	PollerStopping   = "stopping"
	PollerStopped    = "stopped"
)

// States of a reply window's workflow (WindowState.State): open, expired (the store's
// words), or retired (superseded or cancelled: it got the retired signal).
const (
	WindowStateOpen    = vocab.WindowOpen
	WindowStateRetired = SignalRetired
	WindowStateExpired = vocab.WindowExpired
)

// ReplyWindow update, signal and query.
const (
	// UpdateSend carries SendRequest and answers SendResult.
	UpdateSend = "send"
	// UpdateFinish carries FinishRequest and answers FinishResult: the agent's verdict on
	// the window's message (handled, or failed with a reason); it ends re-offers.
	UpdateFinish = "finish"
	// SignalRetired tells a window workflow that its window was retired (no payload).
	SignalRetired = "retired"
	// SignalAccountResumed tells a window workflow that its account is active again after
	// a pause (no payload): work the pause refused (a hand-off, a reply) is offered to
	// the agent again at once.
	SignalAccountResumed = "account-resumed"
	// QueryWindowState answers WindowState.
	QueryWindowState = "state"
)

// WindowInput starts a ReplyWindow workflow.
type WindowInput struct {
	ReplyWindowID int64
	AccountKey    string
	MessageKey    string
	// PeerID is the WeChat user the window answers (its IlinkPeer search attribute).
	PeerID    string
	ExpiresAt time.Time
	MaxSends  int32
	// Deliverable is false for a deferred message: the window only waits to expire.
	Deliverable bool
	// SendsUsed is the quota already reserved or spent when the workflow started.
	SendsUsed int32
	// FinalSlots is how many of the last sends are kept for the final answer.
	FinalSlots int32 `json:",omitempty"`
	// HeldWaiting counts the conversation's held replies the window sends first.
	HeldWaiting int32 `json:",omitempty"`
	// RemindBefore is the bot's reminder before the window ends (0: off): the window
	// keeps its last send for it and sends it then when the conversation holds replies.
	RemindBefore Duration `json:",omitempty"`
	// ReofferAfter is how long an unhandled message waits before it is handed off again
	// while its window is open (0: DefaultReofferAfter; negative: never re-offered).
	ReofferAfter Duration
	// Offered is the first hand-off when the activity that started the workflow already
	// made it (the poll does, right after its commit); nil: the workflow hands off itself.
	Offered *Offer
}

// Offer is the outcome of a hand-off made before the window's workflow started. It holds
// no secret: the session token went to the agent only.
type Offer struct {
	SessionID  string
	MessageKey string
	// Delivered is false when no handler is configured.
	Delivered bool
	// Replies and Handled are the handler's answer.
	Replies []string
	Handled bool
	// Failed: the handler failed permanently and the message was marked failed.
	Failed bool
}

// DefaultReofferAfter is the re-offer interval of an unhandled message.
const DefaultReofferAfter = 10 * time.Minute

// SendRequest is one reply through a window. RequestID makes it idempotent (default:
// the update id).
type SendRequest struct {
	Type      string // text, image, file, video
	Text      string
	RequestID string
	// SessionID is the agent session the reply is made under (the reply API sets the one
	// whose bearer token it checked); empty: the window's latest session. A reply can so
	// arrive before the window has taken in the hand-off that opened its session.
	SessionID string
	// Media names the staged media of an image, file or video reply (nil for text).
	Media *MediaRef `json:",omitempty"`
	// Final marks the agent's final answer to the message: it may use the sends the
	// window keeps for it (the last FinalSlots); any other reply stops short of them.
	Final bool `json:",omitempty"`
	// NoHold asks for the refusal instead of holding a reply the window cannot carry
	// (quota used up, the kept slots reached, the window expired).
	NoHold bool `json:",omitempty"`
}

// MediaRef names media staged in the store for a reply (store.StageMedia): its id and
// description, never its bytes, CDN reference or key.
type MediaRef struct {
	MediaID  string
	FileName string
	Size     int64
	SHA256   string
}

// SendResult is the outcome of a send.
type SendResult struct {
	AttemptID         string
	ClientMessageID   string
	Status            string // sent, failed, unknown; or held (HeldID, ErrorCode the reason)
	ProviderMessageID string
	ErrorCode         string
	RetryAfter        time.Time
	SendsLeft         int32
	// HeldID and HeldPosition name a held reply and its place among its conversation's
	// replies still to send (1: the next).
	HeldID       string `json:",omitempty"`
	HeldPosition int32  `json:",omitempty"`
}

// SendHeld is the Status of a send that was held: the window could not carry it; it is
// sent first when the user's next message opens a new window.
const SendHeld = vocab.HeldWaiting

// FinishRequest is an agent's verdict on the window's message: handled, or failed with a
// reason (at most 2048 bytes of UTF-8).
type FinishRequest struct {
	Handled bool
	Reason  string
}

// FinishResult is the message's status after a finish (handled or failed).
type FinishResult struct {
	MessageKey string
	Status     string
}

// WindowState is the answer to QueryWindowState.
type WindowState struct {
	ReplyWindowID int64
	State         string // one of the WindowState* states
	ExpiresAt     time.Time
	SendsLeft     int32
	SessionID     string
	// Offers counts the hand-offs of the message (re-offers included); Verdict is handled
	// or failed once the message is finished through the window ("" before).
	Offers  int
	Verdict string
}

// AgentWorkflowID is the workflow id of the agent workflow the "workflow" handler starts
// for a message in an installation: one per message, so a retried hand-off never starts
// a second one. Message keys derive from the bot and the provider's message id, so two
// installations polling one bot would share them: the installation id keeps their agent
// workflows apart.
func AgentWorkflowID(installationID, messageKey string) string {
	return "ilink-agent/" + installationID + "/" + messageKey
}

// AgentInput is the input of an agent workflow started by the "workflow" handler. It
// holds no bearer token (it lands in history): the agent replies through the window's
// workflow (package agent), and SessionID is the gateway-internal reference of the
// session opened for this hand-off.
type AgentInput struct {
	MessageKey    string
	AccountKey    string
	PeerID        string
	SentAt        time.Time
	Summary       string
	Attachments   []AgentAttachment
	ReplyWindowID int64
	SessionID     string
	// ExpiresAt and SendsLeft describe the window at the hand-off.
	ExpiresAt time.Time
	SendsLeft int32
	// WindowWorkflowID is the workflow id of the window's ReplyWindow workflow, where the
	// agent replies and finishes (package agent).
	WindowWorkflowID string
}

// AgentAttachment describes one attachment of the message (never its media locator).
type AgentAttachment struct {
	Kind     string // image, file, voice or video
	Position int    // the attachment's locator position (images 0.., other media 500..)
	Name     string
	Size     int64
	Text     string // a voice transcript
	// FetchPath is the reply API path that downloads the attachment with the session's
	// bearer token ("" when it has no media to download), e.g.
	// /v1/messages/<message key>/attachments/<index>.
	FetchPath string `json:",omitempty"`
}

// AttachmentPath is the reply API path of the index-th attachment (from 0) of a message.
func AttachmentPath(messageKey string, index int) string {
	return "/v1/messages/" + messageKey + "/attachments/" + strconv.Itoa(index)
}

// Enrollment signals and query.
const (
	// SignalVerifyCode carries VerifyCodeSignal.
	SignalVerifyCode = "verify_code"
	// SignalCancel cancels an enrollment (no payload).
	SignalCancel = "cancel"
	// QueryEnrollmentState answers EnrollmentState.
	QueryEnrollmentState = "state"
)

// EnrollmentInput starts an Enrollment.
type EnrollmentInput struct {
	OfferID     string
	RequestedBy string
	// Lifetime of the offer (default 5m); PollGap between QR polls (default 1s).
	Lifetime Duration
	PollGap  Duration
	// QRLifetime is how long a QR code iLink hands out stays scannable (default
	// vocab.DefaultQRLifetime, iLink's). It only sets EnrollmentState.QRExpiresAt: a code
	// is replaced when iLink answers expired, not when this passes.
	QRLifetime Duration `json:",omitempty"`
	// MaxQRRefreshes is how many times a QR code iLink reports expired is replaced by a
	// new one while the enrollment's lifetime lasts: 0 means vocab.DefaultQRRefreshes, a
	// negative number none (the first expired code ends the enrollment).
	MaxQRRefreshes int `json:",omitempty"`
}

// VerifyCodeSignal answers iLink's need_verifycode.
type VerifyCodeSignal struct{ Code string }

// EnrollmentState is the answer to QueryEnrollmentState.
type EnrollmentState struct {
	OfferID   string
	Status    string // iLink status, or done states: confirmed, expired, cancelled, failed, already_bound
	QRContent string // the URL to render as a QR code
	Host      string
	NeedsCode bool
	// WrongCodes counts the verification codes iLink refused for the current QR code (it
	// asked for a code again after one was sent): a prompt shown after a refusal says the
	// last code was wrong.
	WrongCodes int `json:",omitempty"`
	// CodeAttemptsLeft is how many verification codes the user may still try on the
	// current QR code before iLink blocks the login: vocab.MaxVerifyCodeAttempts minus
	// WrongCodes (meaningful while NeedsCode).
	CodeAttemptsLeft int
	// ExpiresAt is the enrollment's own deadline (its Lifetime after the start): the
	// enrollment ends expired then, whatever its QR code.
	ExpiresAt time.Time
	// QRExpiresAt is when the QR code shown stops being scannable: when it was fetched
	// plus EnrollmentInput.QRLifetime, never after ExpiresAt (zero before the first QR
	// code). For display: iLink's expired answer is what replaces the code.
	QRExpiresAt time.Time
	// QRSerial numbers the QR codes shown: 1 for the first, one more for each refreshed
	// one (a page reloads the image when it changes).
	QRSerial int
	// QRRefreshesLeft is how many more times a QR code iLink reports expired will be
	// replaced by a new one (EnrollmentInput.MaxQRRefreshes at the start).
	QRRefreshesLeft int
	// Set when confirmed.
	AccountKey string
	Generation int32
	Replaced   []string
	Error      string
}
