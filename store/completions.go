package store

import (
	"context"
	"errors"
	"time"

	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
)

// completionBatchTimeout bounds one batch of completions, whoever waits for it.
const completionBatchTimeout = 30 * time.Second

// completionBatcher commits the completions that arrive together in one transaction and
// one round trip (natural batching, as PostgreSQL's group commit does for the WAL): one
// caller at a time leads a batch of every completion queued when it starts; the
// completions that arrive meanwhile wait for it and form the next batch, led by the first
// of them. Nothing waits for a batch to fill: a completion alone is committed at once, as
// by itself.
//
// A batch holds only completions of sending attempts that move on (CompleteSendingAttempt),
// each a statement of its own whose outcome concerns its attempt alone. An attempt that
// was not sending, or any failure of the batch (then the transaction committed nothing),
// leaves the completion to CompleteSend's own transaction, which tells a repeated
// completion from a conflicting one.
type completionBatcher struct {
	mu      sync.Mutex
	queue   []*queuedCompletion
	leading bool
}

// queuedCompletion is one completion waiting for its batch.
type queuedCompletion struct {
	now time.Time
	c   Completion
	// done is closed once the batch ended; lead when this completion leads the next batch.
	done, lead chan struct{}
	row        dbq.CompleteSendingAttemptRow
	moved      bool
}

// complete commits c in a batch and reports whether it moved its sending attempt on (row
// is then the attempt and its window as the batch left them).
func (b *completionBatcher) complete(ctx context.Context, s *Store, now time.Time, c Completion) (dbq.CompleteSendingAttemptRow, bool) {
	qc := &queuedCompletion{now: now, c: c, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, qc)
	if b.leading {
		b.mu.Unlock()
		select {
		case <-qc.done:
			return qc.row, qc.moved
		case <-qc.lead: // the batch before ended: this one leads the next
		}
		b.mu.Lock()
	}
	b.leading = true
	batch := b.queue
	b.queue = nil
	b.mu.Unlock()

	// The batch is not the leader's alone: the leader giving up must not fail the others.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionBatchTimeout)
	s.completeBatch(bctx, batch)
	cancel()
	for _, q := range batch {
		close(q.done)
	}

	b.mu.Lock()
	if len(b.queue) > 0 {
		close(b.queue[0].lead)
	} else {
		b.leading = false
	}
	b.mu.Unlock()
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
