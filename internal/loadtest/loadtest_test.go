package loadtest_test

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
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
	cfg.DatabaseURL = dbtest.URL()
	cfg.TemporalAddress = dev.HostPort
	cfg.ReadyWithin = 40 * time.Second
	cfg.AnswerWithin = 20 * time.Second
	cfg.LoadWithin = 40 * time.Second
	cfg.Settle = 2 * time.Second
	cfg.Sample = 250 * time.Millisecond
	cfg.WorkDir = t.TempDir()
	cfg.Log = &testLog{t: t}

	bin, err := loadtest.BuildWorker(t.Context(), cfg.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkerBin = bin
	if ok, err := loadtest.WorkerHasSetting(t.Context(), bin, "db-max-conns"); err != nil {
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
