package store

import (
	"context"
	"errors"
	"time"

	"sort"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
)

// batchTimeout bounds one batch (of completions or reservations), whoever waits for it.
const batchTimeout = 30 * time.Second

// batcher commits the items that arrive together in one transaction and one round trip
// (natural batching, as PostgreSQL's group commit does for the WAL): one caller at a time
// leads a batch of the items queued when it starts; the items that arrive meanwhile wait
// for it and form the next batch, led by the first of them. Nothing waits for a batch to
// fill: an item alone is committed at once, as by itself.
type batcher[T any] struct {
	mu      sync.Mutex
	queue   []*waiting[T]
	leading bool
}

// waiting is an item waiting for its batch: done is closed once the batch ended, lead
// when the item leads the next batch.
type waiting[T any] struct {
	item       T
	done, lead chan struct{}
}

// run queues item and returns once a batch holding it was committed (commit writes its
// outcome into the items). fits, when set, tells whether an item may join the batch being
// formed (it is called on the queue in order, once per batch); the items that do not wait
// for the next batch.
func (b *batcher[T]) run(ctx context.Context, item T, fits func(T) bool, commit func(context.Context, []T)) {
	me := &waiting[T]{item: item, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, me)
	if b.leading {
		b.mu.Unlock()
		select {
		case <-me.done:
			return
		case <-me.lead: // the batch before ended: this item leads the next
		}
		b.mu.Lock()
	}
	b.leading = true
	var batch, later []*waiting[T]
	var items []T
	for _, w := range b.queue {
		if fits == nil || fits(w.item) {
			batch, items = append(batch, w), append(items, w.item)
		} else {
			later = append(later, w)
		}
	}
	b.queue = later
	b.mu.Unlock()

	// The batch is not the leader's alone: the leader giving up must not fail the others.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	commit(bctx, items)
	cancel()
	for _, w := range batch {
		close(w.done)
	}

	b.mu.Lock()
	if len(b.queue) > 0 {
		close(b.queue[0].lead)
	} else {
		b.leading = false
	}
	b.mu.Unlock()
}

// Completions are batched (Store.completions) when they move a sending attempt on
// (CompleteSendingAttempt), each a statement of its own whose outcome concerns its attempt
// alone. An attempt that was not sending, or any failure of the batch (then the
// transaction committed nothing), leaves the completion to CompleteSend's own transaction,
// which tells a repeated completion from a conflicting one.

// queuedCompletion is one completion in a batch, with its outcome.
type queuedCompletion struct {
	now   time.Time
	c     Completion
	row   dbq.CompleteSendingAttemptRow
	moved bool
}

// completeBatched commits c in a batch and reports whether it moved its sending attempt
// on (row is then the attempt and its window as the batch left them).
func (s *Store) completeBatched(ctx context.Context, now time.Time, c Completion) (dbq.CompleteSendingAttemptRow, bool) {
	qc := &queuedCompletion{now: now, c: c}
	s.completions.run(ctx, qc, nil, s.completeBatch)
	return qc.row, qc.moved
}

// completeBatch moves the batch's sending attempts on in one transaction, COMMIT queued
// with the statements. When anything fails, nothing is committed and no completion of the
// batch moved.
func (s *Store) completeBatch(ctx context.Context, batch []*queuedCompletion) {
	params := make([]dbq.CompleteSendingAttemptParams, len(batch))
	for i, q := range batch {
		c := q.c
		params[i] = dbq.CompleteSendingAttemptParams{AttemptID: c.AttemptID, Status: c.Status,
			ProviderMessageID: c.ProviderMessageID, ErrorCode: c.ErrorCode, ErrorMessage: c.ErrorMessage,
			FailType: c.FailType, Now: q.now}
	}
	err := s.inPipeline(ctx, "complete attempts", func(p *pipeline, q *dbq.Queries) error {
		results := q.CompleteSendingAttempt(ctx, params)
		p.commitQueued()
		var failed error
		results.QueryRow(func(i int, row dbq.CompleteSendingAttemptRow, err error) {
			switch {
			case err == nil:
				batch[i].row, batch[i].moved = row, true
			case !errors.Is(err, pgx.ErrNoRows) && failed == nil:
				failed = err
			}
		})
		return failed
	})
	if err != nil {
		for _, q := range batch {
			q.row, q.moved = dbq.CompleteSendingAttemptRow{}, false
		}
	}
}

// Predicted reservations are batched (Store.reservations) as completions are. Each
// reservation of a batch queues its account's and window's locks, the check of its hint
// and its writes, in the order of the accounts' keys (so that two batches never wait for
// each other in a cycle), one reservation per account; the writes honour the check that
// precedes them. A reservation whose check did not hold wrote nothing; when any statement
// fails the transaction commits nothing. Both are reserved the usual way.

// queuedReservation is one predicted reservation in a batch, with its outcome.
type queuedReservation struct {
	r    *reservation
	hint *sendHint
	held bool
	err  error
}

// reserveBatched commits r, decided on hint, in a batch (alone, in a transaction of its
// own, with ReservationBatcher off). held reports that the hint held and the reservation
// was written (err: what it failed with after that); otherwise nothing of it was written.
func (s *Store) reserveBatched(ctx context.Context, r *reservation, hint *sendHint) (held bool, err error) {
	qr := &queuedReservation{r: r, hint: hint}
	if !s.spec.Has(ReservationBatcher) {
		s.reserveBatch(ctx, []*queuedReservation{qr})
		return qr.held, qr.err
	}
	// One reservation per account in a batch (a second one of the account would be
	// decided on the state the first changes): the others wait for the next batch.
	seen := map[string]bool{}
	s.reservations.run(ctx, qr, func(q *queuedReservation) bool {
		key := q.hint.window.AccountKey
		fits := !seen[key]
		seen[key] = true
		return fits
	}, s.reserveBatch)
	return qr.held, qr.err
}

// reserveBatch writes the batch's reservations in one transaction, COMMIT queued with
// them, in the order of their accounts' keys.
func (s *Store) reserveBatch(ctx context.Context, batch []*queuedReservation) {
	sort.Slice(batch, func(i, j int) bool { return batch[i].hint.window.AccountKey < batch[j].hint.window.AccountKey })
	err := s.inPipeline(ctx, "reserve replies", func(p *pipeline, q *dbq.Queries) error {
		reads := make([]*predictedReads, len(batch))
		for i, qr := range batch {
			reads[i] = queuePredicted(ctx, q, qr.r, qr.hint)
		}
		p.commitQueued()
		for i, qr := range batch {
			held, dbErr, err := reads[i].read()
			if dbErr != nil {
				return dbErr
			}
			qr.held, qr.err = held, err
		}
		return nil
	})
	if err != nil { // nothing was committed
		for _, qr := range batch {
			qr.held, qr.err, qr.r.out.Commit = false, nil, SendMispredicted
		}
	}
}
