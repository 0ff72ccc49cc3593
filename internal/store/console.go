package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The operator's console: what the web UI's accounts table and a bot's conversations page
// read. Every read here leaves a message's and a reply's text in the database but
// MessageText, which the console calls when the operator asks to reveal one message.

// AccountActivity is one bot's recent activity as the accounts table shows it.
type AccountActivity struct {
	AccountKey string
	// Messages counts the inbound messages received since the time asked for (absorbed
	// ones too: each is a message the user wrote); Replies the send attempts iLink accepted
	// since then (the agent's replies, held replies and reminders).
	Messages int32
	Replies  int32
	// OpenWindows counts the bot's open reply windows (one per conversation at most).
	OpenWindows int32
	// LastError is the newest error since the time asked for, or nil.
	LastError *ActivityError
}

// ActivityError is a bot's newest error: a send iLink refused or whose outcome is unknown,
// or a page the store had to quarantine. It holds codes only, never an error's text.
type ActivityError struct {
	// Kind is the failed send's fail type (rejected, throttled, stale_token, transport),
	// "unknown" for a send whose outcome is unknown, or "quarantined" for a page.
	Kind string
	// Code is the error code the send or the quarantine recorded (may be empty).
	Code string
	At   time.Time
}

// Kinds of ActivityError besides a send's fail type.
const (
	ActivityUnknownOutcome = vocab.AttemptUnknown
	ActivityQuarantined    = "quarantined"
)

// AccountActivity returns the recent activity of every account, by account key: the
// messages received and the replies sent since since, the open windows, and the newest
// error since since. It reads one range of an index per account and table (migration
// 00017), so its cost follows the traffic since since, not the tables' size.
func (s *Store) AccountActivity(ctx context.Context, since time.Time) (map[string]AccountActivity, error) {
	if err := validNow(since); err != nil {
		return nil, err
	}
	out := map[string]AccountActivity{}
	err := s.read(ctx, "account activity", func(q *dbq.Queries) error {
		rows, err := q.ConsoleAccountActivity(ctx, since)
		for _, r := range rows {
			a := AccountActivity{AccountKey: r.AccountKey, Messages: r.Messages, Replies: r.Replies, OpenWindows: r.OpenWindows}
			if r.ErrorKind != "" {
				a.LastError = &ActivityError{Kind: r.ErrorKind, Code: r.ErrorCode, At: r.ErrorAt}
			}
			out[r.AccountKey] = a
		}
		return err
	})
	return out, err
}

// ConversationMessage is an inbound message as the conversations page lists it: its
// identity and state, never its text.
type ConversationMessage struct {
	MessageKey        string
	InboxSeq          int64
	PeerID            string
	ProviderMessageID string
	// SentAt is when the user sent it (iLink's time), ReceivedAt when the store took it.
	SentAt     time.Time
	ReceivedAt time.Time
	UpdatedAt  time.Time
	// Status is received, processing, handled, failed, absorbed or held.
	Status        string
	Deferred      bool
	FailureReason string
}

// ConversationReply is a send attempt as the conversations page lists it: its outcome,
// never its content.
type ConversationReply struct {
	AttemptID        string
	SourceMessageKey string
	PeerID           string
	ReplyWindowID    int64
	SendIndex        int32
	// Source is agent, system (a reminder) or held (a held reply sent in a later window).
	Source      string
	ContentType string
	// Status is pending, sending, sent, failed or unknown; a failed one has its FailType
	// and ErrorCode.
	Status    string
	ErrorCode string
	FailType  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Conversations is what one bot's conversations page shows, newest first in each list.
type Conversations struct {
	// Messages are the bot's latest inbound messages.
	Messages []ConversationMessage
	// Windows are the bot's open windows and the windows of Messages.
	Windows []Window
	// Replies are the bot's latest send attempts.
	Replies []ConversationReply
	// Held are the bot's latest held replies, whatever their status.
	Held []HeldReply
}

// Bounds of the limit of Conversations.
const (
	DefaultConversationRows = 100
	MaxConversationRows     = 500
)

// Conversations returns one bot's latest inbound messages, send attempts and held replies
// (at most limit of each; 0: DefaultConversationRows, at most MaxConversationRows), its
// open windows and the windows of those messages: their states and outcomes, never a
// message's or a reply's text. An unknown account is account_not_found.
func (s *Store) Conversations(ctx context.Context, accountKey string, limit int32) (Conversations, error) {
	if err := validAccountKey(accountKey); err != nil {
		return Conversations{}, err
	}
	if limit <= 0 {
		limit = DefaultConversationRows
	}
	limit = min(limit, MaxConversationRows)
	var out Conversations
	err := s.read(ctx, "conversations", func(q *dbq.Queries) error {
		if _, err := q.GetAccount(ctx, accountKey); err != nil {
			return notFound(err, vocab.CodeAccountNotFound, "unknown account")
		}
		msgs, err := q.ConsoleMessages(ctx, accountKey, limit)
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(msgs))
		for _, m := range msgs {
			keys = append(keys, m.MessageKey)
			out.Messages = append(out.Messages, ConversationMessage{MessageKey: m.MessageKey, InboxSeq: m.InboxSeq,
				PeerID: m.PeerID, ProviderMessageID: m.ProviderMessageID, SentAt: m.SentAt, ReceivedAt: m.CreatedAt,
				UpdatedAt: m.UpdatedAt, Status: m.Status, Deferred: m.Deferred, FailureReason: m.FailureReason})
		}
		windows, err := q.ConsoleWindows(ctx, accountKey, keys)
		if err != nil {
			return err
		}
		for _, w := range windows {
			out.Windows = append(out.Windows, windowFrom(w))
		}
		attempts, err := q.ConsoleAttempts(ctx, accountKey, limit)
		if err != nil {
			return err
		}
		for _, a := range attempts {
			out.Replies = append(out.Replies, ConversationReply{AttemptID: a.AttemptID, SourceMessageKey: a.SourceMessageKey,
				PeerID: a.PeerID, ReplyWindowID: a.ReplyWindowID, SendIndex: a.SendIndex, Source: a.Source,
				ContentType: a.ContentType, Status: a.Status, ErrorCode: a.ErrorCode, FailType: a.FailType,
				CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt})
		}
		return nil
	})
	if err != nil {
		return Conversations{}, err
	}
	if out.Held, err = s.ListHeldReplies(ctx, HeldFilter{AccountKey: accountKey, Limit: limit}); err != nil {
		return Conversations{}, err
	}
	return out, nil
}

// MessageContent is one message's content as the console reveals it.
type MessageContent struct {
	// Payload is the text as the message's agent was handed it (its summary and attachment
	// descriptors); nil when the message was absorbed into a later one, which holds its
	// text, or when its content was erased.
	Payload *Payload
	// Erased: the content was erased (ForgetPeer), not absorbed.
	Erased bool
}

// MessageText returns the content of one of a bot's inbound messages. found is false when
// the bot has no message of that key (another bot's message is not found either). It is
// the one read of a message's text for the operator's console: the caller audits it, and
// neither the store nor the caller logs the text.
func (s *Store) MessageText(ctx context.Context, accountKey, messageKey string) (content MessageContent, found bool, err error) {
	if err := validAccountKey(accountKey); err != nil {
		return MessageContent{}, false, err
	}
	if err := validMessageKey(messageKey); err != nil {
		return MessageContent{}, false, err
	}
	err = s.read(ctx, "message text", func(q *dbq.Queries) error {
		row, err := q.ConsoleMessageText(ctx, accountKey, messageKey)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		content.Erased = row.ErasedAt != nil
		content.Payload, err = payloadFrom(messageKey, row.Payload)
		return err
	})
	if err != nil {
		return MessageContent{}, false, err
	}
	return content, found, nil
}
