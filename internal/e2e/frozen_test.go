package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// frozenLeaseTTL is the poll lease ttl of the frozen-worker test: a frozen process keeps
// its PostgreSQL sessions, so its peers see nothing until its leases expire.
const frozenLeaseTTL = 6 * time.Second

// frozenMoveSlack is how long after the ttl a frozen worker's bots may take to be polled
// by another worker: the holder's last renewal came up to ttl/3 before the freeze (so
// the leases expire by ttl after it), then the peer's scan (every second), its adoption of
// the poll and the getupdates.
const frozenMoveSlack = 5 * time.Second

// endedPollRE matches what a thawed worker logs as each of its polls ends: the poll finds
// its lease lost (before a getupdates, or as its long poll in flight is cut) or the page it
// brought refused (the cursor moved on under the survivor); it then leaves its attempt to
// the survivor that adopted it, or the SDK logs the activity's error under the poller's
// workflow id; in the workers' text log format.
var endedPollRE = regexp.MustCompile(`(?:msg="(?:poll lease lost|this poll's lease expired)[^"]*".* account=|ActivityType=PollAccount.*|WorkflowID=ilink-account/[^/ ]+/)(ilk_[0-9a-f]+)`)

// A worker process that is alive but frozen (SIGSTOP) keeps its PostgreSQL sessions, so
// its liveness session says nothing: its bots move only when their leases expire. With a
// 6 s lease ttl each of its bots is polled by the other worker within ttl + 5 s of the
// freeze. Thawed (SIGCONT) after that, it polls none of them: its leases are past their
// local validity (0.8 × ttl after their last renewal), so each of its polls stops before
// its next getupdates, and no bot has two getupdates in flight at once from the thaw on.
// The survivor holds every lease, and a message sent to each moved bot is answered once.
func TestAFrozenWorkersBotsMoveAfterTheLeaseTTLAndItPollsNoneOfThemWhenThawed(t *testing.T) {
	t.Parallel()
	var arrivals *pollArrivals
	r := newProcRigWith(t, 2*time.Second, store.DefaultLimits(), procRigOptions{Wrap: func(h http.Handler) http.Handler {
		arrivals = newPollArrivals(h)
		return arrivals
	}})
	bots := addBots(t, r, 6)
	env := r.baseEnv(map[string]string{"ILINKFLOW_SEND_GAP": "5ms", "ILINKFLOW_HANDLER": "echo",
		"ILINKFLOW_POLL_LEASE_TTL": frozenLeaseTTL.String()})
	workers := []*crashWorker{{t: t, bin: r.bin, env: env, tap: r.tap}, {t: t, bin: r.bin, env: env, tap: r.tap}}
	for _, w := range workers {
		w.launch()
	}
	testkit.Eventually(t, "every bot's lease held", time.Minute, func() (bool, error) {
		held := leaseHolders(t, r)
		return len(held) == len(bots), fmt.Errorf("%d of %d leases held", len(held), len(bots))
	})
	accountOf := accountBots(t, r, bots)

	// The victim: the worker holding more leases (the second when they split evenly).
	held := leaseHolders(t, r)
	count := map[int]int{}
	for _, pid := range held {
		count[pid]++
	}
	victim, survivor := workers[1], workers[0]
	if count[workers[0].current().pid] > count[workers[1].current().pid] {
		victim, survivor = workers[0], workers[1]
	}
	vp, survivorPID := victim.current(), survivor.current().pid
	var orphans []string
	for key, pid := range held {
		if pid == vp.pid {
			orphans = append(orphans, key)
		}
	}
	sort.Strings(orphans)
	if len(orphans) == 0 {
		t.Fatalf("the victim holds no lease: %v", held)
	}

	// The polls the victim holds as it freezes: none of them may hold a lease after the thaw.
	frozenPolls := leasePolls(t, r, vp.pid)
	before, err := r.ctl.Stats(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, the frozen process is continued before the workers are stopped
	// (cleanups run last registered first, so this runs before crashWorker.stop's SIGTERM,
	// which a stopped process would only act on once continued).
	t.Cleanup(func() { _ = vp.cmd.Process.Signal(syscall.SIGCONT) })
	if err := vp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the victim stopped", 5*time.Second, func() (bool, error) {
		st, err := procState(vp.pid)
		return st == "T", fmt.Errorf("state %q (%v)", st, err)
	})
	stopped := time.Now()

	// Each bot of the frozen worker, from the freeze until its next getupdates (any
	// arriving from then on is the survivor's: the frozen process sends none).
	moved := map[string]time.Duration{}
	unmoved := func() []string {
		var out []string
		for _, key := range orphans {
			if _, ok := moved[key]; ok {
				continue
			}
			if at, ok := arrivals.after(accountOf[key].Token, stopped); ok {
				moved[key] = at.Sub(stopped)
				continue
			}
			out = append(out, key)
		}
		return out
	}
	worstOf := func() time.Duration {
		var w time.Duration
		for _, d := range moved {
			w = max(w, d)
		}
		return w
	}
	// The freeze is a deliberate interval: ttl + 6 s, or 2 s past the last bot's move when
	// that comes later, so that the thawed worker meets a survivor polling every one of its
	// bots; at most frozenGiveUp when a bot is not polled again at all.
	const frozenGiveUp = time.Minute
	tick := time.NewTicker(50 * time.Millisecond)
	stuck := unmoved()
	for ; len(stuck) > 0 && time.Since(stopped) < frozenGiveUp; stuck = unmoved() {
		<-tick.C
	}
	tick.Stop()
	if len(stuck) > 0 {
		// Each stuck bot's poll activity says where its retry went.
		var stuckWhy []string
		for _, key := range stuck {
			stuckWhy = append(stuckWhy, key+": "+pollActivities(t, r, key, vp.pid))
		}
		t.Errorf("%d of the %d bots of the frozen worker not polled again %v after the freeze (bound %v), so it is thawed now:\n%s",
			len(stuck), len(orphans), time.Since(stopped).Round(time.Millisecond), frozenLeaseTTL+frozenMoveSlack, strings.Join(stuckWhy, "\n"))
	} else {
		thawAt := stopped.Add(max(frozenLeaseTTL+6*time.Second, worstOf()+2*time.Second))
		freeze := time.NewTimer(time.Until(thawAt))
		<-freeze.C
	}
	movedFrozen := worstOf()

	atThaw, err := r.ctl.Stats(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	logFrom := len(vp.log.String())
	if err := vp.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	frozenFor := thawed.Sub(stopped)

	// The thawed worker acts at once: each of its polls ends, finding its lease lost before
	// its next getupdates (or as the keeper's first renewal cuts its long poll) or the page
	// it brought refused, and it is logged. Bound: three renewal periods (the ttl).
	var noticed int
	testkit.Eventually(t, "every poll of the thawed worker ended", frozenLeaseTTL, func() (bool, error) {
		if vp.hasExited() {
			return false, fmt.Errorf("the thawed worker exited: %v", vp.exitErr)
		}
		lost := map[string]bool{}
		for _, m := range endedPollRE.FindAllStringSubmatch(vp.log.String()[logFrom:], -1) {
			lost[m[1]] = true
		}
		var missing []string
		for _, key := range orphans {
			if !lost[key] {
				missing = append(missing, key)
			}
		}
		noticed = len(orphans) - len(missing)
		return len(missing) == 0, fmt.Errorf("no end of a poll logged for %v", missing)
	})
	noticedAfter := time.Since(thawed)
	if len(stuck) > 0 {
		testkit.Eventually(t, "every bot of the thawed worker polled again", time.Minute, func() (bool, error) {
			left := unmoved()
			return len(left) == 0, fmt.Errorf("not polled since the freeze: %v", left)
		})
		for _, key := range stuck {
			t.Logf("the bot of %s was polled again %v after the thaw", key, (moved[key] - frozenFor).Round(time.Millisecond))
		}
	}
	after, err := r.ctl.Stats(r.ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Overlaps that began during the freeze (the frozen process's long poll still open at
	// the simulator while the survivor polls) are reported, not failed.
	duringFreeze := atThaw.GetUpdatesOverlaps - before.GetUpdatesOverlaps
	afterThaw := after.GetUpdatesOverlaps - atThaw.GetUpdatesOverlaps
	if after.GetUpdatesOverlaps > 0 {
		for _, b := range bots {
			bs, err := r.ctl.BotState(r.ctx, b.BotID)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range bs.OverlapsAt {
				t.Logf("getupdates overlap of the bot of %s at %+v from the freeze (thawed at %+v)", keyOf(accountOf, b.BotID),
					at.Sub(stopped).Round(time.Millisecond), frozenFor.Round(time.Millisecond))
			}
		}
	}

	// The thawed worker holds no lease under a poll it had when it froze (it may hold newer
	// ones: once at work again it gets its share of the bots back, handed on by the
	// survivor).
	for key, poll := range leasePolls(t, r, vp.pid) {
		if poll == frozenPolls[key] {
			t.Errorf("lease of %s still held after the thaw by the poll the frozen worker had (epoch %d attempt %d; the survivor is %d): %s",
				key, poll.epoch, poll.attempt, survivorPID, pollActivities(t, r, key, vp.pid))
		}
	}

	var perBot []string
	for _, key := range orphans {
		perBot = append(perBot, fmt.Sprintf("%s %v", key, moved[key].Round(time.Millisecond)))
	}
	worst := worstOf()
	t.Logf("SIGSTOP of the worker holding %d of %d bots (lease ttl %v): each polled again after [%s], the last %v after the freeze (bound %v; %d polled by the survivor while it was frozen, the last %v after the freeze)",
		len(orphans), len(bots), frozenLeaseTTL, strings.Join(perBot, ", "), worst.Round(time.Millisecond), frozenLeaseTTL+frozenMoveSlack,
		len(orphans)-len(stuck), movedFrozen.Round(time.Millisecond))
	t.Logf("frozen for %v; getupdates overlaps before the freeze %d, during it %d, after the thaw %d; the thawed worker logged the end of its %d polls within %v of SIGCONT",
		frozenFor.Round(time.Millisecond), before.GetUpdatesOverlaps, duringFreeze, afterThaw, noticed, noticedAfter.Round(time.Millisecond))
	if worst > frozenLeaseTTL+frozenMoveSlack {
		t.Errorf("a frozen worker's bot was polled again %v after the freeze, want within the lease ttl + %v = %v",
			worst, frozenMoveSlack, frozenLeaseTTL+frozenMoveSlack)
	}
	if afterThaw != 0 {
		t.Errorf("%d getupdates overlapped another of their bot after the thaw (the last at %+v from SIGCONT), want none",
			afterThaw, after.LastGetUpdatesOverlap.Sub(thawed).Round(time.Millisecond))
	}

	for _, key := range orphans {
		if _, err := r.ctl.InjectText(r.ctx, accountOf[key].BotID, "", "still there after the freeze?"); err != nil {
			t.Fatal(err)
		}
	}
	answered := func(key string) (int, error) {
		sent, err := r.ctl.Sent(r.ctx, accountOf[key].BotID)
		return len(sent), err
	}
	testkit.Eventually(t, "a message to each moved bot answered", time.Minute, func() (bool, error) {
		for _, key := range orphans {
			n, err := answered(key)
			if err != nil || n == 0 {
				return false, fmt.Errorf("bot of %s: %d answers (%v)", key, n, err)
			}
		}
		return true, nil
	})
	for _, key := range orphans {
		if n, err := answered(key); err != nil || n != 1 {
			t.Errorf("bot of %s answered %d times (%v), want once", key, n, err)
		}
	}
}

// accountBots maps each account key to its bot.
func accountBots(t *testing.T, r *procRig, bots []ilinksim.BotInfo) map[string]ilinksim.BotInfo {
	t.Helper()
	byBot := map[string]ilinksim.BotInfo{}
	for _, b := range bots {
		byBot[b.BotID] = b
	}
	rows, err := r.pool.Query(r.ctx, "SELECT account_key, provider_account_id FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]ilinksim.BotInfo{}
	for rows.Next() {
		var key, botID string
		if err := rows.Scan(&key, &botID); err != nil {
			t.Fatal(err)
		}
		out[key] = byBot[botID]
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pollActivities describes the pending activities of the bot's poller (attempt, state,
// the worker that last picked it up, its lease row), for a bound missed.
func pollActivities(t *testing.T, r *procRig, key string, frozenPID int) string {
	t.Helper()
	inst, err := r.store.Installation(r.ctx)
	if err != nil {
		return err.Error()
	}
	desc, err := r.tc.DescribeWorkflow(r.ctx, inst.PollerID(key), "")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, a := range desc.RawResponse.GetPendingActivities() {
		who := a.GetLastWorkerIdentity()
		if holderPID(who) == frozenPID {
			who += " (the frozen worker)"
		}
		out = append(out, fmt.Sprintf("%s attempt %d %s, last picked up by %s at %v, last failure %q",
			a.GetActivityType().GetName(), a.GetAttempt(), a.GetState(), who,
			a.GetLastStartedTime().AsTime().Format(time.RFC3339Nano), a.GetLastFailure().GetMessage()))
	}
	var holder *string
	var expires time.Time
	if err := r.pool.QueryRow(r.ctx, "SELECT holder, expires_at FROM poll_leases WHERE account_key = $1", key).Scan(&holder, &expires); err != nil {
		out = append(out, "lease: "+err.Error())
	} else {
		h := "none"
		if holder != nil {
			h = *holder
		}
		out = append(out, fmt.Sprintf("lease held by %s until %v", h, expires.Format(time.RFC3339Nano)))
	}
	return strings.Join(out, "; ")
}

// keyOf is the account key of the bot botID.
func keyOf(accountOf map[string]ilinksim.BotInfo, botID string) string {
	for key, b := range accountOf {
		if b.BotID == botID {
			return key
		}
	}
	return ""
}

// procState is the state letter of a process (/proc/<pid>/stat: R running, S sleeping,
// T stopped, ...).
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the
	// last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return "", fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	return s[i+2 : i+3], nil
}

// leasePoll is the poll activity (lease epoch and attempt) holding a bot's lease.
type leasePoll struct {
	epoch   int64
	attempt int32
}

// leasePolls maps each account key whose live lease the process pid holds to the poll
// holding it.
func leasePolls(t *testing.T, r *procRig, pid int) map[string]leasePoll {
	t.Helper()
	rows, err := r.pool.Query(r.ctx, "SELECT account_key, holder, epoch, attempt FROM poll_leases WHERE holder IS NOT NULL AND expires_at > clock_timestamp()")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]leasePoll{}
	for rows.Next() {
		var key, holder string
		var p leasePoll
		if err := rows.Scan(&key, &holder, &p.epoch, &p.attempt); err != nil {
			t.Fatal(err)
		}
		if holderPID(holder) == pid {
			out[key] = p
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
