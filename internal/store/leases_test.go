package store

import (
	"context"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func leaseStore(t *testing.T) (*Store, string) {
	t.Helper()
	keys := testkit.Keyring
	s, err := New(dbtest.NewPool(t), keys, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	a, err := enroll(context.Background(), s, time.Now(), ConfirmInput{ProviderAccountID: "lease@im.bot",
		OwnerPeerID: "lease-owner@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("lease-token")})
	if err != nil {
		t.Fatal(err)
	}
	return s, a.AccountKey
}

// enroll registers a bot through the enrollment path production takes: a login offer,
// its scan and its confirmation (generation 1).
func enroll(ctx context.Context, s *Store, now time.Time, in ConfirmInput) (Account, error) {
	in.OfferID = "qo_" + AccountKey(in.ProviderAccountID)
	in.AccountGeneration, in.MaxAccounts = 1, 1000
	if _, err := s.CreateLoginOffer(ctx, now, in.OfferID, "test", now.Add(time.Hour)); err != nil {
		return Account{}, err
	}
	if err := s.MarkOfferScanned(ctx, now, in.OfferID); err != nil {
		return Account{}, err
	}
	res, err := s.ConfirmEnrollment(ctx, now, in)
	return res.Account, err
}

// pollLeaseCounts counts the poll leases held live and held but expired.
func pollLeaseCounts(ctx context.Context, s *Store) (live, expired int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE holder IS NOT NULL AND expires_at > clock_timestamp()),
		count(*) FILTER (WHERE holder IS NOT NULL AND expires_at <= clock_timestamp()) FROM poll_leases`).Scan(&live, &expired)
	return live, expired, err
}

// One live holder at a time: a second claim is refused while the lease lives, whoever
// asks; a newer claim asks the holder to let go (seen at its renewal); an older one does not.
func TestAPollLeaseHasOneLiveHolderAndANewerClaimAsksForIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, key := leaseStore(t)
	a := PollLease{AccountKey: key, Holder: "worker-a", Epoch: 10, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, a, time.Minute); err != nil || !ok {
		t.Fatalf("first take: %v %v", ok, err)
	}
	older := PollLease{AccountKey: key, Holder: "worker-b", Epoch: 9, Attempt: 5}
	if ok, _, err := s.TakePollLease(ctx, older, time.Minute); err != nil || ok {
		t.Fatalf("older claim took a live lease: %v %v", ok, err)
	}
	kept, err := s.RenewPollLeases(ctx, "worker-a", []string{key}, time.Minute)
	if err != nil || len(kept) != 1 || kept[0].Wanted {
		t.Fatalf("renewal after an older claim %+v %v, want kept and not wanted", kept, err)
	}
	newer := PollLease{AccountKey: key, Holder: "worker-b", Epoch: 10, Attempt: 2}
	if ok, _, err := s.TakePollLease(ctx, newer, time.Minute); err != nil || ok {
		t.Fatalf("newer claim took a live lease: %v %v", ok, err)
	}
	kept, err = s.RenewPollLeases(ctx, "worker-a", []string{key}, time.Minute)
	if err != nil || len(kept) != 1 || !kept[0].Wanted {
		t.Fatalf("renewal after a newer claim %+v %v, want wanted", kept, err)
	}
	if ok, err := s.ReleasePollLease(ctx, a); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if ok, _, err := s.TakePollLease(ctx, newer, time.Minute); err != nil || !ok {
		t.Fatalf("newer claim after the release: %v %v", ok, err)
	}
	// The old holder's renewal no longer finds it; its release changes nothing.
	if kept, err := s.RenewPollLeases(ctx, "worker-a", []string{key}, time.Minute); err != nil || len(kept) != 0 {
		t.Fatalf("old holder renewed %+v %v", kept, err)
	}
	if ok, err := s.ReleasePollLease(ctx, a); err != nil || ok {
		t.Fatalf("old holder released the new holder's lease: %v %v", ok, err)
	}
}

// An expired lease may be taken by anyone, and a supervisor claims it exactly once (for an
// active account only) so that one poller is told to replace its dead poll.
func TestAnExpiredPollLeaseIsClaimedOnceAndMayBeTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, key := leaseStore(t)
	a := PollLease{AccountKey: key, Holder: "worker-a", Epoch: 1, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, a, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "supervisor", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed a live lease: %+v %v", dead, err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE poll_leases SET expires_at = clock_timestamp() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if live, expired, err := pollLeaseCounts(ctx, s); err != nil || expired != 1 || live != 0 {
		t.Fatalf("counts live %d expired %d %v", live, expired, err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "supervisor", time.Minute, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed within the grace: %+v %v", dead, err)
	}
	dead, err := s.ClaimDeadPollLeases(ctx, "supervisor", 0, 10, Adoptable{})
	if err != nil || len(dead) != 1 || dead[0].AccountKey != key || dead[0].Epoch != 1 {
		t.Fatalf("claim %+v %v", dead, err)
	}
	if again, err := s.ClaimDeadPollLeases(ctx, "supervisor", 0, 10, Adoptable{}); err != nil || len(again) != 0 {
		t.Fatalf("claimed twice: %+v %v", again, err)
	}
	if kept, err := s.RenewPollLeases(ctx, "worker-a", []string{key}, time.Minute); err != nil || len(kept) != 0 {
		t.Fatalf("the dead holder renewed a claimed lease: %+v %v", kept, err)
	}
	b := PollLease{AccountKey: key, Holder: "worker-b", Epoch: 2, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, b, time.Minute); err != nil || !ok {
		t.Fatalf("take after the claim: %v %v", ok, err)
	}
	// A paused account's expired lease is not claimed: its poller is not polling.
	if _, err := s.pool.Exec(ctx, "UPDATE poll_leases SET expires_at = clock_timestamp() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PauseAccount(ctx, time.Now(), key, 1, time.Now().Add(time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "supervisor", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed a paused account's lease: %+v %v", dead, err)
	}
}

// A worker's supervisor never claims a lease its own worker holds, expired or not: that
// poll is alive (after a database outage it may still hold a fetched page it has not
// committed; a replacement would fetch past it). Another worker's supervisor claims it.
func TestASupervisorNeverClaimsALeaseOfItsOwnWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, key := leaseStore(t)
	a := PollLease{AccountKey: key, Holder: "worker-a", Epoch: 1, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, a, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE poll_leases SET expires_at = clock_timestamp() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "worker-a", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("worker-a's supervisor claimed worker-a's lease: %+v %v", dead, err)
	}
	if _, expired, err := pollLeaseCounts(ctx, s); err != nil || expired != 1 {
		t.Fatalf("the lease is no longer held: expired %d %v", expired, err)
	}
	dead, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{})
	if err != nil || len(dead) != 1 || dead[0].AccountKey != key {
		t.Fatalf("another worker's claim: %+v %v", dead, err)
	}
}

func TestALeaseClaimWithBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, key := leaseStore(t)
	for _, l := range []PollLease{{AccountKey: "nope", Holder: "w"}, {AccountKey: key}} {
		if _, _, err := s.TakePollLease(ctx, l, time.Minute); CodeOf(err) != vocab.CodeInvalidInput {
			t.Fatalf("take %+v: %v, want invalid_input", l, err)
		}
	}
	if _, _, err := s.TakePollLease(ctx, PollLease{AccountKey: key, Holder: "w"}, time.Millisecond); CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("ttl 1ms: %v", err)
	}
	if live, expired, err := pollLeaseCounts(ctx, s); err != nil || live+expired != 0 {
		t.Fatalf("counts live %d expired %d %v", live, expired, err)
	}
}
