package store_test

import (
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// The tests reach the send rules through the methods the Send activity calls:
// ReserveAndStart, StartSend, CompleteSend, ReleaseSend, and the gateway's recovery
// (ListPendingWindows, RecoverPendingAttemptsOf).

// breakerFor is how long reserve keeps a bot's throttle breaker open.
const breakerFor = 1000 * time.Hour

// reserve reserves a reply with ReserveAndStart while its bot's throttle breaker is open
// (BlockSends), so the attempt stays pending as the Send activity sees it when it must
// wait. A refusal is returned as ReserveAndStart returned it.
func (e *env) reserve(now time.Time, in store.ReplyInput) (store.Attempt, error) {
	e.t.Helper()
	if sess, err := e.store.ValidateSession(e.ctx, now, in.Session); err == nil {
		a, err := e.store.GetAccount(e.ctx, sess.AccountKey)
		if err != nil {
			e.t.Fatalf("get account: %v", err)
		}
		if a.SendsBlockedUntil == nil || !now.Before(*a.SendsBlockedUntil) {
			if _, err := e.store.BlockSends(e.ctx, now, sess.AccountKey, now.Add(breakerFor)); err != nil {
				e.t.Fatalf("block sends: %v", err)
			}
		}
	}
	p, err := e.store.ReserveAndStart(e.ctx, now, in, store.SendPacing{})
	if err == nil && p.Started != nil {
		e.t.Fatalf("reserve: attempt %s started although its bot's breaker is open", p.Attempt.AttemptID)
	}
	return p.Attempt, err
}

// start closes the breaker of the session's bot (BlockSends until now) and starts a
// pending attempt with StartSend. PreparedSend.Started is nil when it did not start (its
// InFlight says another send to the peer has not completed).
func (e *env) start(now time.Time, ref store.SessionRef, attemptID string) (store.PreparedSend, error) {
	e.t.Helper()
	if sess, err := e.store.ValidateSession(e.ctx, now, ref); err == nil {
		a, err := e.store.GetAccount(e.ctx, sess.AccountKey)
		if err != nil {
			e.t.Fatalf("get account: %v", err)
		}
		if a.SendsBlockedUntil != nil && now.Before(*a.SendsBlockedUntil) {
			if _, err := e.store.BlockSends(e.ctx, now, sess.AccountKey, now); err != nil {
				e.t.Fatalf("close breaker: %v", err)
			}
		}
	}
	return e.store.StartSend(e.ctx, now, ref, attemptID, store.SendPacing{})
}

// reserveAndStart reserves and starts a reply in one transaction (ReserveAndStart) and
// fails the test unless the attempt started.
func (e *env) reserveAndStart(now time.Time, in store.ReplyInput) store.Attempt {
	e.t.Helper()
	p, err := e.store.ReserveAndStart(e.ctx, now, in, store.SendPacing{})
	if err != nil {
		e.t.Fatalf("reserve and start: %v", err)
	}
	if p.Started == nil {
		e.t.Fatalf("reserve and start: attempt %s did not start: %+v", p.Attempt.AttemptID, p)
	}
	return p.Started.Attempt
}

// recoverPending recovers the pending attempts of every window holding some, as the
// gateway's reconciliation does for the windows nobody can resume.
func (e *env) recoverPending(now time.Time) (int, error) {
	e.t.Helper()
	pending, err := e.store.ListPendingWindows(e.ctx)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, 0, len(pending))
	for _, w := range pending {
		ids = append(ids, w.ReplyWindowID)
	}
	return e.store.RecoverPendingAttemptsOf(e.ctx, now, ids)
}
