package store

import (
	"encoding/json"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
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
	// RemindBefore and ReminderText are the bot's reminder before a window closes (0:
	// off; see SetReminder).
	RemindBefore time.Duration
	ReminderText string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func accountFrom(r dbq.Account) Account {
	a := Account{
		AccountKey: r.AccountKey, ProviderAccountID: r.ProviderAccountID, OwnerPeerID: r.OwnerPeerID,
		BaseURL: r.BaseUrl, Generation: r.Generation, Status: r.Status, StatusReason: r.StatusReason,
		PauseUntil: r.PauseUntil, LastPollAt: r.LastPollAt, Cursor: r.Cursor, CursorUpdatedAt: r.CursorUpdatedAt,
		LastSendAt: r.LastSendAt, SendsBlockedUntil: r.SendsBlockedUntil,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	a.RemindBefore, a.ReminderText = reminderOf(r)
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
	if w.State != vocab.WindowOpen {
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
	p, err := payloadFrom(r.MessageKey, r.Payload)
	if err != nil {
		return Message{}, err
	}
	m.Payload = p
	return m, nil
}

// payloadFrom decodes a stored message's payload (nil when it has none: a message absorbed
// into a later one).
func payloadFrom(messageKey string, raw []byte) (*Payload, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var p Payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fail(vocab.CodeInternal, "stored payload of %s does not decode", messageKey)
	}
	return &p, nil
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
	Content           vocab.Content
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

// OutcomeCode is the error code an agent is answered for the attempt: its error code,
// except that an attempt failed because its window was retired before transmission
// (superseded by a newer message, or cancelled: the error code holds the window's
// retired reason) is reply_window_inactive, as a send refused for a retired window is;
// one retired by the window's expiry keeps reply_window_expired.
func (a Attempt) OutcomeCode() string {
	if a.Status == vocab.AttemptFailed && a.FailType == vocab.FailRetired && a.ErrorCode != string(vocab.CodeReplyWindowExpired) {
		return string(vocab.CodeReplyWindowInactive)
	}
	return a.ErrorCode
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
		return Attempt{}, fail(vocab.CodeInternal, "stored payload of attempt %s does not decode", r.AttemptID)
	}
	return a, nil
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
