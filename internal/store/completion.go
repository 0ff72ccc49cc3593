package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Completion is the outcome of a transmission.
type Completion struct {
	AttemptID string
	// Status is sent, failed or unknown (the request may have reached iLink but no
	// answer came back: never re-sent automatically).
	Status            string
	ProviderMessageID string
	ErrorCode         string
	ErrorMessage      string
	// FailType is required for failed: rejected, throttled, stale_token or transport
	// (transport: the request surely never left, so the quota is given back).
	FailType string
}

// SendOutcome is a completed attempt with its window as the completion left it.
type SendOutcome struct {
	Attempt Attempt
	Window  Window
}

// CompleteSend moves a sending attempt to sent, failed or unknown, and returns it with its
// window (its sends left) read in the same transaction. Completing again with the same
// outcome returns the attempt unchanged (activity retries).
func (s *Store) CompleteSend(ctx context.Context, now time.Time, c Completion) (traced SendOutcome, tracedErr error) {
	ctx, span := startSpan(ctx, "CompleteSend", "")
	defer func() { endSpan(span, tracedErr, traced.Attempt.AccountKey, traced.Attempt.SourceMessageKey) }()
	if err := validNow(now); err != nil {
		return SendOutcome{}, err
	}
	outcome := rules.Completion{Status: c.Status, ProviderMessageID: c.ProviderMessageID, FailType: c.FailType}
	if err := rules.CheckCompletion(outcome); err != nil {
		return SendOutcome{}, ruled(err)
	}
	givesBack := rules.GivesSendBack(outcome)
	if len(c.ProviderMessageID) > maxProviderIDBytes || len(c.ErrorCode) > 128 || len(c.ErrorMessage) > vocab.MaxErrorMessageBytes {
		return SendOutcome{}, fail(vocab.CodeInvalidInput, "completion fields are too long")
	}
	arg := dbq.CompleteSendingAttemptParams{AttemptID: c.AttemptID, Status: c.Status, ProviderMessageID: c.ProviderMessageID,
		ErrorCode: c.ErrorCode, ErrorMessage: c.ErrorMessage, FailType: c.FailType, Now: now}
	if !givesBack {
		// The common case: the attempt is sending and moves on, in one statement that is a
		// transaction of its own.
		row, err := batchRow[dbq.CompleteSendingAttemptRow](dbq.New(s.pool).CompleteSendingAttempt(ctx, []dbq.CompleteSendingAttemptParams{arg}))
		if err == nil {
			out := SendOutcome{Window: windowFrom(row.ReplyWindow)}
			out.Attempt, err = attemptFrom(row.SendAttempt)
			return out, err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return SendOutcome{}, wrapDB("complete attempt", err)
		}
	}
	// A transport failure gives the send back to the quota in the same transaction; an
	// attempt that was not sending is a retry (the same outcome) or a conflict.
	var out SendOutcome
	err := s.inPipeline(ctx, "complete attempt", func(p *pipeline, q *dbq.Queries) error {
		// In one statement and one round trip when the attempt is sending and moves on,
		// its window coming back with it.
		set := q.CompleteSendingAttempt(ctx, []dbq.CompleteSendingAttemptParams{arg})
		if !givesBack {
			// Nothing is decided after the update: COMMIT travels with it (an attempt that
			// is not sending is not updated, and the retry check below only reads).
			p.commitQueued()
		}
		moved, err := batchRow[dbq.CompleteSendingAttemptRow](set)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, w := moved.SendAttempt, moved.ReplyWindow
		if errors.Is(err, pgx.ErrNoRows) {
			// Not sending: a retry of the same completion finds it done.
			window := q.WindowOfAttempt(ctx, []string{c.AttemptID})
			attempt := q.LockSendAttempt(ctx, []string{c.AttemptID})
			if w, err = batchRow[dbq.ReplyWindow](window); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
			}
			if row, err = batchRow[dbq.SendAttempt](attempt); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
			}
			done := rules.Completion{Status: row.Status, ProviderMessageID: row.ProviderMessageID, FailType: row.FailType}
			if err := rules.CheckRepeatedCompletion(done, outcome); err != nil {
				return ruled(err)
			}
		} else if givesBack {
			// The request surely never left: the send is given back to the quota.
			unstarted, err := batchRow[dbq.ReplyWindow](q.UnstartWindowSend(ctx, []dbq.UnstartWindowSendParams{{
				Now: now, ReplyWindowID: row.ReplyWindowID}}))
			switch {
			case err == nil:
				w = unstarted
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		out.Window = windowFrom(w)
		out.Attempt, err = attemptFrom(row)
		return err
	})
	return out, err
}

// Release is the outcome of ReleaseSend: the attempt and its window as they are after it.
type Release struct {
	SendOutcome
	// Released is false when the attempt was not pending (already started or ended).
	Released bool
}

// ReleaseSend gives the reservation of a pending attempt back and fails it with the
// reason; it returns the attempt and its window. Release.Released is false when the
// attempt is not pending (already started or ended): then nothing changes.
func (s *Store) ReleaseSend(ctx context.Context, now time.Time, attemptID, reason string) (traced Release, tracedErr error) {
	ctx, span := startSpan(ctx, "ReleaseSend", "")
	defer func() { endSpan(span, tracedErr, "", "") }()
	if err := validNow(now); err != nil {
		return Release{}, err
	}
	if reason == "" {
		reason = "cancelled_before_transmit"
	}
	if len(reason) > 128 {
		return Release{}, fail(vocab.CodeInvalidInput, "reason is too long")
	}
	var out Release
	err := s.inTx(ctx, "release attempt", func(q *dbq.Queries) error {
		// Lock order: window, then attempt (as retirement does).
		w, err := batchRow[dbq.ReplyWindow](q.WindowOfAttempt(ctx, []string{attemptID}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		window := q.LockReplyWindow(ctx, []int64{w.ReplyWindowID})
		locked := q.LockSendAttempt(ctx, []string{attemptID})
		if w, err = batchRow[dbq.ReplyWindow](window); err != nil {
			return err
		}
		a, err := batchRow[dbq.SendAttempt](locked)
		if err != nil {
			return err
		}
		out.Window = windowFrom(w)
		if out.Attempt, err = attemptFrom(a); err != nil || a.Status != vocab.AttemptPending {
			return err
		}
		released := q.ReleaseWindowReservations(ctx, []dbq.ReleaseWindowReservationsParams{{
			Released: 1, Now: now, ReplyWindowID: a.ReplyWindowID}})
		set := q.SetAttemptStatus(ctx, []dbq.SetAttemptStatusParams{{
			AttemptID: attemptID, FromStatus: vocab.AttemptPending, Status: vocab.AttemptFailed, ErrorCode: reason,
			ErrorMessage: "reservation released before transmission", FailType: vocab.FailReleased, Now: now,
		}})
		if w, err = batchRow[dbq.ReplyWindow](released); err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "window holds no reservation to release")
		}
		if a, err = batchRow[dbq.SendAttempt](set); err != nil {
			return err
		}
		out.Window = windowFrom(w)
		out.Attempt, err = attemptFrom(a)
		out.Released = true
		return err
	})
	return out, err
}

// PendingWindow is a window holding attempts reserved but not started.
type PendingWindow struct {
	ReplyWindowID int64
	Pending       int
	// Oldest is when the oldest of them was reserved.
	Oldest time.Time
}

// ListPendingWindows lists the windows that hold pending attempts.
func (s *Store) ListPendingWindows(ctx context.Context) ([]PendingWindow, error) {
	var out []PendingWindow
	err := s.read(ctx, "list pending windows", func(q *dbq.Queries) error {
		rows, err := q.PendingAttemptCounts(ctx)
		for _, r := range rows {
			out = append(out, PendingWindow{ReplyWindowID: r.ReplyWindowID, Pending: int(r.Pending), Oldest: r.Oldest})
		}
		return err
	})
	return out, err
}

// RecoverPendingAttemptsOf releases the pending attempts of the listed windows: those
// whose sends nobody can resume any more (a fleet recovers only what no live process
// owns). Each is failed as abandoned and its window's reservation given back; counters are
// checked, never assumed. It returns how many attempts it recovered.
func (s *Store) RecoverPendingAttemptsOf(ctx context.Context, now time.Time, windowIDs []int64) (int, error) {
	only := make(map[int64]bool, len(windowIDs))
	for _, id := range windowIDs {
		only[id] = true
	}
	if len(only) == 0 {
		return 0, validNow(now)
	}
	return s.recoverPending(ctx, now, only)
}

// recoverPending recovers the pending attempts of the windows in only (all when nil).
func (s *Store) recoverPending(ctx context.Context, now time.Time, only map[int64]bool) (int, error) {
	if err := validNow(now); err != nil {
		return 0, err
	}
	var total int
	err := s.inTx(ctx, "recover pending attempts", func(q *dbq.Queries) error {
		groups, err := q.PendingAttemptCounts(ctx)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if only != nil && !only[g.ReplyWindowID] {
				continue
			}
			if _, err := lockWindow(ctx, q, g.ReplyWindowID); err != nil {
				return err
			}
			failed, err := q.FailPendingAttemptsOfWindow(ctx, dbq.FailPendingAttemptsOfWindowParams{
				ReplyWindowID: g.ReplyWindowID, ErrorCode: "abandoned_before_transmit",
				ErrorMessage: "send stopped before network transmission", FailType: vocab.FailReleased, Now: now,
			})
			if err != nil {
				return err
			}
			if failed != int64(g.Pending) {
				return fail(vocab.CodeAttemptConflict, "pending attempts of window %d changed during recovery", g.ReplyWindowID)
			}
			if _, err := batchRow[dbq.ReplyWindow](q.ReleaseWindowReservations(ctx, []dbq.ReleaseWindowReservationsParams{{
				Released: g.Pending, Now: now, ReplyWindowID: g.ReplyWindowID}})); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, fmt.Sprintf("window %d holds fewer reservations than pending attempts", g.ReplyWindowID))
			}
			total += int(g.Pending)
		}
		return nil
	})
	return total, err
}
