package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/devserver"
	"github.com/ilinkflow/ilinkflow/ilinksim"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
)

// failoverWithin is the acceptance bound of issue 10: after SIGKILL of the worker polling
// a bot, another worker polls it within this.
const failoverWithin = 60 * time.Second

// With the default poll lease (no Temporal heartbeat on polls), a bot whose worker is
// SIGKILLed is polled again by another worker process within a minute: the other
// worker's lease supervisor finds the expired lease, the poller replaces its dead poll
// activity, and a message sent after the kill is stored and answered by the survivor.
func TestAnotherWorkerResumesADeadWorkersBotWithinAMinute(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "../worker")
	build.Env = os.Environ()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the worker: %v\n%s", err, out)
	}
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	tq := devserver.TaskQueue(t)
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	dbURL, err := crashDatabaseURL(dbtest.URL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	simCfg := ilinksim.DefaultConfig()
	simCfg.ThrottleBurst = 0
	simCfg.LongPollHold = 2 * time.Second
	tap := &crashTap{next: ilinksim.New(simCfg).Handler(), last: map[int]crashPage{}}
	srv := httptest.NewServer(tap)
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	keySpec := "1:" + base64.StdEncoding.EncodeToString(raw[:])
	ring, err := sealing.ParseKeyring(keySpec)
	if err != nil {
		t.Fatal(err)
	}
	// The test's client encrypts and decrypts payloads like the workers (same keys).
	tc := dialCodec(t, dev, ns, ring)
	st, err := store.New(pool, ring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: context.Background(), tc: tc, ns: ns, tq: tq, store: st, srv: srv, ctl: ctl, limits: store.DefaultLimits()}
	bot, err := ctl.CreateBot(s.ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := st.RegisterAccount(s.ctx, time.Now(), store.RegisterInput{ProviderAccountID: bot.BotID,
		OwnerPeerID: bot.Owner, BaseURL: srv.URL, BotToken: sealing.NewSecret(bot.Token)})
	if err != nil {
		t.Fatal(err)
	}
	env := crashEnv(map[string]string{
		"TEMPORAL_ADDRESS":     dev.HostPort,
		"TEMPORAL_NAMESPACE":   ns,
		"ILINKFLOW_TASK_QUEUE": tq,
		"DATABASE_URL":         dbURL,
		sealing.EnvKeys:        keySpec,
		"ILINK_BASE_URL":       srv.URL,
		"ILINK_CDN_BASE_URL":   srv.URL + "/c2c",
		"ILINKFLOW_SEND_GAP":   "5ms",
		"ILINKFLOW_HANDLER":    "echo",
		"ILINKFLOW_LOG_FORMAT": "text",
		"ILINKFLOW_HTTP_ADDR":  "127.0.0.1:0",
		// The default lease ttl and poll session: what an operator runs.
	})
	workers := []*crashWorker{{t: t, bin: bin, env: env, tap: tap}, {t: t, bin: bin, env: env, tap: tap}}
	for _, w := range workers {
		t.Cleanup(w.stop)
		t.Cleanup(func() {
			if t.Failed() {
				w.dumpLogs()
			}
		})
		if err := w.start(); err != nil {
			t.Fatal(err)
		}
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
