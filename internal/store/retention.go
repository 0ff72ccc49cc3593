package store

import (
	"context"
	"slices"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// RetentionPolicy is how long the store keeps each kind of data (docs/operations.md,
// "Retention"). A zero horizon keeps that kind forever.
type RetentionPolicy struct {
	// Content is how long a message's content is kept after its reply window closed (or,
	// for a message without a window, after it last changed): the payload, the attachments'
	// locators, the context token, the content of the replies sent and held, the staged
	// media. Erased as starter forget erases it; the rows stay.
	Content time.Duration
	// Rows is how long the rows are kept, by the same clock: the message (its key is what
	// deduplicates a message iLink hands out again), its window, attempts, sessions and held
	// replies. Non-zero, it is at least Content, which is non-zero too.
	Rows time.Duration
	// Quarantine is how long a quarantined page is kept after it was quarantined.
	Quarantine time.Duration
	// Audit is how long a line of enrollment_audit, route_audit and forget_audit is kept.
	Audit time.Duration
}

// KeepsEverything reports whether no horizon is set: nothing of the store is ever purged
// but the web front end's expired sessions and owner links.
func (p RetentionPolicy) KeepsEverything() bool {
	return p.Content == 0 && p.Rows == 0 && p.Quarantine == 0 && p.Audit == 0
}

// Validate refuses a negative horizon, and a rows horizon shorter than the content
// horizon or set without one (deleting a row deletes its content).
func (p RetentionPolicy) Validate() error {
	if p.Content < 0 || p.Rows < 0 || p.Quarantine < 0 || p.Audit < 0 {
		return fail(vocab.CodeInvalidInput, "a retention horizon must not be negative (0 keeps forever)")
	}
	if p.Rows > 0 && (p.Content == 0 || p.Content > p.Rows) {
		return fail(vocab.CodeInvalidInput, "the rows horizon must be at least the content horizon, which must be set with it")
	}
	return nil
}

// The retention classes, each purged in batches of its own by PurgeBatch, in this order.
const (
	RetentionContent    = "content"    // messages' content erased (RetentionPolicy.Content)
	RetentionRows       = "rows"       // messages' rows and their dependents deleted (Rows)
	RetentionQuarantine = "quarantine" // quarantined pages deleted (Quarantine)
	RetentionAudit      = "audit"      // audit lines deleted (Audit)
	RetentionWebUI      = "webui"      // the web front end's expired sessions and owner links
)

// RetentionClasses are the classes in the order a purge runs them: content before rows
// (a row is deleted only once its content is erased).
var RetentionClasses = []string{RetentionContent, RetentionRows, RetentionQuarantine, RetentionAudit, RetentionWebUI}

// DefaultPurgeLimit is the default most rows (messages, for content and rows) of one batch;
// MaxPurgeLimit bounds it.
const (
	DefaultPurgeLimit = 500
	MaxPurgeLimit     = 5000
)

// reasonRetention is the drop reason and dropper of a held reply still waiting when the
// content of its message is erased by retention.
const reasonRetention = "retention"

// PurgeBatch purges at most limit rows of one retention class (a Retention* constant) that
// are due at now under policy, in one short transaction, and returns how many it purged
// (messages for content and rows). A class whose horizon is 0 purges nothing. It selects
// only what is still due, oldest first, so it is idempotent and resumable: run it again
// until it returns fewer than limit. limit 0 is DefaultPurgeLimit.
//
// Content is erased by the rule starter forget erases with (eraseContent): the payload
// NULL, erased_at set, fingerprints zeroed, locators, context tokens and staged media
// deleted, held replies still waiting dropped ("retention"), messages not settled settled
// as failed. Only messages whose window is closed and closed before now minus the horizon
// are due (a message without a window: by its last change); an open window's message is
// never touched. Rows are deleted only once their content is erased, with everything that
// hangs off them, in foreign-key order.
//
// Refusals, with nothing written: an invalid now, policy, class or limit (invalid_input).
func (s *Store) PurgeBatch(ctx context.Context, now time.Time, policy RetentionPolicy, class string, limit int) (traced int, tracedErr error) {
	ctx, span := startSpan(ctx, "PurgeBatch", "")
	defer func() { endSpan(span, tracedErr, "", "") }()
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return 0, err
	}
	if err := policy.Validate(); err != nil {
		return 0, err
	}
	if limit == 0 {
		limit = DefaultPurgeLimit
	}
	if limit < 1 || limit > MaxPurgeLimit {
		return 0, fail(vocab.CodeInvalidInput, "the purge limit must be 1..5000")
	}
	n := int32(limit)
	var purged int64
	switch class {
	case RetentionContent:
		if policy.Content == 0 {
			return 0, nil
		}
		return s.purgeContent(ctx, now, now.Add(-policy.Content), n)
	case RetentionRows:
		if policy.Rows == 0 {
			return 0, nil
		}
		return s.purgeRows(ctx, now.Add(-policy.Rows), n)
	case RetentionQuarantine:
		if policy.Quarantine == 0 {
			return 0, nil
		}
		err := s.inTx(ctx, "retention: quarantine", func(q *dbq.Queries) (err error) {
			purged, err = q.RetentionDeleteQuarantinedPages(ctx, now.Add(-policy.Quarantine), n)
			return err
		})
		return int(purged), err
	case RetentionAudit:
		if policy.Audit == 0 {
			return 0, nil
		}
		cutoff := now.Add(-policy.Audit)
		err := s.inTx(ctx, "retention: audit", func(q *dbq.Queries) error {
			purged = 0
			for _, del := range []func(context.Context, time.Time, int32) (int64, error){
				q.RetentionDeleteEnrollmentAudit, q.RetentionDeleteRouteAudit, q.RetentionDeleteForgetAudit,
			} {
				if purged == int64(n) {
					break
				}
				d, err := del(ctx, cutoff, n-int32(purged))
				if err != nil {
					return err
				}
				purged += d
			}
			return nil
		})
		return int(purged), err
	case RetentionWebUI:
		err := s.inTx(ctx, "retention: web front end", func(q *dbq.Queries) error {
			d, err := q.RetentionDeleteWebUISessions(ctx, now, n)
			if err != nil {
				return err
			}
			purged = d
			if purged < int64(n) {
				d, err = q.RetentionDeleteWebUIOwnerLinks(ctx, now, n-int32(purged))
				purged += d
			}
			return err
		})
		return int(purged), err
	}
	return 0, fail(vocab.CodeInvalidInput, "unknown retention class")
}

// purgeContent erases the content of at most n messages due before cutoff, in one
// transaction that first locks the accounts of those a page commit or a send may still
// touch (rules.PurgeLocksAccount; the store's lock order: a page commit of one of them
// waits for the batch, not the other way round). A batch of settled messages, the steady
// state, locks no account: the pages of its bots go on while it erases.
func (s *Store) purgeContent(ctx context.Context, now, cutoff time.Time, n int32) (int, error) {
	var erased int
	err := s.purgeTx(ctx, "retention: erase content", func(q *dbq.Queries) error {
		erased = 0
		due, err := q.RetentionContentDue(ctx, cutoff, n)
		if err != nil || len(due) == 0 {
			return err
		}
		keys := make([]string, len(due))
		var accounts []string
		for i, d := range due {
			keys[i] = d.MessageKey
			if rules.PurgeLocksAccount(d.Status) {
				accounts = append(accounts, d.AccountKey)
			}
		}
		if len(accounts) > 0 {
			slices.Sort(accounts)
			// One statement locks them all, in key order: a batch over many bots holds its
			// locks for the erasure's few statements, not for a round trip per bot.
			if _, err := q.LockAccounts(ctx, slices.Compact(accounts)); err != nil {
				return err
			}
		}
		var c forgetCounts
		if err := eraseContent(ctx, q, now, erasure{by: reasonRetention, reason: reasonRetention}, keys, &c); err != nil {
			return err
		}
		erased = len(keys)
		return nil
	})
	return erased, err
}

// purgeRows deletes at most n messages erased and due before cutoff, and everything that
// hangs off them, in foreign-key order: held replies, MCP offers, attempts, sessions (and
// their staged media), attachments' locators, windows (and their context tokens), the
// messages.
func (s *Store) purgeRows(ctx context.Context, cutoff time.Time, n int32) (int, error) {
	var deleted int64
	err := s.purgeTx(ctx, "retention: delete rows", func(q *dbq.Queries) error {
		deleted = 0
		keys, err := q.RetentionRowsDue(ctx, cutoff, n)
		if err != nil || len(keys) == 0 {
			return err
		}
		windows, err := q.ForgetWindows(ctx, keys)
		if err != nil {
			return err
		}
		attempts, err := q.RetentionAttemptsOfWindows(ctx, windows)
		if err != nil {
			return err
		}
		if _, err := q.RetentionDeleteHeldReplies(ctx, windows, attempts); err != nil {
			return err
		}
		if _, err := q.RetentionDeleteMCPOffers(ctx, keys); err != nil {
			return err
		}
		for _, del := range []func(context.Context, []int64) (int64, error){q.RetentionDeleteAttempts, q.RetentionDeleteSessions} {
			if _, err := del(ctx, windows); err != nil {
				return err
			}
		}
		if _, err := q.RetentionDeleteImages(ctx, keys); err != nil {
			return err
		}
		if _, err := q.RetentionDeleteWindows(ctx, windows); err != nil {
			return err
		}
		deleted, err = q.RetentionDeleteMessages(ctx, keys)
		return err
	})
	return int(deleted), err
}

// purgeTx runs one purge batch as forgetTx runs an erasure's transaction, but commits it
// without waiting for its WAL to be flushed: the batch's locks are let go at once, and
// the pages and sends committing meanwhile do not queue behind its flush. A batch that a
// crash of PostgreSQL loses was not erased; it is still due, and the next run erases it
// (its count, already reported, is then reported again). A forget stays synchronous: it
// tells the operator what was erased.
func (s *Store) purgeTx(ctx context.Context, op string, fn func(q *dbq.Queries) error) error {
	return s.forgetTx(ctx, op, func(q *dbq.Queries) error {
		if err := q.CommitAsynchronously(ctx); err != nil {
			return err
		}
		return fn(q)
	})
}
