package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
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
	// HolderKey is the liveness key the holder's PostgreSQL session held when it took the
	// lease (0: none; the lease then moves only when it expires).
	HolderKey int64
	// TaskToken is the Temporal task token of the poll activity attempt that holds the
	// lease (nil: unknown), so that a peer can fail exactly that attempt when the holder
	// dies.
	TaskToken []byte
	// Generation and Probe are what the poll activity polls (its input): a peer that
	// adopts the poll of a dead holder goes on with the same (0: unknown, not adoptable).
	Generation int32
	Probe      bool
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
	if l.HolderKey < 0 || len(l.TaskToken) > maxTaskToken {
		return fail(vocab.CodeInvalidInput, "lease holder key is negative or task token too long")
	}
	return nil
}

// maxTaskToken bounds a stored task token (Temporal's are a few hundred bytes).
const maxTaskToken = 4096

// keyArg is a liveness key as a nullable statement argument (0: none).
func keyArg(k int64) *int64 {
	if k == 0 {
		return nil
	}
	return &k
}

// generationArg is a lease's generation as a nullable statement argument (0: unknown).
func generationArg(g int32) *int32 {
	if g <= 0 {
		return nil
	}
	return &g
}

// TakePollLease takes the bot's poll lease for ttl when it is free or expired. When a live holder has it, taken is false and, if the claim is newer
// than the holder's, the holder is asked to let go (it sees that at its next renewal).
func (s *Store) TakePollLease(ctx context.Context, l PollLease, ttl time.Duration) (taken bool, expires time.Time, err error) {
	if err := validLease(l, ttl); err != nil {
		return false, time.Time{}, err
	}
	err = s.read(ctx, "take poll lease", func(q *dbq.Queries) error {
		row, err := q.TakePollLease(ctx, dbq.TakePollLeaseParams{AccountKey: l.AccountKey, Holder: l.Holder,
			Epoch: l.Epoch, Attempt: l.Attempt, TtlMs: ttl.Milliseconds(), HolderKey: keyArg(l.HolderKey), TaskToken: l.TaskToken,
			Generation: generationArg(l.Generation), Probe: l.Probe})
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

// HandOnPollLease frees the lease of a poll that hands it on to even out the workers'
// load (if this poll still holds it), marked free since now with no worker to blame, so
// that RecheckClaimedPollLeases finds it should its retry go to a worker that does not
// take it up.
func (s *Store) HandOnPollLease(ctx context.Context, l PollLease) (bool, error) {
	var n int64
	err := s.read(ctx, "hand on poll lease", func(q *dbq.Queries) (err error) {
		n, err = q.HandOnPollLease(ctx, dbq.HandOnPollLeaseParams{AccountKey: l.AccountKey, Holder: l.Holder,
			Epoch: l.Epoch, Attempt: l.Attempt})
		return err
	})
	return n == 1, err
}

// PollAttemptAdopted reports whether a worker other than l.Holder holds the bot's lease under
// l's poll activity attempt (epoch and attempt): it adopted the attempt from l's holder
// (frozen or cut off until its lease expired) and ends the attempt itself.
func (s *Store) PollAttemptAdopted(ctx context.Context, l PollLease) (bool, error) {
	if l.AccountKey == "" || l.Holder == "" {
		return false, fail(vocab.CodeInvalidInput, "adopted poll attempt: the account and the holder named")
	}
	var adopted bool
	err := s.read(ctx, "poll attempt adopted", func(q *dbq.Queries) (err error) {
		adopted, err = q.PollAttemptAdopted(ctx, dbq.PollAttemptAdoptedParams{AccountKey: l.AccountKey, Asker: l.Holder,
			Epoch: l.Epoch, Attempt: l.Attempt})
		return err
	})
	return adopted, err
}

// AdoptedPollLease is a dead holder's lease AdoptDeadPollLeases gave the adopter: the
// lease as the adopter now holds it (the dead poll activity's epoch, attempt, task token
// and input), the dead holder, and what is left of the attempt's poll session.
type AdoptedPollLease struct {
	PollLease
	DeadHolder string
	Remaining  time.Duration
}

// AdoptDeadPollLeases gives adopter (with its liveness key) at most max leases of active
// accounts whose holder died, or that expired more than grace ago (a holder frozen or cut
// off), and whose poll it can go on with: the lease names the poll
// activity attempt and its input, no newer poll asked for it, and less than session plus
// overrun (what a poll may run past its session) has passed since the attempt took it. Among workers running this at once each lease is
// adopted by one. The adopter polls each bot under the dead attempt and ends that attempt
// through its task token when the poll ends; the leases it cannot adopt are left to
// ClaimDeadPollLeases.
func (s *Store) AdoptDeadPollLeases(ctx context.Context, adopter string, adopterKey int64, ttl, grace, session, overrun time.Duration, max int) ([]AdoptedPollLease, error) {
	if adopter == "" || len(adopter) > 200 || adopterKey < 0 || ttl < time.Second || ttl > time.Hour ||
		max <= 0 || max > 10000 || session <= 0 || overrun < 0 || grace < 0 {
		return nil, fail(vocab.CodeInvalidInput,
			"adoption of dead leases: the adopter named, its key not negative, ttl 1s..1h, max 1..10000, the session positive and the overrun and grace not negative")
	}
	var out []AdoptedPollLease
	err := s.read(ctx, "adopt dead poll leases", func(q *dbq.Queries) error {
		rows, err := q.AdoptDeadPollLeases(ctx, dbq.AdoptDeadPollLeasesParams{Adopter: adopter, AdopterKey: keyArg(adopterKey),
			TtlMs: ttl.Milliseconds(), GraceMs: grace.Milliseconds(), SessionMs: session.Milliseconds(), OverrunMs: overrun.Milliseconds(), MaxLeases: int32(max)})
		for _, r := range rows {
			out = append(out, AdoptedPollLease{PollLease: PollLease{AccountKey: r.AccountKey, Holder: adopter,
				Epoch: r.Epoch, Attempt: r.Attempt, HolderKey: adopterKey, TaskToken: r.TaskToken,
				Generation: r.Generation, Probe: r.Probe},
				DeadHolder: r.DeadHolder, Remaining: time.Duration(r.RemainingMs) * time.Millisecond})
		}
		return err
	})
	return out, err
}

// Adoptable is the poll session and the overrun past it within which a dead poll can be
// adopted (AdoptDeadPollLeases); the zero value: none can.
type Adoptable struct {
	Session, Overrun time.Duration
}

// DeadPollLease is a lease ClaimDeadPollLeases freed: the claim of the dead poll activity
// (its holder, epoch, attempt and task token) and why it was claimed.
type DeadPollLease struct {
	PollLease
	// HolderDied: the holder's liveness session is gone (its process died or lost its
	// session); otherwise the lease expired.
	HolderDied bool
}

// ClaimDeadPollLeases frees at most max leases of active accounts whose holder died (no
// session holds its liveness key) or that expired more than grace ago (a holder frozen or
// cut off, or one without a liveness session), and returns them; among workers running
// this at once each lease is claimed by one. The caller has each bot's dead poll activity
// replaced. Leases held by claimer (the calling worker) are never claimed: its poll
// activities are alive, and one whose lease expired during a database outage may hold a
// fetched page it has not committed yet (it commits it, then lets go); a replacement would
// fetch past that page and its commit would be refused. Leases that a worker can adopt
// within leave (AdoptDeadPollLeases with leave's session and overrun) are left to
// adoption; the zero Adoptable claims them too (a claimer that cannot adopt).
func (s *Store) ClaimDeadPollLeases(ctx context.Context, claimer string, grace time.Duration, max int, leave Adoptable) ([]DeadPollLease, error) {
	if max <= 0 || max > 10000 || grace < 0 || claimer == "" || leave.Session < 0 || leave.Overrun < 0 {
		return nil, fail(vocab.CodeInvalidInput,
			"claim of dead leases: max must be 1..10000, grace, session and overrun not negative and the claimer named")
	}
	var out []DeadPollLease
	err := s.read(ctx, "claim dead poll leases", func(q *dbq.Queries) error {
		rows, err := q.ClaimDeadPollLeases(ctx, dbq.ClaimDeadPollLeasesParams{Claimer: claimer, GraceMs: grace.Milliseconds(),
			SessionMs: leave.Session.Milliseconds(), OverrunMs: leave.Overrun.Milliseconds(), MaxLeases: int32(max)})
		for _, r := range rows {
			out = append(out, DeadPollLease{PollLease: PollLease{AccountKey: r.AccountKey, Holder: r.Holder, Epoch: r.Epoch,
				Attempt: r.Attempt, TaskToken: r.TaskToken}, HolderDied: r.HolderDied})
		}
		return err
	})
	return out, err
}

// ClaimedPollLease is a lease a supervisor claimed and no poll took since, with the holder
// it was claimed from.
type ClaimedPollLease struct {
	AccountKey  string
	ClaimedFrom string
}

// RecheckClaimedPollLeases returns at most max leases of active accounts that a supervisor
// claimed (or last rechecked) more than after ago from a worker that still lives, or more
// than afterDead ago from one that died or that were handed on or released as long ago
// (no worker to blame), and no poll took since: the retried or next poll went to a worker
// that cannot take it (a frozen one may still hold requests for work open at Temporal; one
// that picked the retry up may have died in turn). Each is returned to one
// caller among the workers running this at once, and not again for as long.
func (s *Store) RecheckClaimedPollLeases(ctx context.Context, after, afterDead time.Duration, max int) ([]ClaimedPollLease, error) {
	if max <= 0 || max > 10000 || after < 0 || afterDead < 0 {
		return nil, fail(vocab.CodeInvalidInput, "recheck of claimed leases: max must be 1..10000 and the delays not negative")
	}
	var out []ClaimedPollLease
	err := s.read(ctx, "recheck claimed poll leases", func(q *dbq.Queries) error {
		rows, err := q.RecheckClaimedPollLeases(ctx, after.Milliseconds(), afterDead.Milliseconds(), int32(max))
		for _, r := range rows {
			c := ClaimedPollLease{AccountKey: r.AccountKey}
			if r.ClaimedFrom != nil {
				c.ClaimedFrom = *r.ClaimedFrom
			}
			out = append(out, c)
		}
		return err
	})
	return out, err
}

// RegisterPollWorker records this worker process (holder) with the liveness key its
// PostgreSQL session holds now; a worker marked dead is alive again under the new key.
func (s *Store) RegisterPollWorker(ctx context.Context, holder string, key int64) error {
	if holder == "" || len(holder) > 200 || key <= 0 {
		return fail(vocab.CodeInvalidInput, "poll worker: holder must be 1..200 bytes and the key positive")
	}
	return s.read(ctx, "register poll worker", func(q *dbq.Queries) error {
		return q.RegisterPollWorker(ctx, holder, key)
	})
}

// DeadPollWorker is a worker process found dead: no session holds its liveness key.
type DeadPollWorker struct {
	Holder string
	DeadAt time.Time
}

// MarkDeadPollWorkers marks dead the workers (other than claimer) whose liveness key no
// session holds and returns them; each is returned to one caller among the workers
// running this at once.
func (s *Store) MarkDeadPollWorkers(ctx context.Context, claimer string) ([]DeadPollWorker, error) {
	if claimer == "" {
		return nil, fail(vocab.CodeInvalidInput, "poll worker: the claimer must be named")
	}
	var out []DeadPollWorker
	err := s.read(ctx, "mark dead poll workers", func(q *dbq.Queries) error {
		rows, err := q.MarkDeadPollWorkers(ctx, claimer)
		for _, r := range rows {
			w := DeadPollWorker{Holder: r.Holder}
			if r.DeadAt != nil {
				w.DeadAt = *r.DeadAt
			}
			out = append(out, w)
		}
		return err
	})
	return out, err
}

// TouchPollWorker records that this worker's supervisor ran now.
func (s *Store) TouchPollWorker(ctx context.Context, holder string) error {
	return s.read(ctx, "touch poll worker", func(q *dbq.Queries) error {
		return q.TouchPollWorker(ctx, holder)
	})
}

// PollLoad is the polling load the workers at work share.
type PollLoad struct {
	// Workers counts the workers at work now (their liveness session is held and their
	// supervisor ran lately: not a frozen one).
	Workers int
	// Accounts counts the active accounts: the bots to poll between them.
	Accounts int
	// Moving counts the leases claimed from a dead or frozen worker that no poll took yet.
	Moving int
}

// WorkersAtWork returns the holders of the workers at work now: alive, their supervisor
// seen (TouchPollWorker) within seenWithin.
func (s *Store) WorkersAtWork(ctx context.Context, seenWithin time.Duration) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.read(ctx, "workers at work", func(q *dbq.Queries) error {
		rows, err := q.WorkersAtWork(ctx, seenWithin.Milliseconds())
		for _, h := range rows {
			out[h] = true
		}
		return err
	})
	return out, err
}

// ReadPollLoad reads the polling load the workers at work share: those alive whose
// supervisor was seen (TouchPollWorker) within seenWithin.
func (s *Store) ReadPollLoad(ctx context.Context, seenWithin time.Duration) (PollLoad, error) {
	var out PollLoad
	err := s.read(ctx, "read poll load", func(q *dbq.Queries) error {
		r, err := q.PollLoad(ctx, seenWithin.Milliseconds())
		out = PollLoad{Workers: int(r.Workers), Accounts: int(r.Accounts), Moving: int(r.Moving)}
		return err
	})
	return out, err
}

// AnyDeadPollWorker reports whether a registered worker other than asker died (no session
// holds its liveness key) and is not marked dead yet.
func (s *Store) AnyDeadPollWorker(ctx context.Context, asker string) (bool, error) {
	var dead bool
	err := s.read(ctx, "look for a dead poll worker", func(q *dbq.Queries) error {
		var err error
		dead, err = q.AnyDeadPollWorker(ctx, asker)
		return err
	})
	return dead, err
}

// ForgetDeadPollWorkers deletes the rows of workers dead for longer than keep and returns
// how many it deleted.
func (s *Store) ForgetDeadPollWorkers(ctx context.Context, keep time.Duration) (int64, error) {
	var n int64
	err := s.read(ctx, "forget dead poll workers", func(q *dbq.Queries) (err error) {
		n, err = q.ForgetDeadPollWorkers(ctx, keep.Milliseconds())
		return err
	})
	return n, err
}

// ListUnleasedAccounts returns at most max active accounts whose poll lease is free (or
// was never taken), claimed by a supervisor or handed on or not.
func (s *Store) ListUnleasedAccounts(ctx context.Context, max int) ([]string, error) {
	if max <= 0 || max > 100000 {
		return nil, fail(vocab.CodeInvalidInput, "unleased accounts: max must be 1..100000")
	}
	var out []string
	err := s.read(ctx, "list unleased accounts", func(q *dbq.Queries) (err error) {
		out, err = q.ListUnleasedAccounts(ctx, int32(max))
		return err
	})
	return out, err
}
