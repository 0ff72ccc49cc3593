package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/replyapi"
)

// Paths of the probes (on the admin listener, or on the one listener when there is no
// admin address).
const (
	// LivezPath answers 200 while the process serves HTTP. It depends on nothing else
	// (not iLink, PostgreSQL or Temporal): a liveness probe that fails restarts the
	// process, which would not fix any of them.
	LivezPath = "/livez"
	// ReadyzPath answers 200 only while PostgreSQL and Temporal answer, the worker runs
	// and it is not draining; 503 with the reason otherwise.
	ReadyzPath = "/readyz"
	// HealthzPath is the per-bot iLink report (metrics.Health), for monitoring.
	HealthzPath = "/healthz"
)

// Bounds of the readiness checks.
const (
	// ReadyCheckTimeout bounds each dependency check of /readyz.
	ReadyCheckTimeout = 2 * time.Second
	// ReadyCacheFor is how long a /readyz answer is reused, so that frequent probes from
	// several sources cost one check of each dependency per period.
	ReadyCacheFor = time.Second
)

// Reasons /readyz gives for 503 (the "reason" of its body).
const (
	NotReadyStarting    = "starting"
	NotReadyDraining    = "draining"
	NotReadyPostgreSQL  = "postgresql_unreachable"
	NotReadyTemporal    = "temporal_unreachable"
	NotReadyNotChecked  = "not_checked"
	readyStatusReady    = "ready"
	readyStatusNotReady = "not_ready"
)

// readiness is the state /readyz reports: started and draining are set by Run; the
// dependency checks run at most once per ReadyCacheFor.
type readiness struct {
	pool *pgxpool.Pool
	tc   client.Client
	log  *slog.Logger

	started  atomic.Bool
	draining atomic.Bool

	mu      sync.Mutex // held while checking: one check at a time
	checked time.Time
	last    readyAnswer
}

// readyAnswer is the body of /readyz.
type readyAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func newReadiness(pool *pgxpool.Pool, tc client.Client, log *slog.Logger) *readiness {
	return &readiness{pool: pool, tc: tc, log: log}
}

// answer is the current readiness: started and not draining first (never cached), then
// the dependencies (cached for ReadyCacheFor).
func (r *readiness) answer(ctx context.Context) readyAnswer {
	switch {
	case r == nil:
		return readyAnswer{Status: readyStatusNotReady, Reason: NotReadyNotChecked}
	case r.draining.Load():
		return readyAnswer{Status: readyStatusNotReady, Reason: NotReadyDraining}
	case !r.started.Load():
		return readyAnswer{Status: readyStatusNotReady, Reason: NotReadyStarting}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked.IsZero() && time.Since(r.checked) < ReadyCacheFor {
		return r.last
	}
	ans := r.check(ctx)
	if ans.Status != r.last.Status || ans.Reason != r.last.Reason {
		r.log.Info("readiness changed", "status", ans.Status, "reason", ans.Reason, "detail", ans.Detail)
	}
	r.last, r.checked = ans, time.Now()
	return ans
}

// check asks PostgreSQL and Temporal at once, each within ReadyCheckTimeout.
func (r *readiness) check(ctx context.Context) readyAnswer {
	ctx, cancel := context.WithTimeout(ctx, ReadyCheckTimeout)
	defer cancel()
	var pgErr, tErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		pgErr = r.pingPostgreSQL(ctx)
	}()
	go func() {
		defer wg.Done()
		_, tErr = r.tc.CheckHealth(ctx, &client.CheckHealthRequest{})
	}()
	wg.Wait()
	switch {
	case pgErr != nil:
		return readyAnswer{Status: readyStatusNotReady, Reason: NotReadyPostgreSQL, Detail: shortError(pgErr)}
	case tErr != nil:
		return readyAnswer{Status: readyStatusNotReady, Reason: NotReadyTemporal, Detail: shortError(tErr)}
	}
	return readyAnswer{Status: readyStatusReady}
}

// pingPostgreSQL runs one statement on a pooled connection (a new one when none is idle).
func (r *readiness) pingPostgreSQL(ctx context.Context) error {
	if r.pool == nil {
		return errors.New("no PostgreSQL pool")
	}
	_, err := r.pool.Exec(ctx, ";")
	return err
}

// shortError is err's message on one line, at most 200 bytes (it names hosts, never a
// password: neither pgx nor the Temporal client puts one in an error).
func shortError(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ServeHTTP answers /readyz: 200 {"status":"ready"} or 503 {"status":"not_ready",
// "reason":…,"detail":…}.
func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ans := r.answer(req.Context())
	status := http.StatusOK
	if ans.Status != readyStatusReady {
		status = http.StatusServiceUnavailable
	}
	writeProbe(w, status, ans)
}

// livez answers /livez: 200 while the process serves.
func livez(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, map[string]string{"status": "alive"})
}

func writeProbe(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// CodeDraining is the reply API's error code for a request that arrives while the worker
// drains (503, Retry-After: 1): the agent sends it again, to another worker.
const CodeDraining = "draining"

// apiGate counts the reply API's requests in flight; once draining, it refuses new ones
// and lets the drain wait for those in flight.
type apiGate struct {
	next http.Handler

	mu       sync.Mutex
	draining bool
	inflight int
	idle     chan struct{} // closed when draining and nothing is in flight
}

func (g *apiGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	if g.draining {
		g.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		body := replyapi.ErrorBody{Error: replyapi.ErrorDetail{Code: CodeDraining,
			Message: "this worker is shutting down; send the request again"}}
		writeProbe(w, http.StatusServiceUnavailable, body)
		return
	}
	g.inflight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		if g.draining && g.inflight == 0 && g.idle != nil {
			close(g.idle)
			g.idle = nil
		}
		g.mu.Unlock()
	}()
	g.next.ServeHTTP(w, r)
}

// refuse refuses new requests from now on.
func (g *apiGate) refuse() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
}

// drain refuses new requests from now on and waits until none is in flight or ctx ends;
// it reports how many were still in flight then.
func (g *apiGate) drain(ctx context.Context) int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	g.draining = true
	if g.inflight == 0 {
		g.mu.Unlock()
		return 0
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.inflight
	}
}
