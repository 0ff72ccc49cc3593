package loadtest_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/loadtest"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

// TestManyBotsOnOneWorkerAnswerEveryMessageOnce is the scale test at the
// size of the test suite: 20 bots on one worker process (its pool bounded to 4
// PostgreSQL connections when the worker has that setting), every bot holding a long poll,
// 10 s idle, then 60 messages over 10 bots, each answered by the echo agent. Every
// message gets exactly one reply, and the worker stays within its connection bound. It
// runs the same code as `go run ./cmd/loadtest`.
func TestManyBotsOnOneWorkerAnswerEveryMessageOnce(t *testing.T) {
	dev := devserver.Start(t)
	cfg := loadtest.DefaultConfig()
	cfg.Bots, cfg.Active, cfg.Messages = 20, 10, 60
	cfg.Idle = 10 * time.Second
	cfg.Rate, cfg.Think = 0, 0
	// Replies of one bot are paced by --send-gap (2 s by default); the rule here is one
	// reply per message, not the pacing, so the gap is short.
	cfg.WorkerEnv = map[string]string{"ILINKFLOW_SEND_GAP": "10ms"}
	cfg.AnswerWithin = 20 * time.Second
	cfg.LoadWithin = 40 * time.Second
	cfg.Settle = 2 * time.Second
	cfg.Sample = 250 * time.Millisecond
	inSuite(t, dev, &cfg)
	if ok, err := loadtest.WorkerHasSetting(t.Context(), cfg.WorkerBin, "db-max-conns"); err != nil {
		t.Fatal(err)
	} else if ok {
		cfg.DBMaxConns = 4
	} else {
		t.Logf("the worker has no --db-max-conns setting yet: its pool has pgxpool's default bound")
	}

	rep, err := loadtest.Run(t.Context(), cfg)
	if rep != nil {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Logf("report:\n%s", b.String())
	}
	if err != nil {
		if rep != nil && rep.WorkerLog != "" {
			if raw, rerr := os.ReadFile(rep.WorkerLog); rerr == nil {
				t.Logf("worker log (tail):\n%s", tail(string(raw), 15))
			}
		}
		t.Fatal(err)
	}
	if !rep.Ready || rep.Load.Injected != cfg.Messages || rep.Load.Lost != 0 || rep.Load.Doubled != 0 {
		t.Fatalf("ready %v, %d of %d messages injected, %d lost, %d doubled", rep.Ready, rep.Load.Injected, cfg.Messages, rep.Load.Lost, rep.Load.Doubled)
	}
	if rep.PGConnsMax > rep.PGConnBound || rep.PGConnsMax == 0 {
		t.Fatalf("the worker used %d PostgreSQL connections (bound %d)", rep.PGConnsMax, rep.PGConnBound)
	}
	if rep.HeldIdleMin < cfg.Bots {
		t.Fatalf("only %d getupdates held at some point while idle, want every bot's (%d)", rep.HeldIdleMin, cfg.Bots)
	}
}

// inSuite points cfg at the test's PostgreSQL and dev server, gives it a work directory,
// the test log and a worker built from this module.
func inSuite(t *testing.T, dev *devserver.Server, cfg *loadtest.Config) {
	t.Helper()
	cfg.DatabaseURL = dbtest.URL()
	cfg.TemporalAddress = dev.HostPort
	cfg.ReadyWithin = 40 * time.Second
	cfg.WorkDir = t.TempDir()
	cfg.Log = &testLog{t: t}
	bin, err := loadtest.BuildWorker(t.Context(), cfg.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkerBin = bin
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// testLog writes the run's progress lines to the test log.
type testLog struct {
	t  *testing.T
	mu sync.Mutex
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSaturationReportAddsUpAndLosesNothing is the saturation run at the size of the test
// suite: two short steps for ilinkflow, the engine's ceiling and the store's ceiling. It
// checks the report's arithmetic and that no message was lost or doubled, not a speed.
func TestSaturationReportAddsUpAndLosesNothing(t *testing.T) {
	dev := devserver.Start(t)
	cfg := loadtest.SaturationConfig()
	cfg.Bots, cfg.SatSteps = 2, []int{1, 2}
	cfg.SatStepFor = 2 * time.Second
	cfg.SatP99 = time.Minute // a busy machine is slow; the speed is not what is checked
	inSuite(t, dev, &cfg)

	rep, err := loadtest.Run(t.Context(), cfg)
	if rep != nil {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Logf("report:\n%s", b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Saturation
	if s == nil || len(s.Series) != len(loadtest.Systems) {
		t.Fatalf("saturation series: %+v, want one per system %v", s, loadtest.Systems)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for i, se := range s.Series {
		if se.System != loadtest.Systems[i] || len(se.Steps) != len(cfg.SatSteps) {
			t.Fatalf("series %d: %s with %d steps, want %s with %d", i, se.System, len(se.Steps), loadtest.Systems[i], len(cfg.SatSteps))
		}
		var best *loadtest.SatStep
		for j, st := range se.Steps {
			name := fmt.Sprintf("%s step %d", se.System, j+1)
			if st.Bots != cfg.SatSteps[j] || st.Answered == 0 || st.Lost != 0 || st.Doubled != 0 || !st.WithinBound {
				t.Errorf("%s: %d bots, %d answered, %d lost, %d doubled, within bound %v", name, st.Bots, st.Answered, st.Lost, st.Doubled, st.WithinBound)
			}
			if !near(st.PerSecond, float64(st.Answered)/st.Seconds) {
				t.Errorf("%s: %v msg/s, but %d answered in %v s", name, st.PerSecond, st.Answered, st.Seconds)
			}
			if st.P50MS <= 0 || st.P50MS > st.P99MS || st.P99MS > st.MaxMS {
				t.Errorf("%s: p50 %v, p99 %v, max %v ms out of order", name, st.P50MS, st.P99MS, st.MaxMS)
			}
			for role, sec := range st.CPUSeconds {
				if sec < 0 || !near(st.CPUMSPerMessage[role], 1000*sec/float64(st.Answered)) {
					t.Errorf("%s: %s CPU %v s, %v ms per message", name, role, sec, st.CPUMSPerMessage[role])
				}
			}
			if se.System == loadtest.SystemStore {
				if st.Actions != -1 || st.ActionsPerMessage != -1 {
					t.Errorf("%s: %d Temporal actions counted for the store alone", name, st.Actions)
				}
			} else if st.Actions <= 0 || !near(st.ActionsPerMessage, float64(st.Actions)/float64(st.Answered)) {
				t.Errorf("%s: %d actions, %v per message", name, st.Actions, st.ActionsPerMessage)
			}
			// Each message's window runs at least its first workflow task.
			if se.System == loadtest.SystemStore {
				if st.WorkflowTasks != -1 || st.WorkflowTasksPerMessage != -1 {
					t.Errorf("%s: %d workflow tasks counted for the store alone", name, st.WorkflowTasks)
				}
			} else if st.WorkflowTasks < st.Answered || !near(st.WorkflowTasksPerMessage, float64(st.WorkflowTasks)/float64(st.Answered)) {
				t.Errorf("%s: %d workflow tasks for %d answered messages, %v per message", name, st.WorkflowTasks, st.Answered, st.WorkflowTasksPerMessage)
			}
			if se.System == loadtest.SystemEngine && (st.PGTransactions != -1 || st.PGRoundTrips != -1) {
				t.Errorf("%s: PostgreSQL counted for the engine, which uses none", name)
			}
			if se.System != loadtest.SystemEngine {
				if st.PGRoundTrips <= 0 || !near(st.PGRoundTripsPerMessage, st.PGRoundTrips/float64(st.Answered)) {
					t.Errorf("%s: %v PostgreSQL round trips, %v per message", name, st.PGRoundTrips, st.PGRoundTripsPerMessage)
				}
				if st.PGTransactions <= 0 {
					t.Errorf("%s: %v PostgreSQL transactions", name, st.PGTransactions)
				}
			}
			if best == nil || st.PerSecond > best.PerSecond {
				best = &se.Steps[j]
			}
		}
		if se.Saturation == nil || se.Saturation.PerSecond != best.PerSecond {
			t.Errorf("%s: saturation %+v, want the fastest step (%v msg/s)", se.System, se.Saturation, best.PerSecond)
		}
	}
	if il, en, st := s.Series[0].Saturation, s.Series[1].Saturation, s.Series[2].Saturation; il != nil && en != nil && st != nil {
		if !near(s.EngineRatio, il.PerSecond/en.PerSecond) || !near(s.StoreRatio, il.PerSecond/st.PerSecond) {
			t.Errorf("ratios %v and %v, want %v and %v", s.EngineRatio, s.StoreRatio, il.PerSecond/en.PerSecond, il.PerSecond/st.PerSecond)
		}
	}
}
