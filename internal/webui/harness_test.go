package webui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

const operatorToken = "test-operator-token-0123456789"

var keyring = testkit.Keyring

// system is a running gateway (worker in the test process) with its own namespace, task
// queue, database schema and iLink simulator, and the web UI served by httptest.
type system struct {
	t     *testing.T
	ctx   context.Context
	tc    client.Client
	tq    string
	store *store.Store
	ctl   *ilinksim.Control
	ui    *httptest.Server
	dev   *devserver.Server
	ns    string
	pool  *pgxpool.Pool
	// uiCfg is the web UI's configuration; handler the UI the server serves now, which
	// restartUI replaces by a new one (a worker restart: nothing in memory survives).
	uiCfg   webui.Config
	handler atomic.Pointer[http.Handler]
	// slowPosts delays the answer to every POST by this many nanoseconds.
	slowPosts atomic.Int64
	// restartWorker stops the worker (gateway.Run, as SIGTERM does) and starts a new one
	// with a new web UI instance: nothing in either's memory survives.
	restartWorker func()
}

// restartUI replaces the served web UI by a new instance of it (as a worker restart
// does), with opts applied to its configuration.
func (s *system) restartUI(opts ...option) {
	s.t.Helper()
	for _, o := range opts {
		o(&s.uiCfg)
	}
	h, err := webui.New(s.uiCfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.handler.Store(&h)
}

type option func(*webui.Config)

func start(t *testing.T, opts ...option) *system {
	t.Helper()
	dev := devserver.Start(t)
	ns, tc := dev.NewNamespace(t)
	tq := devserver.TaskQueue(t)
	pool := dbtest.NewPool(t)
	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = time.Second
	simCfg.ThrottleBurst = 0
	sim := ilinksim.New(simCfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	cfg := gateway.DefaultConfig()
	cfg.TaskQueue = tq
	cfg.ILinkBaseURL = srv.URL
	cfg.ILinkCDNBaseURL = srv.URL + "/c2c"
	cfg.PollSession = 3 * time.Second
	cfg.Heartbeat = time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.HTTPAddr = ""
	st, err := store.New(pool, keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- gateway.Run(ctx, cfg, gateway.Options{Pool: pool, Keyring: keyring, Temporal: tc,
				Ready: func(gateway.ReconcileReport) { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("gateway did not start: %v", err)
		case <-time.After(time.Minute):
			cancel()
			t.Fatal("gateway did not become ready")
		}
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway: %v", err)
			}
		}
	}
	stopWorker := run()
	t.Cleanup(func() { stopWorker() })

	uiCfg := webui.Config{Temporal: tc, TaskQueue: tq, Store: st, OperatorToken: sealing.NewSecret(operatorToken),
		Lifetime: time.Minute, PollGap: 100 * time.Millisecond}
	for _, o := range opts {
		o(&uiCfg)
	}
	sys := &system{t: t, ctx: context.Background(), tc: tc, tq: tq, store: st, ctl: ilinksim.NewControl(srv.URL, srv.Client()),
		dev: dev, ns: ns, pool: pool, uiCfg: uiCfg}
	sys.restartWorker = func() {
		stopWorker()
		stopWorker = run()
		sys.restartUI()
	}
	sys.restartUI()
	sys.ui = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*sys.handler.Load()).ServeHTTP(w, r)
		if d := time.Duration(sys.slowPosts.Load()); d > 0 && r.Method == http.MethodPost {
			time.Sleep(d) // a slow network: the answer reaches the browser after its next click
		}
	}))
	t.Cleanup(sys.ui.Close)
	return sys
}

// eventually polls cond until it holds or the deadline passes.
func (s *system) eventually(what string, within time.Duration, cond func() (bool, error)) {
	s.t.Helper()
	testkit.Eventually(s.t, what, within, cond)
}

// waitingQR waits for a QR session in state wait that is not one of seen, and returns it.
func (s *system) waitingQR(seen map[string]bool) string {
	s.t.Helper()
	var qr string
	s.eventually("QR code issued", 30*time.Second, func() (bool, error) {
		sessions, err := s.ctl.QRSessions(s.ctx)
		for _, q := range sessions {
			if q.Status == ilinksim.QRWait && !seen[q.QRCode] {
				qr = q.QRCode
				return true, nil
			}
		}
		return false, err
	})
	return qr
}

// enrollDirectly runs an Enrollment to confirmation without the UI (as e2e does).
func (s *system) enrollDirectly(offerID, owner string) wfapi.EnrollmentState {
	s.t.Helper()
	run, err := s.tc.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offerID), TaskQueue: s.tq},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offerID, RequestedBy: "test", Lifetime: wfapi.Duration(time.Minute), PollGap: wfapi.Duration(100 * time.Millisecond)})
	if err != nil {
		s.t.Fatal(err)
	}
	qr := s.waitingQR(nil)
	if _, err := s.ctl.ScanQR(s.ctx, qr, owner); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.ctl.ConfirmQR(s.ctx, qr); err != nil {
		s.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := run.Get(s.ctx, &st); err != nil {
		s.t.Fatal(err)
	}
	if st.Status != "confirmed" || st.AccountKey == "" {
		s.t.Fatalf("enrollment ended %+v", st)
	}
	return st
}

func tokenSecret() sealing.Secret { return sealing.NewSecret(operatorToken) }

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
