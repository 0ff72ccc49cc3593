package loadtest_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/loadtest"
)

// TestChaosKillsLoseOnlyInFlightPagesAndRepollWithinFiveSeconds is the chaos mode at the
// size of the test suite: 3 worker processes (built with -tags faultpoints) serving 20
// bots under a stream of messages to every bot, and three kills: one at the fault point
// just after a poll activity was picked up (the kill comes from the point, in an extra
// armed process), one just before a page with messages leaves the simulator for the
// bot's lease holder, one at random. No freeze (a minute is too long for the suite) and
// no rolling restart. Asserted: no message lost beyond the in-flight pages, none doubled,
// none handled without its reply, every kill's bots polled again within 5 s.
func TestChaosKillsLoseOnlyInFlightPagesAndRepollWithinFiveSeconds(t *testing.T) {
	dev := devserver.Start(t)
	cfg := loadtest.DefaultChaosConfig()
	cfg.Workers, cfg.Bots = 3, 20
	cfg.KillPlan = []string{loadtest.KillPollPickedUp, loadtest.KillPageLeaves, loadtest.KillRandom}
	cfg.Freeze, cfg.RollingRestart = 0, false
	cfg.Duration = 20 * time.Second
	// Each bot's next message 1.5 to 4.5 s after its answer: about 5 a second over 20 bots.
	cfg.Rate, cfg.Think = 0, 3*time.Second
	cfg.DBMaxConns = 4
	// A short poll session, so that poll activities are picked up all along (the armed
	// process dies at its first pickup after its arming delay).
	cfg.WorkerEnv = map[string]string{"ILINKFLOW_POLL_SESSION": "20s"}
	cfg.ArmAfterMin, cfg.ArmAfterMax, cfg.ArmWithin = 3*time.Second, 6*time.Second, 90*time.Second
	cfg.RecoverWithin = 40 * time.Second
	cfg.AnswerWithin = 30 * time.Second
	cfg.Settle = 3 * time.Second
	cfg.DatabaseURL = dbtest.URL()
	cfg.TemporalAddress = dev.HostPort
	cfg.ReadyWithin = 90 * time.Second
	cfg.WorkDir = t.TempDir()
	cfg.Log = &testLog{t: t}
	bin, err := loadtest.BuildFaultpointWorker(t.Context(), cfg.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkerBin = bin

	rep, err := loadtest.RunChaos(t.Context(), cfg)
	if rep != nil {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Logf("report:\n%s", b.String())
	}
	if err != nil && !errors.Is(err, loadtest.ErrRuleBroken) {
		t.Fatal(err) // the run could not complete
	}
	if len(rep.Kills) != len(cfg.KillPlan) || rep.EventsDone != len(cfg.KillPlan) {
		t.Fatalf("%d kills recorded, %d events done; want the %d planned", len(rep.Kills), rep.EventsDone, len(cfg.KillPlan))
	}
	for i, k := range rep.Kills {
		if k.How != cfg.KillPlan[i] {
			t.Errorf("kill %d was %s, want %s", k.N, k.How, cfg.KillPlan[i])
		}
		if k.How == loadtest.KillPollPickedUp && k.NamedAccount == "" {
			t.Errorf("kill %d: the fault point's line named no account", k.N)
		}
		if !k.WithinBound {
			t.Errorf("kill %d (%s of %s): %d bots, %d polled again, the last %v after the kill (p99 %v); want all within %v",
				k.N, k.How, k.Victim, k.Bots, k.Repolled, ms(k.MaxMS), ms(k.P99MS), cfg.KillBound)
		}
	}
	m := rep.Messages
	if m.Injected == 0 || m.LostBeyond != 0 || m.Doubled != 0 || m.FalseHandled != 0 {
		t.Errorf("%d messages: %d lost beyond the in-flight pages (%d in flight), %d doubled, %d handled without a reply",
			m.Injected, m.LostBeyond, m.LostInFlight, m.Doubled, m.FalseHandled)
	}
	if n := rep.Overlaps.AfterThaw + rep.Overlaps.Other; n != 0 {
		t.Errorf("%d getupdates overlapped another of their bot: %v", n, rep.Overlaps.Examples)
	}
	if err != nil && !t.Failed() {
		t.Fatal(err)
	}
}

func ms(v float64) time.Duration {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond)
}
