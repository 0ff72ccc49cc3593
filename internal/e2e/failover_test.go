package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// failoverWithin is the bound on a dead worker's bots: each is polled again by a live
// worker within this of the death (docs/poll-leases.md). It is the product's promise, not
// a measurement on an idle machine: the chain (the peer's scan every second, the failed
// attempt's retry, its dispatch, the lease and the getupdates) takes 1 to 2 s.
const failoverWithin = 5 * time.Second

// pollArrivals records when each bot's getupdates requests reach the simulator.
type pollArrivals struct {
	next http.Handler
	mu   sync.Mutex
	at   map[string][]time.Time // by Authorization header
}

func newPollArrivals(next http.Handler) *pollArrivals {
	return &pollArrivals{next: next, at: map[string][]time.Time{}}
}

func (p *pollArrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ilink/bot/getupdates" {
		p.mu.Lock()
		bot := r.Header.Get("Authorization")
		p.at[bot] = append(p.at[bot], time.Now())
		p.mu.Unlock()
	}
	p.next.ServeHTTP(w, r)
}

// after returns the first getupdates of the bot (its token) that arrived after t.
func (p *pollArrivals) after(token string, t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.at["Bearer "+token] {
		if a.After(t) {
			return a, true
		}
	}
	return time.Time{}, false
}

// holderPID is the process id in a lease holder's name (host/pid/random).
func holderPID(h string) int {
	parts := strings.Split(h, "/")
	if len(parts) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(parts[len(parts)-2])
	return n
}

// addBots registers n-1 more bots beside the rig's own and returns all of them.
func addBots(t *testing.T, r *procRig, n int) []ilinksim.BotInfo {
	t.Helper()
	bots := []ilinksim.BotInfo{r.bot}
	for len(bots) < n {
		bot, err := r.ctl.CreateBot(r.ctx, ilinksim.CreateBotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.RegisterAccount(r.ctx, r.store, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
			OwnerPeerID: bot.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(bot.Token)}); err != nil {
			t.Fatal(err)
		}
		bots = append(bots, bot)
	}
	return bots
}

// leaseHolders maps each account key to the process id holding its live lease.
func leaseHolders(t *testing.T, r *procRig) map[string]int {
	t.Helper()
	rows, err := r.pool.Query(r.ctx, "SELECT account_key, holder FROM poll_leases WHERE holder IS NOT NULL AND expires_at > clock_timestamp()")
	if err != nil {
		t.Fatal(err)
	}
	out, err := collectHolders(rows)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func collectHolders(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) (map[string]int, error) {
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key, holder string
		if err := rows.Scan(&key, &holder); err != nil {
			return nil, err
		}
		out[key] = holderPID(holder)
	}
	return out, rows.Err()
}

// With the default lease ttl (30 s) and poll session, the bots of a worker that is
// SIGKILLed are each polled by the other worker within 5 s of the kill: the survivor's
// supervisor sees the dead worker's liveness session gone at its next scan and fails the
// dead poll attempts, which Temporal retries at once on the survivor. A message sent once
// they are polled again is answered once.
func TestADeadWorkersBotsArePolledByAnotherWorkerWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	var arrivals *pollArrivals
	r := newProcRigWith(t, 2*time.Second, store.DefaultLimits(), procRigOptions{Wrap: func(h http.Handler) http.Handler {
		arrivals = newPollArrivals(h)
		return arrivals
	}})
	bots := addBots(t, r, 8)
	env := r.baseEnv(map[string]string{"ILINKFLOW_SEND_GAP": "5ms", "ILINKFLOW_HANDLER": "echo"})
	workers := []*crashWorker{{t: t, bin: r.bin, env: env, tap: r.tap}, {t: t, bin: r.bin, env: env, tap: r.tap}}
	for _, w := range workers {
		w.launch()
	}
	f := startFailover(t, r, arrivals, bots, workers)
	f.kill()
	worst := f.awaitRepolled()
	f.answeredOnceBySurvivor()
	t.Logf("SIGKILL of the worker holding %d of %d bots: the last of them was polled again %v after the kill",
		len(f.orphans), len(bots), worst.Round(time.Millisecond))
	if worst > failoverWithin {
		t.Fatalf("a dead worker's bot was polled again %v after the kill, want within %v", worst, failoverWithin)
	}
}

// failover is one worker's death among two: which bots the victim held, when it died.
type failover struct {
	t                *testing.T
	r                *procRig
	arrivals         *pollArrivals
	accountOf        map[string]ilinksim.BotInfo // by account key
	victim, survivor *crashWorker
	orphans          []string // the account keys whose lease the victim held
	killed           time.Time
}

// startFailover waits until every bot's lease is held and picks the victim: the worker
// holding more leases (the other when they split evenly).
func startFailover(t *testing.T, r *procRig, arrivals *pollArrivals, bots []ilinksim.BotInfo, workers []*crashWorker) *failover {
	t.Helper()
	testkit.Eventually(t, "every bot's lease held", time.Minute, func() (bool, error) {
		held := leaseHolders(t, r)
		return len(held) == len(bots), fmt.Errorf("%d of %d leases held", len(held), len(bots))
	})
	f := &failover{t: t, r: r, arrivals: arrivals, accountOf: map[string]ilinksim.BotInfo{}}
	byBot := map[string]ilinksim.BotInfo{}
	for _, b := range bots {
		byBot[b.BotID] = b
	}
	rows, err := r.pool.Query(r.ctx, "SELECT account_key, provider_account_id FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key, botID string
		if err := rows.Scan(&key, &botID); err != nil {
			t.Fatal(err)
		}
		f.accountOf[key] = byBot[botID]
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	held := leaseHolders(t, r)
	count := map[int]int{}
	for _, pid := range held {
		count[pid]++
	}
	f.victim, f.survivor = workers[0], workers[1]
	if count[workers[1].current().pid] > count[workers[0].current().pid] {
		f.victim, f.survivor = workers[1], workers[0]
	}
	for key, pid := range held {
		if pid == f.victim.current().pid {
			f.orphans = append(f.orphans, key)
		}
	}
	if len(f.orphans) == 0 {
		t.Fatalf("the victim holds no lease: %v", held)
	}
	return f
}

// kill SIGKILLs the victim.
func (f *failover) kill() {
	f.t.Helper()
	if err := f.victim.kill(); err != nil {
		f.t.Fatal(err)
	}
	f.killed = time.Now()
}

// awaitRepolled waits until every orphaned bot was polled since the kill and returns the
// longest wait from the kill.
func (f *failover) awaitRepolled() time.Duration {
	f.t.Helper()
	var worst time.Duration
	testkit.Eventually(f.t, "every orphaned bot polled again", time.Minute, func() (bool, error) {
		worst = 0
		for _, key := range f.orphans {
			at, ok := f.arrivals.after(f.accountOf[key].Token, f.killed)
			if !ok {
				return false, fmt.Errorf("bot of %s not polled since the kill", key)
			}
			worst = max(worst, at.Sub(f.killed))
		}
		return true, nil
	})
	return worst
}

// answeredOnceBySurvivor sends a message to an orphaned bot and checks it is answered
// once, and that the survivor holds every orphaned bot's lease. Sent once the bot is
// polled again: one sent at the kill's instant may be the page in flight to the dead
// process, the one loss a crash may cost.
func (f *failover) answeredOnceBySurvivor() {
	f.t.Helper()
	r, bot := f.r, f.accountOf[f.orphans[0]]
	if _, err := r.ctl.InjectText(r.ctx, bot.BotID, "", "are you still there?"); err != nil {
		f.t.Fatal(err)
	}
	testkit.Eventually(f.t, "the message sent after the kill answered", time.Minute, func() (bool, error) {
		sent, err := r.ctl.Sent(r.ctx, bot.BotID)
		return len(sent) == 1, err
	})
	holders := leaseHolders(f.t, r)
	for _, key := range f.orphans {
		if holders[key] != f.survivor.current().pid {
			f.t.Errorf("lease of %s held by pid %d, want the survivor %d", key, holders[key], f.survivor.current().pid)
		}
	}
}

// builtFaultWorker is the worker command built with -tags faultpoints.
var builtFaultWorker struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// faultWorkerBinary returns the worker built with the fault points (internal/faultpoint).
func faultWorkerBinary(t *testing.T) string {
	t.Helper()
	builtFaultWorker.once.Do(func() {
		if builtFaultWorker.dir, builtFaultWorker.err = os.MkdirTemp("", "ilinkflow-e2e-faultworker-"); builtFaultWorker.err != nil {
			return
		}
		bin := filepath.Join(builtFaultWorker.dir, "worker")
		build := exec.Command("go", "build", "-tags", "faultpoints", "-o", bin, "../../worker")
		build.Env = os.Environ()
		if out, err := build.CombinedOutput(); err != nil {
			builtFaultWorker.err = fmt.Errorf("build the worker with fault points: %w\n%s", err, out)
			return
		}
		builtFaultWorker.bin = bin
	})
	if builtFaultWorker.err != nil {
		t.Fatal(builtFaultWorker.err)
	}
	return builtFaultWorker.bin
}

var faultLineRE = regexp.MustCompile(regexp.QuoteMeta(faultpoint.Line) + `(\S+) \(account (\S+)\)`)

// A worker killed after it picked up a poll activity and before that activity took the
// bot's lease leaves no lease to expire or claim; the bot is polled again within 5 s all
// the same: the other worker's supervisor finds the dead worker (its liveness session is
// gone), sees that Temporal counts the bot's poll activity as started by it, and fails
// it, so Temporal retries it at once on the live worker. (Before, the bot waited for the
// activity's start-to-close timeout: 12 minutes by default.)
func TestAWorkerKilledBetweenAPollsPickupAndItsLeaseHasTheBotPolledWithinFiveSeconds(t *testing.T) {
	t.Parallel()
	var arrivals *pollArrivals
	r := newProcRigWith(t, time.Second, store.DefaultLimits(), procRigOptions{Wrap: func(h http.Handler) http.Handler {
		arrivals = newPollArrivals(h)
		return arrivals
	}})
	bin := faultWorkerBinary(t)
	// Short poll sessions: a new poll activity every few seconds, so that the armed worker
	// picks one up soon.
	env := map[string]string{"ILINKFLOW_SEND_GAP": "5ms", "ILINKFLOW_HANDLER": "echo", "ILINKFLOW_POLL_SESSION": "2s",
		"ILINKFLOW_HEARTBEAT": "1s"}
	survivor := &crashWorker{t: t, bin: bin, env: r.baseEnv(env), tap: r.tap}
	survivor.launch()
	testkit.Eventually(t, "the bot's lease held", time.Minute, func() (bool, error) {
		return len(leaseHolders(t, r)) == 1, nil
	})
	armed := map[string]string{"ILINKFLOW_FAULTPOINT": faultpoint.PollPickedUp, "ILINKFLOW_FAULTPOINT_AFTER": "0s"}
	for k, v := range env {
		armed[k] = v
	}
	victim := startProc(t, "armed worker", bin, r.baseEnv(armed))
	var account string
	select {
	case <-victim.exited:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the armed worker never picked up a poll activity:\n%s", crashTail(victim.out.String(), 40))
	}
	died := victim.ended
	m := faultLineRE.FindStringSubmatch(victim.out.String())
	if m == nil {
		t.Fatalf("the armed worker exited (%v) without reaching its fault point:\n%s", victim.exitErr, crashTail(victim.out.String(), 40))
	}
	if ws, ok := victim.exitErr.(*exec.ExitError); !ok || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the armed worker exited with %v, want killed by SIGKILL", victim.exitErr)
	}
	account = m[2]
	if account != r.acct.AccountKey {
		t.Fatalf("fault point hit for %s, want the rig's bot %s", account, r.acct.AccountKey)
	}
	var polled time.Time
	testkit.Eventually(t, "the bot polled again after the kill", time.Minute, func() (bool, error) {
		var ok bool
		polled, ok = arrivals.after(r.bot.Token, died)
		return ok, nil
	})
	gap := polled.Sub(died)
	t.Logf("worker killed between the pickup of a poll activity and its lease: the bot was polled again %v later",
		gap.Round(time.Millisecond))
	if gap > failoverWithin {
		t.Fatalf("the bot was polled again %v after the kill, want within %v", gap, failoverWithin)
	}
	if _, err := r.ctl.InjectText(r.ctx, r.bot.BotID, "", "still there?"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the message sent after the kill answered", time.Minute, func() (bool, error) {
		sent, err := r.ctl.Sent(r.ctx, r.bot.BotID)
		return len(sent) == 1, err
	})
}

// A worker started beside one that polls every bot gets its share: the busy worker hands
// on, between two long polls, the polls beyond its share and a tenth (activities'
// rebalance), and Temporal retries them on either worker until each holds about half. A
// restarted worker so takes its part of the bots back, and the next crash of a long-lived
// worker moves no more than its share at once.
func TestAWorkerStartedBesideABusyOneGetsItsShareOfTheBots(t *testing.T) {
	t.Parallel()
	r := newProcRigWith(t, 2*time.Second, store.DefaultLimits(), procRigOptions{})
	bots := addBots(t, r, 8)
	env := r.baseEnv(map[string]string{"ILINKFLOW_HANDLER": "echo"})
	first := &crashWorker{t: t, bin: r.bin, env: env, tap: r.tap}
	first.launch()
	testkit.Eventually(t, "the first worker holds every bot's lease", time.Minute, func() (bool, error) {
		held := leaseHolders(t, r)
		n := 0
		for _, pid := range held {
			if pid == first.current().pid {
				n++
			}
		}
		return n == len(bots), fmt.Errorf("%d of %d leases held by the first worker", n, len(bots))
	})
	second := &crashWorker{t: t, bin: r.bin, env: env, tap: r.tap}
	second.launch()
	// Share 4 of 8, a tenth of it rounds to at least 1: the first keeps at most 5.
	testkit.Eventually(t, "the second worker holds its share", 3*time.Minute, func() (bool, error) {
		held := leaseHolders(t, r)
		count := map[int]int{}
		for _, pid := range held {
			count[pid]++
		}
		a, b := count[first.current().pid], count[second.current().pid]
		return len(held) == len(bots) && a <= 5 && b >= 3, fmt.Errorf("first worker %d, second %d, of %d leases held", a, b, len(held))
	})
}
