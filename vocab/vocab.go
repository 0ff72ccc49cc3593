// Package vocab is ilinkflow's vocabulary and its limits: the stable codes a failure
// carries, the statuses of accounts, messages, windows and send attempts, the outcomes of
// a send, and the bounds and defaults every layer checks against. It imports no database,
// network or Temporal package, so that the store, the workflows, the reply API, the
// metrics and the command line share one definition of each word and each number.
package vocab

import "time"

// Code is the stable identifier of a failure (docs/architecture.md#failure-codes).
// Callers branch on it; the message beside it is for people.
type Code string

// The codes a store operation (and so a reply, a hand-off or an operator action) can fail
// with.
const (
	CodeInvalidInput        Code = "invalid_input"
	CodeAccountExists       Code = "account_exists"
	CodeOwnerConflict       Code = "owner_conflict"
	CodeAccountNotFound     Code = "account_not_found"
	CodeAccountNotActive    Code = "account_not_active"
	CodeAccountLimitReached Code = "account_limit_reached"
	CodeGenerationConflict  Code = "generation_conflict"
	CodePairMismatch        Code = "pair_mismatch"
	CodeCursorConflict      Code = "cursor_conflict"
	CodeDedupeInvariant     Code = "dedupe_invariant"
	CodeReplyWindowNotFound Code = "reply_window_not_found"
	CodeReplyWindowInactive Code = "reply_window_inactive"
	CodeReplyWindowExpired  Code = "reply_window_expired"
	CodeReplyQuotaExhausted Code = "reply_quota_exhausted"
	CodeSendInProgress      Code = "send_in_progress"
	CodeAttemptConflict     Code = "attempt_conflict"
	CodeInvalidAgentSession Code = "invalid_agent_session"
	CodeUnavailable         Code = "store_unavailable"
	CodeInternal            Code = "internal"
	// CodeAttachmentNotFound: the message has no downloadable attachment at that index.
	CodeAttachmentNotFound Code = "attachment_not_found"
	// CodeWrongMessage: the session was opened for another message.
	CodeWrongMessage Code = "wrong_message"
	// CodeMediaNotFound: staged outbound media is unknown, expired or not the window's.
	CodeMediaNotFound Code = "media_not_found"
	// CodeSealedUnreadable: a sealed secret (an account's bot token) does not open with the
	// configured sealing keys: the key generation that sealed it is missing from them, or
	// they hold another key under that generation. Retrying cannot help; adding the key can.
	CodeSealedUnreadable Code = "sealed_unreadable"
	// CodeMCPAgentNotFound: no MCP agent has that name.
	CodeMCPAgentNotFound Code = "mcp_agent_not_found"
	// CodeMCPAgentExists: an MCP agent of that name exists already.
	CodeMCPAgentExists Code = "mcp_agent_exists"
	// CodeILinkClientNotFound: no iLink client has that name.
	CodeILinkClientNotFound Code = "ilink_client_not_found"
	// CodeILinkClientExists: an iLink client of that name exists already.
	CodeILinkClientExists Code = "ilink_client_exists"
	// CodeILinkLoginNotFound: no QR login waits under that code (unknown, expired or
	// approved already).
	CodeILinkLoginNotFound Code = "ilink_login_not_found"
	// CodeReplySlotsReserved: the window's sends left are kept for the final answer
	// (FinalSlots); a reply not marked final may not use them.
	CodeReplySlotsReserved Code = "reply_slots_reserved"
	// CodeHeldLimitReached: holding the reply would pass the conversation's limits of
	// held replies (count or bytes).
	CodeHeldLimitReached Code = "held_limit_reached"
	// CodeHeldReplyNotFound: no held reply of that id belongs to the account.
	CodeHeldReplyNotFound Code = "held_reply_not_found"
	// CodeReplyNotHoldable: the reply cannot be held: its window can carry it now, or the
	// window was retired by a newer message (answer that one).
	CodeReplyNotHoldable Code = "reply_not_holdable"
	// CodeHeldReplyExpired: the held reply passed its age limit and was dropped, unsent.
	CodeHeldReplyExpired Code = "held_reply_expired"
	// CodePeerNotFound: the WeChat user to erase (starter forget) has no message, bot or
	// quarantined page on the accounts asked about.
	CodePeerNotFound Code = "peer_not_found"
)

// Account statuses.
const (
	AccountActive       = "active"
	AccountPaused       = "paused"
	AccountNeedsRelogin = "needs_relogin"
	AccountReplaced     = "replaced"
	AccountDisabled     = "disabled"
)

// AccountStatuses lists every account status, in the order an operator reads them.
var AccountStatuses = []string{AccountActive, AccountPaused, AccountNeedsRelogin, AccountReplaced, AccountDisabled}

// Inbound message statuses. Handled means answered: an accepted send or an agent's
// explicit verdict, never a hand-off alone.
const (
	MessageReceived   = "received"
	MessageProcessing = "processing"
	MessageHandled    = "handled"
	MessageFailed     = "failed"
	MessageAbsorbed   = "absorbed"
	// MessageHeld: the agent answered, but its answer is held until the user writes
	// again (handled once it is sent, failed if it is dropped).
	MessageHeld = "held"
)

// Held reply statuses: held until a new window carries it (sending), then settled as its
// attempt is (sent, unknown, failed), or dropped unsent (age limit, operator).
const (
	HeldWaiting = "held"
	HeldSending = "sending"
	HeldSent    = "sent"
	HeldUnknown = "unknown"
	HeldFailed  = "failed"
	HeldDropped = "dropped"
)

// HeldStatuses lists every held reply status.
var HeldStatuses = []string{HeldWaiting, HeldSending, HeldSent, HeldUnknown, HeldFailed, HeldDropped}

// SendCap is the one rule of how many sends of a window of maxSends a reply may use: a
// final answer may use all of them; any other reply stops finalSlots short, so the last
// sends are kept for the final answer (finalSlots is clamped to leave one send usable).
func SendCap(maxSends, finalSlots int32, final bool) int32 {
	if final || finalSlots <= 0 {
		return maxSends
	}
	if finalSlots >= maxSends {
		finalSlots = maxSends - 1
	}
	return maxSends - finalSlots
}

// QuotaRefusal is the code refusing a reply to a window whose used sends (reserved or
// transmitted) reached its cap, or "" when the reply fits.
func QuotaRefusal(maxSends, used, finalSlots int32, final bool) Code {
	switch {
	case used >= maxSends:
		return CodeReplyQuotaExhausted
	case used >= SendCap(maxSends, finalSlots, final):
		return CodeReplySlotsReserved
	}
	return ""
}

// Reply window states.
const (
	WindowOpen       = "open"
	WindowSuperseded = "superseded"
	WindowCancelled  = "cancelled"
	WindowExpired    = "expired"
)

// WindowStates lists every reply window state.
var WindowStates = []string{WindowOpen, WindowSuperseded, WindowCancelled, WindowExpired}

// Send attempt statuses.
const (
	AttemptPending = "pending"
	AttemptSending = "sending"
	AttemptSent    = "sent"
	AttemptFailed  = "failed"
	AttemptUnknown = "unknown"
)

// Send outcomes: the error code of a send that iLink (or the bot's own guard in front of
// it) did not accept, beside the store's codes.
const (
	SendThrottled      = "throttled"       // iLink throttled the bot, or the bot's breaker is open
	SendRejected       = "rejected"        // iLink answered with an error for this send
	SendStaleToken     = "stale_token"     // the bot token is dead (-14)
	SendNotSent        = "not_sent"        // the request surely never reached iLink
	SendOutcomeUnknown = "outcome_unknown" // iLink may or may not have sent it: never retried
)

// Fail types of a failed attempt: why it failed, so that operators and agents can tell a
// refusal by our own bookkeeping from a rejection by iLink. The last three are the send
// outcomes of the same name.
const (
	FailRefused    = "refused"  // refused by our bookkeeping before any reservation
	FailReleased   = "released" // reservation given back before transmission
	FailRetired    = "retired"  // its window was retired before transmission
	FailRejected   = SendRejected
	FailThrottled  = SendThrottled
	FailStaleToken = SendStaleToken
	FailTransport  = "transport" // the request surely never reached iLink
)

// Limits of iLink as observed (undocumented upstream, so each is also configuration where
// an operator may need to follow a change) and of the data model.
const (
	// DefaultMaxSends is the reply quota of one context token.
	DefaultMaxSends = 10
	// DefaultWindowLifetime is how long a context token allows replies.
	DefaultWindowLifetime = 24 * time.Hour
	// MaxTextBytes is the most UTF-8 text one iLink text item carries (the default of the
	// store's and the reply API's text limit).
	MaxTextBytes = 16 << 10
	// MaxReasonBytes bounds the reason of a failed verdict (UTF-8 bytes).
	MaxReasonBytes = 2048
	// MaxErrorMessageBytes bounds the error message a failed send attempt keeps.
	MaxErrorMessageBytes = 2048
	// DefaultMaxMergedSummaryBytes caps the summary of a message that absorbed a backlog.
	DefaultMaxMergedSummaryBytes = 16 << 10
	// DefaultMaxClockSkew is how far in the future an inbound sent-at may lie.
	DefaultMaxClockSkew = 5 * time.Minute
	// DefaultFinalSlots is how many of a window's last sends are kept for the final answer.
	DefaultFinalSlots = 1
	// DefaultMaxHeldReplies, DefaultMaxHeldBytes and DefaultMaxHeldAge are the limits of
	// one conversation's held replies: how many, how many bytes of content, how long.
	DefaultMaxHeldReplies = 20
	DefaultMaxHeldBytes   = 160 << 10
	DefaultMaxHeldAge     = 7 * 24 * time.Hour
	// MaxReminderBytes bounds a bot's reminder text (UTF-8 bytes).
	MaxReminderBytes = 1 << 11
	// MediaPositionBase is the first locator position of an inbound file, voice or video
	// attachment: images keep positions 0..MediaPositionBase-1 among a message's sealed
	// locators, and a merge only ever moves images.
	MediaPositionBase = 500
)

// Pacing of a bot's sends and pauses, with their defaults.
const (
	// DefaultSendGap is the least time between two sends of one bot.
	DefaultSendGap = 2 * time.Second
	// DefaultThrottlePenalty is how long a bot's sends stop after an unexplained ret -2.
	DefaultThrottlePenalty = 60 * time.Minute
	// DefaultStalePause is how long an account pauses after a stale bot token (-14)
	// before one probe.
	DefaultStalePause = time.Hour
)

// Enrollment (QR login) statuses, as an enrollment's state reports them: iLink's QR
// statuses while it runs (named as iLink spells them; package ilink mirrors the protocol),
// then one of the final ones.
const (
	EnrollmentStarting       = "starting"            // before the QR code is fetched
	EnrollmentWaiting        = "wait"                // QR shown, not scanned
	EnrollmentScanned        = "scaned"              // scanned, not confirmed
	EnrollmentNeedsCode      = "need_verifycode"     // iLink asks for the verification code
	EnrollmentRedirect       = "scaned_but_redirect" // poll again at another host
	EnrollmentBindedRedirect = "binded_redirect"     // iLink: the bot is already bound here
	EnrollmentConfirmed      = "confirmed"           // final: the account is enrolled
	EnrollmentExpired        = "expired"             // final: the QR code or the offer expired
	EnrollmentCancelled      = "cancelled"           // final: cancelled by the operator
	EnrollmentBlocked        = "verify_code_blocked" // final: too many wrong codes
	EnrollmentAlreadyBound   = "already_bound"       // final: nothing to enroll
	EnrollmentFailed         = "failed"              // final: an error ended it
)

// Enrollment (QR login) limits. The first and the last are iLink's; the refreshes follow
// the official WeChat plugin.
const (
	// DefaultQRLifetime is how long a QR code iLink hands out stays scannable.
	DefaultQRLifetime = 2 * time.Minute
	// DefaultQRRefreshes is how many times an enrollment replaces a QR code iLink reports
	// expired with a new one, while its own lifetime lasts.
	DefaultQRRefreshes = 3
	// MaxVerifyCodeAttempts is how many verification codes iLink takes for one QR code:
	// the first and second wrong codes are asked again, the third is verify_code_blocked.
	MaxVerifyCodeAttempts = 3
)

// DefaultDatabaseURL is the database used when DATABASE_URL is unset: the local server's
// test database, for a first run and the tests.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Content is what one send transmits: exactly one iLink item.
type Content struct {
	// Type is text, image, file or video.
	Type string `json:"type"`
	// Text is the text of a text item.
	Text string `json:"text,omitempty"`
	// Media references uploaded media for image, file and video items.
	Media *MediaRef `json:"media,omitempty"`
}

// MediaRef references media staged for a reply (StageMedia): never its bytes, CDN
// reference or key, which stay sealed in the store.
type MediaRef struct {
	// MediaID is the staged media's id.
	MediaID string `json:"media_id"`
	// FileName names a file item.
	FileName string `json:"file_name,omitempty"`
	// Size is the plaintext size; SHA256 its SHA-256 in lower-case hex.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}
