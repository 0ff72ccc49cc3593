package e2e_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// failoverWithin is the failover bound: after SIGKILL of the worker polling
// a bot, another worker polls it within this.
const failoverWithin = 60 * time.Second

// With the default poll lease (no Temporal heartbeat on polls), a bot whose worker is
// SIGKILLed is polled again by another worker process within a minute: the other
// worker's lease supervisor finds the expired lease, the poller replaces its dead poll
// activity, and a message sent after the kill is stored and answered by the survivor.
func TestAnotherWorkerResumesADeadWorkersBotWithinAMinute(t *testing.T) {
	t.Parallel()
	rig := newProcRig(t, 2*time.Second, store.DefaultLimits())
	s, pool, ctl, tap, bot, acct, bin := rig.system, rig.pool, rig.ctl, rig.tap, rig.bot, rig.acct, rig.bin
	// The default lease ttl and poll session: what an operator runs.
	env := rig.baseEnv(map[string]string{
		"ILINKFLOW_SEND_GAP": "5ms",
		"ILINKFLOW_HANDLER":  "echo",
	})
	workers := []*crashWorker{{t: t, bin: bin, env: env, tap: tap}, {t: t, bin: bin, env: env, tap: tap}}
	for _, w := range workers {
		w.launch()
	}
	holder := func() string {
		var h *string
		if err := pool.QueryRow(s.ctx, "SELECT holder FROM poll_leases WHERE account_key = $1 AND expires_at > clock_timestamp()",
			acct.AccountKey).Scan(&h); err != nil || h == nil {
			return ""
		}
		return *h
	}
	pidOf := func(h string) int {
		parts := strings.Split(h, "/")
		if len(parts) < 3 {
			return 0
		}
		n, _ := strconv.Atoi(parts[len(parts)-2])
		return n
	}
	var first string
	s.eventually("a worker holds the bot's poll lease", 30*time.Second, func() (bool, error) {
		first = holder()
		return first != "", nil
	})
	var victim, survivor *crashWorker
	for _, w := range workers {
		if w.current().pid == pidOf(first) {
			victim = w
		} else {
			survivor = w
		}
	}
	if victim == nil || survivor == nil {
		t.Fatalf("lease holder %q is neither worker process", first)
	}

	if err := victim.kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if _, err := ctl.InjectText(s.ctx, bot.BotID, "", "are you still there?"); err != nil {
		t.Fatal(err)
	}
	s.eventually("the survivor polls the bot", failoverWithin, func() (bool, error) {
		h := holder()
		return h != "" && pidOf(h) == survivor.current().pid, nil
	})
	resumed := time.Since(killed)
	s.eventually("the message sent after the kill is answered", failoverWithin-resumed+10*time.Second, func() (bool, error) {
		sent, err := ctl.Sent(s.ctx, bot.BotID)
		return len(sent) == 1, err
	})
	answered := time.Since(killed)
	t.Logf("after SIGKILL of the polling worker: the other worker held the lease after %v; the message was answered after %v",
		resumed.Round(100*time.Millisecond), answered.Round(100*time.Millisecond))
	if answered > failoverWithin {
		t.Fatalf("the bot was resumed after %v, want within %v", answered, failoverWithin)
	}
}
