package store

import (
	"context"
	"strconv"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// retireWindows is the one place windows leave the open state (queries/windows.sql,
// RetireWindows): their pending attempts fail, their agent sessions close, their
// reservations drop to zero and their sealed context tokens are deleted, all in the
// caller's transaction. Windows no longer open are left alone. It returns the ids of the
// windows it retired.
// The reasons a message is failed with when its window ends without the agent's verdict
// and without an answer (SettleUnansweredMessages).
const (
	reasonExpiredUnanswered = "the reply window expired before the agent answered or gave a verdict"
	// reasonCancelledUnanswered takes the window's retired reason (account_disabled, ...).
	reasonCancelledUnanswered = "the reply window was cancelled (%s) before the agent answered or gave a verdict"
)

func retireWindows(ctx context.Context, q *dbq.Queries, now time.Time, windowIDs []int64, state, reason string) ([]int64, error) {
	return batchRows[int64](q.RetireWindows(ctx, []dbq.RetireWindowsParams{{
		ReplyWindowIds: windowIDs, State: state, Reason: reason, Now: now,
	}}))
}

// openContextToken opens the sealed context token of a window.
func (s *Store) openContextToken(w dbq.ReplyWindow, sec dbq.ReplyWindowSecret) (sealing.Secret, error) {
	token, err := s.keys.Open(sealing.PurposeContextToken, contextTokenBinding(w.SourceMessageKey),
		sealing.Sealed{KeyGeneration: sec.KeyGeneration, Nonce: sec.Nonce, Ciphertext: sec.Ciphertext})
	if err != nil {
		return sealing.Secret{}, &Error{Code: vocab.CodeInternal, Msg: "open context token", Err: err}
	}
	return token, nil
}

func contextTokenBinding(sourceMessageKey string) string { return sourceMessageKey }

func imageBinding(messageKey string, position int32) string {
	return messageKey + "/" + strconv.Itoa(int(position))
}

// GetWindow returns a reply window.
func (s *Store) GetWindow(ctx context.Context, windowID int64) (Window, error) {
	var out Window
	err := s.read(ctx, "get window", func(q *dbq.Queries) error {
		row, err := batchRow[dbq.ReplyWindow](q.GetReplyWindow(ctx, []int64{windowID}))
		if err != nil {
			return notFound(err, vocab.CodeReplyWindowNotFound, "unknown reply window")
		}
		out = windowFrom(row)
		return nil
	})
	return out, err
}

// WindowFilter selects windows for ListWindows.
type WindowFilter struct {
	AccountKey string // empty: every account
	State      string // empty: every state
	Limit      int32  // 0: 100
}

// ListWindows lists reply windows, newest first.
func (s *Store) ListWindows(ctx context.Context, f WindowFilter) ([]Window, error) {
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = 100
	}
	var acct, state *string
	if f.AccountKey != "" {
		acct = &f.AccountKey
	}
	if f.State != "" {
		state = &f.State
	}
	var out []Window
	err := s.read(ctx, "list windows", func(q *dbq.Queries) error {
		rows, err := q.ListReplyWindows(ctx, acct, state, f.Limit)
		for _, r := range rows {
			out = append(out, windowFrom(r))
		}
		return err
	})
	return out, err
}

// SentCounts returns how many sends of each of the windows iLink accepted (attempts
// sent): what a window actually sent, unlike its quota use (Reserved, Transmitted), which
// counts refused transmits too. A window with none is absent from the map.
func (s *Store) SentCounts(ctx context.Context, windowIDs []int64) (map[int64]int32, error) {
	out := map[int64]int32{}
	if len(windowIDs) == 0 {
		return out, nil
	}
	err := s.read(ctx, "sent counts", func(q *dbq.Queries) error {
		rows, err := q.SentCountsOfWindows(ctx, windowIDs)
		for _, r := range rows {
			out[r.ReplyWindowID] = r.Sent
		}
		return err
	})
	return out, err
}

// ExpireWindow retires an open window whose expiry has passed (the window workflow's
// timer); its message, when handed out without a verdict, is settled (handled if answered,
// failed otherwise: SettleUnansweredMessages). It is idempotent: a window already retired is returned unchanged. Expiring a
// window before its time is refused (reply_window_inactive is not the answer there:
// invalid_input says the caller's clock is wrong).
func (s *Store) ExpireWindow(ctx context.Context, now time.Time, windowID int64) (Window, error) {
	if err := validNow(now); err != nil {
		return Window{}, err
	}
	var out Window
	err := s.inTx(ctx, "expire window", func(q *dbq.Queries) error {
		row, err := lockWindow(ctx, q, windowID)
		if err != nil {
			return notFound(err, vocab.CodeReplyWindowNotFound, "unknown reply window")
		}
		if row.State == vocab.WindowOpen {
			if now.Before(row.ExpiresAt) {
				return fail(vocab.CodeInvalidInput, "reply window expires at %s, not yet", row.ExpiresAt.UTC().Format(time.RFC3339))
			}
			retired, err := retireWindows(ctx, q, now, []int64{windowID}, vocab.WindowExpired, string(vocab.CodeReplyWindowExpired))
			if err != nil {
				return err
			}
			if len(retired) != 1 {
				return fail(vocab.CodeInternal, "locked open window was not retired")
			}
			if _, err := q.SettleUnansweredMessages(ctx, reasonExpiredUnanswered, now, retired); err != nil {
				return err
			}
			if row, err = batchRow[dbq.ReplyWindow](q.GetReplyWindow(ctx, []int64{windowID})); err != nil {
				return err
			}
		}
		out = windowFrom(row)
		return nil
	})
	return out, err
}

// OpenWindowIDs lists the ids of an account's open windows (the workflows a resume tells).
func (s *Store) OpenWindowIDs(ctx context.Context, accountKey string) ([]int64, error) {
	open, err := s.ListOpenWindows(ctx, accountKey, time.Time{}, 0)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(open))
	for i, w := range open {
		ids[i] = w.ReplyWindowID
	}
	return ids, nil
}

// secondsOf is a nullable count of seconds as a duration (0 when null).
func secondsOf(s *int32) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}

// OpenedWindow is what a ReplyWindow workflow needs of an open window: CommitPage returns
// it for the window a page opens, ListOpenWindows for every open window.
type OpenedWindow struct {
	ReplyWindowID int64
	AccountKey    string
	MessageKey    string
	// PeerID is the WeChat user the window answers.
	PeerID    string
	ExpiresAt time.Time
	MaxSends  int32
	// SendsUsed counts the quota already reserved or transmitted.
	SendsUsed int32
	// FinalSlots is how many of the last sends are kept for the final answer.
	FinalSlots int32
	// HeldWaiting counts the conversation's held replies the window sends first (set by
	// CommitPage for the window it opens).
	HeldWaiting int32
	// RemindBefore is the bot's reminder before the window ends (0: off; set by
	// CommitPage for the window it opens).
	RemindBefore time.Duration
	// Deliverable: the window's message is to be handed to an agent (messageDeliverable).
	Deliverable bool
}

// messageDeliverable is the one rule for whether a window's message is handed to an
// agent: it was not deferred (backlog) and no agent has finished it yet.
func messageDeliverable(deferred bool, status string) bool {
	return !deferred && (status == vocab.MessageReceived || status == vocab.MessageProcessing)
}

// ListOpenWindows lists the open windows of an account (every account's when accountKey
// is empty), opened at or after createdSince when it is set, newest first (at most limit;
// 0: 10,000), each with what its workflow needs, in one statement.
func (s *Store) ListOpenWindows(ctx context.Context, accountKey string, createdSince time.Time, limit int32) ([]OpenedWindow, error) {
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	var acct *string
	if accountKey != "" {
		acct = &accountKey
	}
	var since *time.Time
	if !createdSince.IsZero() {
		since = &createdSince
	}
	var out []OpenedWindow
	err := s.read(ctx, "list open windows", func(q *dbq.Queries) error {
		rows, err := q.ListOpenWindows(ctx, acct, since, limit)
		for _, r := range rows {
			out = append(out, OpenedWindow{ReplyWindowID: r.ReplyWindowID, AccountKey: r.AccountKey,
				MessageKey: r.SourceMessageKey, PeerID: r.PeerID, ExpiresAt: r.ExpiresAt, MaxSends: r.MaxSends, SendsUsed: r.SendsUsed,
				FinalSlots: s.limits.FinalSlots, HeldWaiting: r.HeldWaiting, RemindBefore: secondsOf(r.ReminderBeforeSeconds), Deliverable: messageDeliverable(r.Deferred, r.MessageStatus)})
		}
		return err
	})
	return out, err
}
