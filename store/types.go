package store

import (
	"encoding/json"
	"time"

	"github.com/ilinkflow/ilinkflow/db/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// Account statuses.
const (
	AccountActive       = "active"
	AccountPaused       = "paused"
	AccountNeedsRelogin = "needs_relogin"
	AccountReplaced     = "replaced"
	AccountDisabled     = "disabled"
)

// Inbound message statuses.
const (
	MessageReceived   = "received"
	MessageProcessing = "processing"
	MessageHandled    = "handled"
	MessageFailed     = "failed"
	MessageAbsorbed   = "absorbed"
)

// Reply window states.
const (
	WindowOpen       = "open"
	WindowSuperseded = "superseded"
	WindowCancelled  = "cancelled"
	WindowExpired    = "expired"
)

// Send attempt statuses.
const (
	AttemptPending = "pending"
	AttemptSending = "sending"
	AttemptSent    = "sent"
	AttemptFailed  = "failed"
	AttemptUnknown = "unknown"
)

// Fail types of a failed attempt: why it failed, so that operators and agents can tell a
// refusal by our own bookkeeping from a rejection by iLink.
const (
	FailRefused    = "refused"     // refused by our bookkeeping before any reservation
	FailReleased   = "released"    // reservation given back before transmission
	FailRetired    = "retired"     // its window was retired before transmission
	FailRejected   = "rejected"    // iLink answered with an error for this send
	FailThrottled  = "throttled"   // iLink throttled the bot
	FailStaleToken = "stale_token" // the bot token is dead (-14)
	FailTransport  = "transport"   // the request surely never reached iLink
)

// Account is a bot account as stored.
type Account struct {
	AccountKey        string
	ProviderAccountID string
	OwnerPeerID       string
	BaseURL           string
	Generation        int32
	Status            string
	StatusReason      string
	PauseUntil        *time.Time
	LastPollAt        *time.Time
	Cursor            string
	CursorUpdatedAt   *time.Time
	ReplacedBy        string
	// LastSendAt is when the bot last started a send (pacing); SendsBlockedUntil is the
	// end of a throttle penalty (the circuit breaker).
	LastSendAt        *time.Time
	SendsBlockedUntil *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func accountFrom(r dbq.Account) Account {
	a := Account{
		AccountKey: r.AccountKey, ProviderAccountID: r.ProviderAccountID, OwnerPeerID: r.OwnerPeerID,
		BaseURL: r.BaseUrl, Generation: r.Generation, Status: r.Status, StatusReason: r.StatusReason,
		PauseUntil: r.PauseUntil, LastPollAt: r.LastPollAt, Cursor: r.Cursor, CursorUpdatedAt: r.CursorUpdatedAt,
		LastSendAt: r.LastSendAt, SendsBlockedUntil: r.SendsBlockedUntil,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ReplacedBy != nil {
		a.ReplacedBy = *r.ReplacedBy
	}
	return a
}

// AccountWithSecret is an account with its opened bot token.
type AccountWithSecret struct {
	Account
	BotToken sealing.Secret
}

// Window is a reply window as stored.
type Window struct {
	ReplyWindowID     int64
	AccountKey        string
	PeerID            string
	AccountGeneration int32
	SourceMessageKey  string
	SourceInboxSeq    int64
	ProviderMessageID string
	ProviderSeq       *int64
	IssuedAt          time.Time
	ExpiresAt         time.Time
	MaxSends          int32
	NextSendIndex     int32
	Reserved          int32
	Transmitted       int32
	State             string
	RetiredReason     string
	UpdatedAt         time.Time
}

// SendsLeft is the quota the window still grants.
func (w Window) SendsLeft() int32 {
	if w.State != WindowOpen {
		return 0
	}
	return w.MaxSends - w.Reserved - w.Transmitted
}

func windowFrom(r dbq.ReplyWindow) Window {
	return Window{
		ReplyWindowID: r.ReplyWindowID, AccountKey: r.AccountKey, PeerID: r.PeerID,
		AccountGeneration: r.AccountGeneration, SourceMessageKey: r.SourceMessageKey,
		SourceInboxSeq: r.SourceInboxSeq, ProviderMessageID: r.ProviderMessageID, ProviderSeq: r.ProviderSeq,
		IssuedAt: r.IssuedAt, ExpiresAt: r.ExpiresAt, MaxSends: r.MaxSends, NextSendIndex: r.NextSendIndex,
		Reserved: r.Reserved, Transmitted: r.Transmitted, State: r.State, RetiredReason: r.RetiredReason,
		UpdatedAt: r.UpdatedAt,
	}
}

// Message is an inbound message as stored.
type Message struct {
	MessageKey        string
	InboxSeq          int64
	AccountKey        string
	PeerID            string
	ProviderMessageID string
	SentAt            time.Time
	Status            string
	Deferred          bool
	// Payload is nil once the message was absorbed into a later one.
	Payload       *Payload
	FailureReason string
}

func messageFrom(r dbq.InboundMessage) (Message, error) {
	m := Message{
		MessageKey: r.MessageKey, InboxSeq: r.InboxSeq, AccountKey: r.AccountKey, PeerID: r.PeerID,
		ProviderMessageID: r.ProviderMessageID, SentAt: r.SentAt, Status: r.Status, Deferred: r.Deferred,
		FailureReason: r.FailureReason,
	}
	if len(r.Payload) > 0 {
		var p Payload
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			return Message{}, fail(CodeInternal, "stored payload of %s does not decode", r.MessageKey)
		}
		m.Payload = &p
	}
	return m, nil
}

// Payload is the content of an inbound message the agent sees: a text summary and
// attachment descriptors (never secrets: image locators are sealed in their own rows).
type Payload struct {
	Summary     string       `json:"summary"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Merged counts the messages whose text a merged summary holds (0: not merged);
	// Body is that text without the gateway's notes, for a later merge.
	Merged int    `json:"merged,omitempty"`
	Body   string `json:"body,omitempty"`
	// Omitted counts earlier messages whose text a capped merge left out.
	Omitted int `json:"omitted,omitempty"`
	// ImagesInvolved counts the images merged into this message, kept or not.
	ImagesInvolved int `json:"images_involved,omitempty"`
}

// Attachment describes one attachment of an inbound message.
type Attachment struct {
	// Kind is image, file, voice or video.
	Kind string `json:"kind"`
	// Position is the image's position among the message's sealed image locators
	// (images only).
	Position int    `json:"position,omitempty"`
	Name     string `json:"name,omitempty"`
	Size     int64  `json:"size,omitempty"`
	// Text is a voice transcript.
	Text string `json:"text,omitempty"`
}

// Attempt is a send attempt as stored.
type Attempt struct {
	AttemptID         string
	ClientMessageID   string
	SourceMessageKey  string
	AccountKey        string
	PeerID            string
	ReplyWindowID     int64
	SendIndex         int32
	WindowSendIndex   int32
	Source            string
	Content           Content
	Metadata          json.RawMessage
	Fingerprint       string
	Status            string
	ProviderMessageID string
	ErrorCode         string
	ErrorMessage      string
	FailType          string
	RequestID         string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func attemptFrom(r dbq.SendAttempt) (Attempt, error) {
	a := Attempt{
		AttemptID: r.AttemptID, ClientMessageID: r.ClientMessageID, SourceMessageKey: r.SourceMessageKey,
		AccountKey: r.AccountKey, PeerID: r.PeerID, ReplyWindowID: r.ReplyWindowID, SendIndex: r.SendIndex,
		WindowSendIndex: r.WindowSendIndex, Source: r.Source, Metadata: r.Metadata, Fingerprint: r.Fingerprint,
		Status: r.Status, ProviderMessageID: r.ProviderMessageID, ErrorCode: r.ErrorCode,
		ErrorMessage: r.ErrorMessage, FailType: r.FailType, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.RequestID != nil {
		a.RequestID = *r.RequestID
	}
	if err := json.Unmarshal(r.Payload, &a.Content); err != nil {
		return Attempt{}, fail(CodeInternal, "stored payload of attempt %s does not decode", r.AttemptID)
	}
	return a, nil
}

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

// Session is an agent session: the capability an agent uses to reply to one message.
type Session struct {
	SessionID        string
	SourceMessageKey string
	ReplyWindowID    int64
	AccountKey       string
	PeerID           string
	CreatedAt        time.Time
	ExpiresAt        time.Time
}
