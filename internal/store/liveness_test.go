package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// livenessSession opens a session of its own holding the advisory lock on a random key
// in an open transaction, as a worker's liveness session does; end closes it as a
// process's death does.
func livenessSession(t *testing.T) (key int64, end func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	key = rand.Int64N(1<<62-1) + 1
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1::bigint)", key).Scan(&ok); err != nil || !ok {
		t.Fatalf("liveness lock: %v %v", ok, err)
	}
	var once sync.Once
	end = func() { once.Do(func() { _ = conn.Close(ctx) }) }
	t.Cleanup(end)
	return key, end
}

// A frozen or cut-off holder keeps its liveness session, so nothing shows it dead: its
// lease is adopted once it expired more than the grace ago, under its attempt, and only
// then; the store then tells the holder (should it thaw) that another worker holds its
// attempt, and tells no one else so.
func TestAnExpiredLeaseOfAHolderStillLiveIsAdoptedAfterTheGraceAndItsAttemptShowsAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	frozenKey, _ := livenessSession(t)
	adopterKey, _ := livenessSession(t)
	frozen := PollLease{AccountKey: acct, Holder: "worker-frozen", Epoch: 7, Attempt: 3, HolderKey: frozenKey,
		TaskToken: []byte("frozen-attempt-3"), Generation: 1}
	if ok, _, err := s.TakePollLease(ctx, frozen, time.Hour); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	adopt := func(grace time.Duration) []AdoptedPollLease {
		t.Helper()
		got, err := s.AdoptDeadPollLeases(ctx, "worker-b", adopterKey, time.Minute, grace, 10*time.Minute, 30*time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := adopt(0); len(got) != 0 {
		t.Fatalf("adopted the live lease of a live holder: %+v", got)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE poll_leases SET expires_at = clock_timestamp() - interval '5 seconds' WHERE account_key = $1", acct); err != nil {
		t.Fatal(err)
	}
	if got := adopt(time.Minute); len(got) != 0 {
		t.Fatalf("adopted a lease expired for less than the grace: %+v", got)
	}
	if adopted, err := s.PollAttemptAdopted(ctx, frozen); err != nil || adopted {
		t.Fatalf("the frozen holder's attempt shows adopted before any adoption: %v %v", adopted, err)
	}
	got := adopt(time.Second)
	if len(got) != 1 || got[0].DeadHolder != "worker-frozen" || got[0].Attempt != 3 || got[0].Epoch != 7 ||
		string(got[0].TaskToken) != "frozen-attempt-3" || got[0].HolderKey != adopterKey {
		t.Fatalf("adopted %+v, want the frozen holder's attempt under the adopter's key", got)
	}
	if adopted, err := s.PollAttemptAdopted(ctx, frozen); err != nil || !adopted {
		t.Fatalf("the thawed holder is not told its attempt was adopted: %v %v", adopted, err)
	}
	// The adopter itself, and another attempt of the same bot, are not told so.
	mine := got[0].PollLease
	if adopted, err := s.PollAttemptAdopted(ctx, mine); err != nil || adopted {
		t.Fatalf("the adopter is told its own attempt was adopted: %v %v", adopted, err)
	}
	older := frozen
	older.Attempt = 2
	if adopted, err := s.PollAttemptAdopted(ctx, older); err != nil || adopted {
		t.Fatalf("an earlier attempt shows adopted: %v %v", adopted, err)
	}
	// The adopted lease is live under a live key: nobody adopts or claims it.
	if again := adopt(0); len(again) != 0 {
		t.Fatalf("adopted twice: %+v", again)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "worker-c", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("the adopted lease was claimed: %+v %v", dead, err)
	}
	// Once the adopter released it, the thawed holder is no longer told so.
	if ok, err := s.ReleasePollLease(ctx, mine); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if adopted, err := s.PollAttemptAdopted(ctx, frozen); err != nil || adopted {
		t.Fatalf("the attempt shows adopted after the adopter let go: %v %v", adopted, err)
	}
	if _, err := s.PollAttemptAdopted(ctx, PollLease{AccountKey: acct}); CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("an adoption asked of no holder: %v", err)
	}
}

// A lease taken under a liveness key is claimed as soon as no session holds that key
// (its worker died), long before it expires, exactly once, with the task token of the
// attempt that held it; while the session lives it is never claimed. A claimed lease is
// not "unleased" (its attempt is failed through the token); a released one is.
func TestALeaseWhoseHoldersSessionEndedIsClaimedAtOnceWithItsTaskToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	key, die := livenessSession(t)
	token := []byte("task-token-of-attempt-3")
	l := PollLease{AccountKey: acct, Holder: "worker-a", Epoch: 5, Attempt: 3, HolderKey: key, TaskToken: token}
	if ok, _, err := s.TakePollLease(ctx, l, time.Hour); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed the lease of a live session: %+v %v", dead, err)
	}
	die()
	var dead []DeadPollLease
	// The server ends the backend just after the client's socket closes.
	testkit.Eventually(t, "the dead holder's lease claimed", 10*time.Second, func() (bool, error) {
		var err error
		dead, err = s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{})
		return len(dead) > 0, err
	})
	if len(dead) != 1 || dead[0].AccountKey != acct || !dead[0].HolderDied || dead[0].Holder != "worker-a" ||
		dead[0].Epoch != 5 || dead[0].Attempt != 3 || string(dead[0].TaskToken) != string(token) {
		t.Fatalf("claim %+v", dead)
	}
	if again, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{}); err != nil || len(again) != 0 {
		t.Fatalf("claimed twice: %+v %v", again, err)
	}
	// A claimed lease is free: the retry Temporal hands out may go to a worker that dies
	// before it takes the lease, and the peer that marks that one dead looks for it here.
	if free, err := s.ListUnleasedAccounts(ctx, 10); err != nil || len(free) != 1 || free[0] != acct {
		t.Fatalf("a claimed lease not listed as unleased: %v %v", free, err)
	}
	next := PollLease{AccountKey: acct, Holder: "worker-b", Epoch: 5, Attempt: 4}
	if ok, _, err := s.TakePollLease(ctx, next, time.Hour); err != nil || !ok {
		t.Fatalf("the retry's take: %v %v", ok, err)
	}
	if ok, err := s.ReleasePollLease(ctx, next); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if free, err := s.ListUnleasedAccounts(ctx, 10); err != nil || len(free) != 1 || free[0] != acct {
		t.Fatalf("a released lease is not listed as unleased: %v %v", free, err)
	}
	// A lease without a key moves only when it expires.
	bare := PollLease{AccountKey: acct, Holder: "worker-c", Epoch: 6, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, bare, time.Hour); err != nil || !ok {
		t.Fatalf("take without a key: %v %v", ok, err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed a live lease without a key: %+v %v", dead, err)
	}
}

// A worker whose liveness session ended is marked dead by exactly one of the supervisors
// that look at once, never while its session lives and never by itself; registering again
// with a new key makes it alive. The quick look between scans sees the death until it is
// marked, and the polling load counts only live workers whose supervisor ran lately.
func TestADeadWorkerIsMarkedDeadByExactlyOneSupervisor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := leaseStore(t)
	key, die := livenessSession(t)
	if err := s.RegisterPollWorker(ctx, "worker-a", key); err != nil {
		t.Fatal(err)
	}
	if dead, err := s.MarkDeadPollWorkers(ctx, "worker-b"); err != nil || len(dead) != 0 {
		t.Fatalf("a live worker marked dead: %+v %v", dead, err)
	}
	if seen, err := s.AnyDeadPollWorker(ctx, "worker-b"); err != nil || seen {
		t.Fatalf("a death seen while the worker lives: %v %v", seen, err)
	}
	if load, err := s.ReadPollLoad(ctx, time.Hour); err != nil || load.Workers != 0 {
		t.Fatalf("poll load counts a worker whose supervisor never ran: %+v %v", load, err)
	}
	if err := s.TouchPollWorker(ctx, "worker-a"); err != nil {
		t.Fatal(err)
	}
	if load, err := s.ReadPollLoad(ctx, time.Hour); err != nil || load.Workers != 1 || load.Accounts != 1 {
		t.Fatalf("poll load with one live worker and one bot: %+v %v", load, err)
	}
	if load, err := s.ReadPollLoad(ctx, 0); err != nil || load.Workers != 0 {
		t.Fatalf("poll load counts a worker not seen lately (frozen): %+v %v", load, err)
	}
	if at, err := s.WorkersAtWork(ctx, time.Hour); err != nil || !at["worker-a"] || len(at) != 1 {
		t.Fatalf("workers at work: %v %v", at, err)
	}
	if at, err := s.WorkersAtWork(ctx, 0); err != nil || len(at) != 0 {
		t.Fatalf("a worker not seen lately counted at work: %v %v", at, err)
	}
	die()
	testkit.Eventually(t, "the death seen", 10*time.Second, func() (bool, error) {
		seen, err := s.AnyDeadPollWorker(ctx, "worker-b")
		return seen, err
	})
	if seen, err := s.AnyDeadPollWorker(ctx, "worker-a"); err != nil || seen {
		t.Fatalf("a worker sees its own death: %v %v", seen, err)
	}
	if load, err := s.ReadPollLoad(ctx, time.Hour); err != nil || load.Workers != 0 {
		t.Fatalf("poll load counts a dead worker: %+v %v", load, err)
	}
	var marks sync.Map
	testkit.Eventually(t, "the dead worker marked", 10*time.Second, func() (bool, error) {
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dead, err := s.MarkDeadPollWorkers(ctx, "supervisor-"+string(rune('a'+i)))
				if err != nil {
					t.Error(err)
				}
				for _, d := range dead {
					if _, dup := marks.LoadOrStore(d.Holder, i); dup {
						t.Errorf("%s marked dead twice", d.Holder)
					}
				}
			}()
		}
		wg.Wait()
		_, ok := marks.Load("worker-a")
		return ok || t.Failed(), nil
	})
	if dead, err := s.MarkDeadPollWorkers(ctx, "worker-a"); err != nil || len(dead) != 0 {
		t.Fatalf("marked dead again: %+v %v", dead, err)
	}
	if seen, err := s.AnyDeadPollWorker(ctx, "worker-b"); err != nil || seen {
		t.Fatalf("a death seen again once marked: %v %v", seen, err)
	}
	key2, _ := livenessSession(t)
	if err := s.RegisterPollWorker(ctx, "worker-a", key2); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ForgetDeadPollWorkers(ctx, 0); err != nil || n != 0 {
		t.Fatalf("forgot a worker alive again: %d %v", n, err)
	}
	if dead, err := s.MarkDeadPollWorkers(ctx, "worker-b"); err != nil || len(dead) != 0 {
		t.Fatalf("a worker alive again marked dead: %+v %v", dead, err)
	}
}

// A claimed lease no poll took is due for a recheck after the short delay when it was
// claimed from a worker that still lives (a frozen one may be handed its own poll's
// retry), and only after the long one when its worker died (only a second death leaves it
// free, and a crash's burst of retries must not be looked up one by one meanwhile).
func TestAClaimedLeaseOfADeadWorkerIsRecheckedOnlyAfterTheLongerDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	key, die := livenessSession(t)
	if err := s.RegisterPollWorker(ctx, "worker-a", key); err != nil {
		t.Fatal(err)
	}
	l := PollLease{AccountKey: acct, Holder: "worker-a", Epoch: 1, Attempt: 1, HolderKey: key}
	if ok, _, err := s.TakePollLease(ctx, l, time.Second); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	// The holder lives but its lease expired (frozen): claimed, and due after the short delay.
	testkit.Eventually(t, "the expired lease claimed", 10*time.Second, func() (bool, error) {
		dead, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{})
		return len(dead) == 1 && !dead[0].HolderDied, err
	})
	if load, err := s.ReadPollLoad(ctx, time.Hour); err != nil || load.Moving != 1 {
		t.Fatalf("a claimed lease no poll took is not counted as moving: %+v %v", load, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, 0, time.Hour, 10); err != nil || len(due) != 1 || due[0].ClaimedFrom != "worker-a" {
		t.Fatalf("a lease claimed from a living worker not due after the short delay: %+v %v", due, err)
	}
	// Once the worker is dead the same claim waits for the long delay.
	die()
	testkit.Eventually(t, "the worker's death seen", 10*time.Second, func() (bool, error) {
		return s.AnyDeadPollWorker(ctx, "worker-b")
	})
	if due, err := s.RecheckClaimedPollLeases(ctx, 0, time.Hour, 10); err != nil || len(due) != 0 {
		t.Fatalf("a lease claimed from a dead worker due before the long delay: %+v %v", due, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, time.Hour, 0, 10); err != nil || len(due) != 1 {
		t.Fatalf("a lease claimed from a dead worker not due after the long delay: %+v %v", due, err)
	}
}

// A lease released at the end of a poll is free since then, with no worker to blame: should
// the bot's next poll go to a worker that does not take it up (a frozen one still holds
// requests for work open at Temporal), the recheck finds it after the longer delay, and
// not once a poll took it.
func TestAReleasedLeaseNoPollTookIsDueForARecheckAfterTheLongerDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	l := PollLease{AccountKey: acct, Holder: "worker-a", Epoch: 1, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, l, time.Minute); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, 0, 0, 10); err != nil || len(due) != 0 {
		t.Fatalf("a held lease due for a recheck: %+v %v", due, err)
	}
	if ok, err := s.ReleasePollLease(ctx, l); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, 0, time.Hour, 10); err != nil || len(due) != 0 {
		t.Fatalf("a released lease due before the longer delay: %+v %v", due, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, time.Hour, 0, 10); err != nil || len(due) != 1 || due[0].ClaimedFrom != "" {
		t.Fatalf("a released lease no poll took not due after the longer delay: %+v %v", due, err)
	}
	next := PollLease{AccountKey: acct, Holder: "worker-b", Epoch: 2, Attempt: 1}
	if ok, _, err := s.TakePollLease(ctx, next, time.Minute); err != nil || !ok {
		t.Fatalf("take by the next poll: %v %v", ok, err)
	}
	if due, err := s.RecheckClaimedPollLeases(ctx, 0, 0, 10); err != nil || len(due) != 0 {
		t.Fatalf("a lease the next poll took due for a recheck: %+v %v", due, err)
	}
}

// A dead holder's poll is adopted by exactly one worker, under the same attempt (epoch,
// attempt, task token, generation and probe kept), with the adopter's liveness key and
// what is left of the attempt's session; a lease that cannot go on under its attempt is
// left to the claim: one with no task token or generation (an older release's), one a
// newer poll asked for, one whose session ended longer than the overrun ago, and one
// whose holder lives. A claimer that can adopt leaves the adoptable poll to adoption.
func TestADeadHoldersPollIsAdoptedOnceUnderItsAttemptOrLeftToTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	others := make([]string, 4)
	for i := range others {
		a, err := enroll(ctx, s, time.Now(), ConfirmInput{ProviderAccountID: fmt.Sprintf("adopt-%d@im.bot", i),
			OwnerPeerID: fmt.Sprintf("adopt-owner-%d@im.wechat", i), BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("adopt-token")})
		if err != nil {
			t.Fatal(err)
		}
		others[i] = a.AccountKey
	}
	deadKey, die := livenessSession(t)
	liveKey, _ := livenessSession(t)
	token := []byte("task-token-of-attempt-2")
	take := func(l PollLease) {
		t.Helper()
		if ok, _, err := s.TakePollLease(ctx, l, time.Hour); err != nil || !ok {
			t.Fatalf("take %+v: %v %v", l, ok, err)
		}
	}
	take(PollLease{AccountKey: acct, Holder: "worker-a", Epoch: 5, Attempt: 2, HolderKey: deadKey, TaskToken: token, Generation: 1, Probe: true})
	take(PollLease{AccountKey: others[0], Holder: "worker-a", Epoch: 5, Attempt: 1, HolderKey: deadKey}) // no token nor generation
	take(PollLease{AccountKey: others[1], Holder: "worker-a", Epoch: 5, Attempt: 1, HolderKey: deadKey, TaskToken: token, Generation: 1})
	if ok, _, err := s.TakePollLease(ctx, PollLease{AccountKey: others[1], Holder: "worker-c", Epoch: 6, Attempt: 1}, time.Hour); err != nil || ok {
		t.Fatalf("a newer poll took a held lease: %v %v", ok, err) // it asks for it instead
	}
	take(PollLease{AccountKey: others[2], Holder: "worker-a", Epoch: 5, Attempt: 1, HolderKey: deadKey, TaskToken: token, Generation: 1})
	if _, err := s.pool.Exec(ctx, "UPDATE poll_leases SET taken_at = clock_timestamp() - interval '11 minutes' WHERE account_key = $1", others[2]); err != nil {
		t.Fatal(err)
	}
	take(PollLease{AccountKey: others[3], Holder: "worker-d", Epoch: 5, Attempt: 1, HolderKey: liveKey, TaskToken: token, Generation: 1})

	if got, err := s.AdoptDeadPollLeases(ctx, "worker-b", liveKey, time.Minute, 0, 10*time.Minute, 30*time.Second, 10); err != nil || len(got) != 0 {
		t.Fatalf("adopted the polls of a live holder: %+v %v", got, err)
	}
	die()
	// A claimer that can adopt claims the three that cannot be adopted and leaves the
	// adoptable poll to adoption (its own next scan, or a peer's).
	claimed := map[string]bool{}
	testkit.Eventually(t, "the dead holder's leases that cannot be adopted claimed", 10*time.Second, func() (bool, error) {
		dead, err := s.ClaimDeadPollLeases(ctx, "worker-b", 0, 10, Adoptable{Session: 10 * time.Minute, Overrun: 30 * time.Second})
		for _, d := range dead {
			claimed[d.AccountKey] = true
		}
		return len(claimed) >= 3, err
	})
	if len(claimed) != 3 || !claimed[others[0]] || !claimed[others[1]] || !claimed[others[2]] {
		t.Fatalf("claimed %v, want the three dead leases that cannot be adopted", claimed)
	}
	var got []AdoptedPollLease
	testkit.Eventually(t, "the dead holder's poll adopted", 10*time.Second, func() (bool, error) {
		var err error
		got, err = s.AdoptDeadPollLeases(ctx, "worker-b", liveKey, time.Minute, 0, 10*time.Minute, 30*time.Second, 10)
		return len(got) > 0, err
	})
	if len(got) != 1 {
		t.Fatalf("adopted %+v, want only the lease that names its attempt and input", got)
	}
	g := got[0]
	if g.AccountKey != acct || g.Holder != "worker-b" || g.HolderKey != liveKey || g.DeadHolder != "worker-a" || g.Epoch != 5 ||
		g.Attempt != 2 || string(g.TaskToken) != string(token) || g.Generation != 1 || !g.Probe ||
		g.Remaining <= 9*time.Minute || g.Remaining > 10*time.Minute {
		t.Fatalf("adopted %+v", g)
	}
	if again, err := s.AdoptDeadPollLeases(ctx, "worker-c", liveKey, time.Minute, 0, 10*time.Minute, 30*time.Second, 10); err != nil || len(again) != 0 {
		t.Fatalf("adopted twice: %+v %v", again, err)
	}
	// The adopter holds the lease as the attempt did, under its own liveness key: it renews
	// it, and nobody may take it.
	if kept, err := s.RenewPollLeases(ctx, "worker-b", []string{acct}, time.Minute); err != nil || len(kept) != 1 || kept[0].Attempt != 2 {
		t.Fatalf("renewal of the adopted lease: %+v %v", kept, err)
	}
	if free, err := s.ListUnleasedAccounts(ctx, 10); err != nil || len(free) != 3 || slices.Contains(free, acct) {
		t.Fatalf("free leases after the adoption: %v %v, want the three claimed", free, err)
	}
	if dead, err := s.ClaimDeadPollLeases(ctx, "worker-c", 0, 10, Adoptable{}); err != nil || len(dead) != 0 {
		t.Fatalf("claimed %+v %v after the adoption and the claim", dead, err)
	}
	if _, err := s.AdoptDeadPollLeases(ctx, "", 77, time.Minute, 0, time.Minute, 0, 10); CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("adoption without an adopter: %v", err)
	}
}

// A lease another worker adopted after an adoption statement began is not adopted again
// by that statement: READ COMMITTED locks the row's new version and evaluates the
// conditions again on it, so the liveness test must be one on the row (its new holder's key
// is live). With a NOT EXISTS anti-join the new holder's key passed as dead and two
// workers polled the same bots (a chaos run). The statement is held, after its snapshot,
// inside ilk_live_keys (replaced here to wait on an advisory lock the test holds) while the
// other adoption commits.
func TestALeaseAdoptedWhileAnotherAdoptionRunsIsNotAdoptedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, acct := leaseStore(t)
	deadKey, die := livenessSession(t)
	keyB, _ := livenessSession(t)
	keyC, _ := livenessSession(t)
	dead := PollLease{AccountKey: acct, Holder: "worker-a", Epoch: 5, Attempt: 1, HolderKey: deadKey, TaskToken: []byte("t"), Generation: 1}
	if ok, _, err := s.TakePollLease(ctx, dead, time.Hour); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	die()
	testkit.Eventually(t, "the holder's key gone", 10*time.Second, func() (bool, error) {
		var live bool
		err := s.pool.QueryRow(ctx, "SELECT $1::bigint IN (SELECT ilk_live_keys())", deadKey).Scan(&live)
		return !live, err
	})

	gate := rand.Int64N(1<<62) + 1
	if _, err := s.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION ilk_live_keys() RETURNS SETOF bigint LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
    PERFORM pg_advisory_xact_lock(`+fmt.Sprint(gate)+`);
    RETURN QUERY SELECT ((k.classid::bigint << 32) | k.objid::bigint) FROM pg_locks k
        WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
          AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
END $f$`); err != nil {
		t.Fatal(err)
	}
	holder, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", gate); err != nil {
		t.Fatal(err)
	}
	type result struct {
		got []AdoptedPollLease
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := s.AdoptDeadPollLeases(ctx, "worker-c", keyC, time.Minute, 0, 10*time.Minute, 0, 10)
		done <- result{got, err}
	}()
	testkit.Eventually(t, "worker-c's adoption waiting inside its statement", 10*time.Second, func() (bool, error) {
		var waiting bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND ((classid::bigint << 32) | objid::bigint) = $1)`, gate).Scan(&waiting)
		return waiting, err
	})
	// Meanwhile worker-b adopts the lease and commits.
	if n, err := s.pool.Exec(ctx, "UPDATE poll_leases SET holder = 'worker-b', holder_key = $1 WHERE account_key = $2", keyB, acct); err != nil || n.RowsAffected() != 1 {
		t.Fatalf("worker-b's adoption: %v %v", n, err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", gate); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.got) != 0 {
		t.Fatalf("worker-c adopted %+v (%v) a lease worker-b had adopted", r.got, r.err)
	}
	var h string
	if err := s.pool.QueryRow(ctx, "SELECT holder FROM poll_leases WHERE account_key = $1", acct).Scan(&h); err != nil || h != "worker-b" {
		t.Fatalf("holder %q (%v), want worker-b", h, err)
	}
}
