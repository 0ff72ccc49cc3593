package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// PollLease names one poll activity's claim on a bot's lease: the worker that runs it
// (Holder) and its place in the order of the bot's poll activities (Epoch from the
// AccountPoller workflow, Attempt from Temporal's retries). A larger (Epoch, Attempt)
// is a newer activity. Lease expiry is read on the database's clock.
type PollLease struct {
	AccountKey string
	Holder     string
	Epoch      int64
	Attempt    int32
}

// LeaseRenewal is one lease a renewal kept.
type LeaseRenewal struct {
	PollLease
	ExpiresAt time.Time
	// Wanted reports that a newer poll activity asked for the lease: the holder lets go.
	Wanted bool
}

func validLease(l PollLease, ttl time.Duration) error {
	if err := validAccountKey(l.AccountKey); err != nil {
		return err
	}
	if l.Holder == "" || len(l.Holder) > 200 {
		return fail(vocab.CodeInvalidInput, "lease holder is missing or too long")
	}
	if ttl < time.Second || ttl > time.Hour {
		return fail(vocab.CodeInvalidInput, "lease ttl must be between 1s and 1h")
	}
	return nil
}

// TakePollLease takes the bot's poll lease for ttl when it is free or expired. When a live holder has it, taken is false and, if the claim is newer
// than the holder's, the holder is asked to let go (it sees that at its next renewal).
func (s *Store) TakePollLease(ctx context.Context, l PollLease, ttl time.Duration) (taken bool, expires time.Time, err error) {
	if err := validLease(l, ttl); err != nil {
		return false, time.Time{}, err
	}
	err = s.read(ctx, "take poll lease", func(q *dbq.Queries) error {
		row, err := q.TakePollLease(ctx, dbq.TakePollLeaseParams{AccountKey: l.AccountKey, Holder: l.Holder,
			Epoch: l.Epoch, Attempt: l.Attempt, TtlMs: ttl.Milliseconds()})
		switch {
		case err == nil:
			taken, expires = true, row.ExpiresAt
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		_, err = q.WantPollLease(ctx, l.Epoch, l.Attempt, l.AccountKey)
		return err
	})
	return taken, expires, err
}

// RenewPollLeases extends by ttl every lease holder still has among accountKeys, in one
// statement, and returns those it kept; a key missing from the answer was taken over.
func (s *Store) RenewPollLeases(ctx context.Context, holder string, accountKeys []string, ttl time.Duration) ([]LeaseRenewal, error) {
	if len(accountKeys) == 0 {
		return nil, nil
	}
	if err := validLease(PollLease{AccountKey: accountKeys[0], Holder: holder}, ttl); err != nil {
		return nil, err
	}
	var out []LeaseRenewal
	err := s.read(ctx, "renew poll leases", func(q *dbq.Queries) error {
		rows, err := q.RenewPollLeases(ctx, ttl.Milliseconds(), holder, accountKeys)
		for _, r := range rows {
			out = append(out, LeaseRenewal{PollLease: PollLease{AccountKey: r.AccountKey, Holder: holder, Epoch: r.Epoch,
				Attempt: r.Attempt}, ExpiresAt: r.ExpiresAt, Wanted: r.Wanted})
		}
		return err
	})
	return out, err
}

// ReleasePollLease frees the lease if l still holds it (false when it no longer did).
func (s *Store) ReleasePollLease(ctx context.Context, l PollLease) (bool, error) {
	var n int64
	err := s.read(ctx, "release poll lease", func(q *dbq.Queries) (err error) {
		n, err = q.ReleasePollLease(ctx, dbq.ReleasePollLeaseParams{AccountKey: l.AccountKey, Holder: l.Holder,
			Epoch: l.Epoch, Attempt: l.Attempt})
		return err
	})
	return n == 1, err
}

// ClaimExpiredPollLeases frees at most max leases of active accounts that expired more
// than grace ago (their holder died or was cut off) and returns them; among workers
// running this at once each lease is claimed by one. The caller tells each bot's poller
// to replace the dead poll activity. Leases held by claimer (the calling worker) are never
// claimed: its poll activities are alive, and one whose lease expired during a database
// outage may hold a fetched page it has not committed yet (it commits it, then lets go);
// a replacement would fetch past that page and its commit would be refused.
func (s *Store) ClaimExpiredPollLeases(ctx context.Context, claimer string, grace time.Duration, max int) ([]PollLease, error) {
	if max <= 0 || max > 10000 || grace < 0 || claimer == "" {
		return nil, fail(vocab.CodeInvalidInput, "claim of expired leases: max must be 1..10000, grace not negative and the claimer named")
	}
	var out []PollLease
	err := s.read(ctx, "claim expired poll leases", func(q *dbq.Queries) error {
		rows, err := q.ClaimExpiredPollLeases(ctx, grace.Milliseconds(), claimer, int32(max))
		for _, r := range rows {
			out = append(out, PollLease{AccountKey: r.AccountKey, Epoch: r.Epoch, Attempt: r.Attempt})
		}
		return err
	})
	return out, err
}

// PollLeaseCounts counts leases held live and held but expired.
type PollLeaseCounts struct{ Live, Expired int64 }

// CountPollLeases counts the poll leases held, live and expired.
func (s *Store) CountPollLeases(ctx context.Context) (PollLeaseCounts, error) {
	var out PollLeaseCounts
	err := s.read(ctx, "count poll leases", func(q *dbq.Queries) error {
		r, err := q.CountPollLeases(ctx)
		out = PollLeaseCounts{Live: r.Live, Expired: r.Expired}
		return err
	})
	return out, err
}
