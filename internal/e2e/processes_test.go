package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// procRig is what the tests that run the worker command as separate processes share: the
// worker binary, the shared dev server (own namespace and task queue), a fresh schema and
// its URL, the simulator behind a tap that records getupdates responses, one sealing key
// ring (the workers get it in their environment) and one bot registered directly (the
// workers' start-up reconcile starts its poller).
type procRig struct {
	*system
	pool   *pgxpool.Pool
	bin    string
	dbURL  string
	keys   string // the key ring spec, as the workers' environment carries it
	tap    *crashTap
	bot    ilinksim.BotInfo
	acct   store.Account
	devHP  string
	schema string
	// With procRigOptions.Restartable: the rig's own dev server, which the test may halt
	// and restart (devserver.Server.Restart); else the test binary's shared server.
	dev *devserver.Server
	// With procRigOptions.DBProxy: the proxy the workers reach PostgreSQL through (dbURL
	// points at it); the test's own pool and store connect directly.
	dbProxy *tcpproxy.Proxy
}

// builtWorker is the worker command, built once for the test binary's process tests.
var builtWorker struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// workerBinary returns the worker command built from ../worker, building it on first use.
func workerBinary(t *testing.T) string {
	t.Helper()
	builtWorker.once.Do(func() {
		if builtWorker.dir, builtWorker.err = os.MkdirTemp("", "ilinkflow-e2e-worker-"); builtWorker.err != nil {
			return
		}
		bin := filepath.Join(builtWorker.dir, "worker")
		build := exec.Command("go", "build", "-o", bin, "../../worker")
		build.Env = os.Environ()
		if out, err := build.CombinedOutput(); err != nil {
			builtWorker.err = fmt.Errorf("build the worker: %w\n%s", err, out)
			return
		}
		builtWorker.bin = bin
	})
	if builtWorker.err != nil {
		t.Fatal(builtWorker.err)
	}
	return builtWorker.bin
}

// removeWorkerBinary removes the worker built by workerBinary (TestMain, after the tests).
func removeWorkerBinary() {
	if builtWorker.dir != "" {
		_ = os.RemoveAll(builtWorker.dir)
	}
}

// procRigOptions are the parts a process test may ask for beyond the common ones.
type procRigOptions struct {
	Restartable bool // a private dev server with a database file, restartable with its state
	DBProxy     bool // the workers' PostgreSQL through a proxy the test can cut
	// DevArgs, when set, gives the rig a private dev server with these extra arguments
	// (dynamic configuration a test needs and the shared server must not have).
	DevArgs []string
	// Wrap, when set, wraps the simulator's handler (outside the tap), e.g. to watch the
	// long polls of each bot.
	Wrap func(http.Handler) http.Handler
}

func newProcRig(t *testing.T, longPollHold time.Duration, limits store.Limits) *procRig {
	t.Helper()
	return newProcRigWith(t, longPollHold, limits, procRigOptions{})
}

func newProcRigWith(t *testing.T, longPollHold time.Duration, limits store.Limits, opts procRigOptions) *procRig {
	t.Helper()
	var dev *devserver.Server // first: in -short mode the test skips here
	switch {
	case opts.Restartable:
		dev = devserver.StartPrivate(t, devserver.Options{DBFile: filepath.Join(t.TempDir(), "temporal.db"), ExtraArgs: opts.DevArgs})
	case opts.DevArgs != nil:
		dev = devserver.StartPrivate(t, devserver.Options{ExtraArgs: opts.DevArgs})
	default:
		dev = devserver.Start(t)
	}
	bin := workerBinary(t)
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
	var proxy *tcpproxy.Proxy
	if opts.DBProxy {
		cc := pool.Config().ConnConfig
		if proxy, err = tcpproxy.New(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		if dbURL, err = viaProxy(dbURL, proxy.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	simCfg := ilinksim.DefaultConfig()
	simCfg.ThrottleBurst = 0
	simCfg.LongPollHold = longPollHold
	tap := &crashTap{next: ilinksim.New(simCfg).Handler(), last: map[int]crashPage{}}
	var h http.Handler = tap
	if opts.Wrap != nil {
		h = opts.Wrap(tap)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	keySpec, ring := testkit.KeySpec, testkit.Keyring
	// The test's client encrypts and decrypts payloads like the workers (same keys).
	tc := dialCodec(t, dev, ns, ring)
	st, err := store.New(pool, ring, limits)
	if err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: context.Background(), tc: tc, ns: ns, tq: tq, store: st, srv: srv, ctl: ctl, limits: limits}
	bot, err := ctl.CreateBot(s.ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := storetest.RegisterAccount(s.ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
		OwnerPeerID: bot.Owner, BaseURL: srv.URL, BotToken: sealing.NewSecret(bot.Token)})
	if err != nil {
		t.Fatal(err)
	}
	return &procRig{system: s, pool: pool, bin: bin, dbURL: dbURL, keys: keySpec, tap: tap, bot: bot, acct: acct,
		devHP: dev.HostPort, schema: schema, dev: dev, dbProxy: proxy}
}

// viaProxy points a PostgreSQL URL or DSN at addr (host:port).
func viaProxy(dbURL, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if !strings.Contains(dbURL, "://") {
		return dbURL + " host=" + host + " port=" + port, nil // the last setting wins
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("database URL does not parse: %w", err)
	}
	u.Host = addr
	return u.String(), nil
}

// baseEnv is the workers' environment common to the process tests, plus more.
func (r *procRig) baseEnv(more map[string]string) []string {
	set := map[string]string{
		"TEMPORAL_ADDRESS":     r.devHP,
		"TEMPORAL_NAMESPACE":   r.ns,
		"ILINKFLOW_TASK_QUEUE": r.tq,
		"DATABASE_URL":         r.dbURL,
		sealing.EnvKeys:        r.keys,
		"ILINK_BASE_URL":       r.srv.URL,
		"ILINK_CDN_BASE_URL":   r.srv.URL + "/c2c",
		"ILINKFLOW_LOG_FORMAT": "text",
		// Any free port for the HTTP endpoints, so that no fixed port is shared with
		// another process on this machine.
		"ILINKFLOW_HTTP_ADDR": "127.0.0.1:0",
	}
	for k, v := range more {
		set[k] = v
	}
	return crashEnv(set)
}
