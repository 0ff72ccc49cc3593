package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// reminderRequestID is the request id of a window's reminder: one per message, so that
// it never goes out twice.
const reminderRequestID = "reminder"

// reminderOf is an account's reminder (0 and "": off).
func reminderOf(a dbq.Account) (time.Duration, string) {
	if a.ReminderBeforeSeconds == nil || a.ReminderText == nil {
		return 0, ""
	}
	return time.Duration(*a.ReminderBeforeSeconds) * time.Second, *a.ReminderText
}

// SetReminder turns a bot's reminder before a window closes on (before > 0, with text)
// or off (before 0, text ""): when a conversation has held replies, the gateway sends
// text once, before ahead of the window's end, inviting the user to write again; while it
// is on, every window keeps its last send for it. before must be shorter than the
// window's lifetime (Limits.WindowLifetime) and whole seconds; text passes the rule for
// outbound text. An unknown account is account_not_found; bad input is invalid_input,
// with nothing written.
func (s *Store) SetReminder(ctx context.Context, now time.Time, accountKey string, before time.Duration, text string) (Account, error) {
	if err := validNow(now); err != nil {
		return Account{}, err
	}
	var secs *int32
	var txt *string
	switch {
	case before == 0 && text == "":
	case before < time.Second || before%time.Second != 0 || before >= s.limits.WindowLifetime:
		return Account{}, fail(vocab.CodeInvalidInput, "the reminder goes whole seconds before the window ends, less than its lifetime of %s", s.limits.WindowLifetime)
	case vocab.CheckText(text, vocab.MaxReminderBytes) != vocab.TextOK:
		return Account{}, fail(vocab.CodeInvalidInput, "reminder text: %s",
			vocab.CheckText(text, vocab.MaxReminderBytes).Describe(len(text), vocab.MaxReminderBytes))
	default:
		n := int32(before / time.Second)
		secs, txt = &n, &text
	}
	var out Account
	err := s.inTx(ctx, "set reminder", func(q *dbq.Queries) error {
		a, err := q.SetReminder(ctx, dbq.SetReminderParams{BeforeSeconds: secs, ReminderText: txt, Now: now, AccountKey: accountKey})
		if err != nil {
			return notFound(err, vocab.CodeAccountNotFound, "unknown account")
		}
		out = accountFrom(a)
		return nil
	})
	return out, err
}

// Reasons a window's reminder is not sent (StartReminder).
const (
	ReminderOff       = "off"
	ReminderNotNeeded = "no_held_replies"
	ReminderSent      = "already_sent"
	ReminderClosed    = "window_closed"
)

// ReminderStart is the outcome of StartReminder: the reminder's send prepared (as
// ReserveAndStart's, started or waiting for its turn), or why none is sent (Skipped).
type ReminderStart struct {
	PreparedSend
	Skipped string
}

// StartReminder prepares a window's reminder: under the locks of the account and the
// window it sends nothing (Skipped) when the window is no longer open (the user wrote
// again, or it ended), the bot's reminder is off, the conversation holds no reply and no
// agent asked for the reminder (RequestReminder), or the
// message already had its reminder (one per message: never twice); otherwise, when the
// bot's pacing and the peer's send in flight allow, it reserves and starts the reminder
// (a system send, request id "reminder") in the send kept for it. A reminder attempt
// found sending (a retry after a crash) is returned as it is.
func (s *Store) StartReminder(ctx context.Context, now time.Time, windowID int64, pacing SendPacing) (ReminderStart, error) {
	if err := validNow(now); err != nil {
		return ReminderStart{}, err
	}
	var out ReminderStart
	err := s.inTx(ctx, "start reminder", func(q *dbq.Queries) error {
		a, w, err := lockAccountAndWindow(ctx, q, windowID)
		if err != nil {
			return err
		}
		out.Window = windowFrom(w)
		prior, err := q.ReminderAttempt(ctx, w.SourceMessageKey)
		switch {
		case err == nil:
			out.Attempt, err = attemptFrom(prior)
			if prior.Status != vocab.AttemptSending {
				out.Skipped = ReminderSent
			}
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		before, text := reminderOf(a)
		switch {
		case w.State != vocab.WindowOpen || !now.Before(w.ExpiresAt):
			out.Skipped = ReminderClosed
			return nil
		case before == 0:
			out.Skipped = ReminderOff
			return nil
		}
		held, err := batchRow[int32](q.CountWaitingHeld(ctx, []dbq.CountWaitingHeldParams{{AccountKey: w.AccountKey, PeerID: w.PeerID}}))
		if err != nil {
			return err
		}
		if held == 0 && !w.ReminderRequested {
			out.Skipped = ReminderNotNeeded
			return nil
		}
		if err := checkWindowUsable(now, w, a); err != nil {
			return err
		}
		if err := rules.CheckGatewayQuota(ruleWindow(w)); err != nil {
			return ruled(err)
		}
		pc, err := s.validateContent(vocab.Content{Type: "text", Text: text}, map[string]any{"reminder": true})
		if err != nil {
			return err
		}
		g := gatewaySend{source: "system", contentType: "text", fingerprint: pc.fingerprint,
			requestID: func(int32) string { return reminderRequestID },
			content:   func() ([]byte, []byte, error) { return pc.payload, pc.metadata, nil }}
		_, err = s.startGatewaySend(ctx, q, now, w, a, g, pacing, &out.PreparedSend)
		return err
	})
	return out, err
}

// RequestReminder records an agent's ask for its window's reminder (POST /v1/remind): the
// bot's reminder then goes before the window ends even when the conversation holds no
// reply. The session must be live (every session and window rule); a bot whose reminder
// is off is invalid_input, nothing written. It returns the window and when the reminder
// is due.
func (s *Store) RequestReminder(ctx context.Context, now time.Time, ref SessionRef) (Window, time.Time, error) {
	if err := validNow(now); err != nil {
		return Window{}, time.Time{}, err
	}
	var out Window
	var due time.Time
	err := s.inTx(ctx, "request reminder", func(q *dbq.Queries) error {
		row, err := findSession(ctx, q, ref)
		if err != nil {
			return err
		}
		w, a, err := queueSessionLocks(ctx, q, row).check(now)
		if err != nil {
			return err
		}
		before, _ := reminderOf(a)
		if before == 0 {
			return fail(vocab.CodeInvalidInput, "the bot's reminder is off (starter reminder turns it on)")
		}
		if w, err = q.RequestReminder(ctx, now, w.ReplyWindowID); err != nil {
			return notFound(err, vocab.CodeReplyWindowInactive, "reply window is no longer open")
		}
		out, due = windowFrom(w), w.ExpiresAt.Add(-before)
		return nil
	})
	return out, due, err
}
