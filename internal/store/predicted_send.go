package store

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
)

// A send reserved in one round trip (migration 00009).
//
// A reservation through a named window (the Send activity's) reads, before its writes, the
// session, the account's and the window's locks, the request's earlier attempt and the
// send context: two round trips with the writes and COMMIT. It also reads the version of
// the state it leaves (SendState) and keeps that state as the window's sendHint. The next
// reservation through the same window and session is decided on the hint by the same code
// (sessionLocks.check, reservation.decide), and its writes travel with the locks, the
// check of the version and COMMIT: one round trip. When the state changed meanwhile (a
// poll recorded on the account, the session closed, a send still in flight, the request
// id already used, ...), that transaction writes nothing and the send is reserved the
// usual way.

// How a reservation was committed (PreparedSend.Commit), named as for pages.
const (
	// SendReadFirst: decided on what a first round trip read (two round trips).
	SendReadFirst = PageReadFirst
	// SendPredicted: decided on the state the window's last reservation left, in one.
	SendPredicted = PagePredicted
	// SendMispredicted: that state had changed; read first after it (three round trips).
	SendMispredicted = PageMispredicted
)

// sendHint is the state a reservation through a window left: the rows the window's next
// send is decided on, as that reservation's transaction left them, and their version.
type sendHint struct {
	version string
	session dbq.SessionByTokenHashRow
	window  dbq.ReplyWindow
	account dbq.Account
	// reads is the send context the next send expects: the next send index, no send to
	// the peer in flight (the last one completed), the same secrets.
	reads startRead
}

// refersTo reports whether ref names the hint's session, as queueSession resolves it.
func (h *sendHint) refersTo(ref SessionRef) bool {
	sess := h.session.AgentSession
	switch {
	case !ref.Token.IsZero() && len(ref.Token.Reveal()) <= 512:
		return bytes.Equal(tokenHash(ref.Token.Reveal()), sess.TokenHash)
	case ref.Token.IsZero() && ref.ID != "":
		id, err := uuid.Parse(ref.ID)
		return err == nil && id == sess.SessionID
	}
	return false
}

// sendHints holds the hints of the windows sent through in this process, one per account
// at most (the account's last window), so that they stay as many as the accounts. A hint
// is found by its window or by its session's id (the Send activity names the session
// alone, unless another session of the window sends).
type sendHints struct {
	mu        sync.Mutex
	byWindow  map[int64]*sendHint
	bySession map[uuid.UUID]*sendHint
	byAccount map[string]*sendHint
}

// predict returns the hint a reservation can be decided on: the one the last reservation
// through its window (named, or its session's) left, for the same session. Nil when it
// must read first.
func (h *sendHints) predict(in ReplyInput) *sendHint {
	h.mu.Lock()
	var hint *sendHint
	switch {
	case in.ReplyWindowID != 0:
		hint = h.byWindow[in.ReplyWindowID]
	case in.Session.Token.IsZero() && in.Session.ID != "":
		if id, err := uuid.Parse(in.Session.ID); err == nil {
			hint = h.bySession[id]
		}
	}
	h.mu.Unlock()
	if hint == nil || !hint.refersTo(in.Session) ||
		(in.ReplyWindowID != 0 && hint.window.ReplyWindowID != in.ReplyWindowID) {
		return nil
	}
	return hint
}

// hinted reports whether a reservation could be decided on the hint it leaves: its
// window is named, or its session by id.
func hinted(in ReplyInput) bool {
	return in.ReplyWindowID != 0 || (in.Session.Token.IsZero() && in.Session.ID != "")
}

// keep forgets the hint a reservation was decided on or could have been (used, nil if
// none) and records the one it left (next, nil when it left none: it failed, was refused
// or found an earlier attempt).
func (h *sendHints) keep(used, next *sendHint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forget(used)
	if next == nil {
		return
	}
	if h.byWindow == nil {
		h.byWindow, h.bySession, h.byAccount = map[int64]*sendHint{}, map[uuid.UUID]*sendHint{}, map[string]*sendHint{}
	}
	h.forget(h.byAccount[next.window.AccountKey])
	h.forget(h.byWindow[next.window.ReplyWindowID])
	h.byWindow[next.window.ReplyWindowID] = next
	h.bySession[next.session.AgentSession.SessionID] = next
	h.byAccount[next.window.AccountKey] = next
}

// forget removes a hint (nil: nothing) from every index that still holds it.
func (h *sendHints) forget(hint *sendHint) {
	if hint == nil {
		return
	}
	if h.byWindow[hint.window.ReplyWindowID] == hint {
		delete(h.byWindow, hint.window.ReplyWindowID)
	}
	if h.bySession[hint.session.AgentSession.SessionID] == hint {
		delete(h.bySession, hint.session.AgentSession.SessionID)
	}
	if h.byAccount[hint.window.AccountKey] == hint {
		delete(h.byAccount, hint.window.AccountKey)
	}
}

// reservePredicted reserves r on the state hint holds: decided first, by the code that
// decides on what the usual path reads, then written in one round trip behind the
// account's and the window's locks and the check of the hint's version, with COMMIT.
// held is false when nothing was written: the hint did not hold, or the decision on it
// was not a plain reservation (a refusal), which the usual path makes.
func (s *Store) reservePredicted(ctx context.Context, r *reservation, hint *sendHint) (held bool, err error) {
	r.sess, r.sessRow, r.predicted = hint.session.AgentSession, hint.session, true
	locks := sessionLocks{
		row:     hint.session,
		account: func() (dbq.Account, error) { return hint.account, nil },
		window:  func() (dbq.ReplyWindow, error) { return hint.window, nil },
	}
	if err := r.checkLocks(locks); err != nil {
		return false, err
	}
	reads := hint.reads
	if err := r.decide(sendContext{known: &reads}); err != nil || r.refused != "" {
		return false, nil
	}
	r.out.Commit = SendMispredicted // until the check held
	return s.reserveBatched(ctx, r, hint)
}

// predictedReads are the results of a predicted reservation's statements, queued in a
// batch's transaction (queuePredicted).
type predictedReads struct {
	r        *reservation
	account  *dbq.LockAccountKeyBatchResults
	window   *dbq.LockReplyWindowIDBatchResults
	expected *dbq.SendStateBatchResults
	writes   reservationWrites
}

// queuePredicted queues a reservation decided on hint: the locks of its account and
// window, the check of the hint (SendState, whose verdict the writes that follow honour)
// and its writes.
func queuePredicted(ctx context.Context, q *dbq.Queries, r *reservation, hint *sendHint) *predictedReads {
	wid := hint.window.ReplyWindowID
	return &predictedReads{
		r:       r,
		account: q.LockAccountKey(ctx, []string{hint.window.AccountKey}), // a window's account never changes
		window:  q.LockReplyWindowID(ctx, []int64{wid}),
		expected: q.SendState(ctx, []dbq.SendStateParams{{Expected: &hint.version, ExpectedNextIndex: hint.reads.nextIndex,
			TouchesAccount: r.startNow, SessionID: hint.session.AgentSession.SessionID, RequestID: r.requestID,
			ReplyWindowID: wid}}),
		writes: r.queueWrites(ctx, q),
	}
}

// read reads the results in the order they were queued. held reports that the check held
// and the writes were made; dbErr is a failed statement (then the transaction commits
// nothing); err is what the reservation itself failed with after its writes.
func (pr *predictedReads) read() (held bool, dbErr, err error) {
	if _, err := batchRow[string](pr.account); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, err, nil
	}
	if _, err := batchRow[int64](pr.window); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, err, nil
	}
	state, err := batchRow[dbq.SendStateRow](pr.expected)
	if err != nil {
		return false, err, nil
	}
	if !state.Holds { // nothing was written: the writes' results are read and dropped
		w := pr.writes
		if w.counted != nil {
			err = dropped(batchRow[dbq.ReplyWindow](w.counted))
		}
		if w.started != nil && err == nil {
			err = dropped(batchRow[dbq.ReserveStartedWindowSendRow](w.started))
		}
		if err == nil {
			err = dropped(batchRow[dbq.SendAttempt](w.inserted))
		}
		return false, err, nil
	}
	pr.r.version, pr.r.out.Commit = &state.Version, SendPredicted
	return true, nil, pr.r.readWrites(pr.writes)
}

// dropped is the failure of a statement whose result is dropped (none when it returned
// nothing).
func dropped[T any](_ T, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
