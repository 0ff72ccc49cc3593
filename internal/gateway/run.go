// Package gateway builds and runs an ilinkflow worker process: it connects PostgreSQL
// (migrating the schema), the store and Temporal, serves the workflows and activities on
// the task queue, and reconciles Temporal with the store at start (every active account
// has its poller, every open window its workflow, crash-orphaned reservations are
// released). Configuration comes from flags and the environment ([ConfigFromEnv]).
// Nothing here logs a secret: tokens are sealing.Secret or ilink.Secret values, the
// database URL is reduced to its host, and the Temporal SDK's logger drops payloads.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/temporalconn"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// Options are the dependencies a caller (a test, a local all-in-one command) may inject
// into Run instead of letting it build them from the configuration.
type Options struct {
	// Logger is the process logger (cfg.NewLogger(os.Stderr) when nil).
	Logger *slog.Logger
	// Handler receives deliverable messages (the agent hand-off); nil: none configured.
	Handler handoff.Handler
	// Pool, when set, is used instead of connecting to cfg.DatabaseURL; Run does not close it.
	Pool *pgxpool.Pool
	// Keyring, when set, overrides cfg.Keyring.
	Keyring *sealing.Keyring
	// Temporal, when set, is used instead of dialing cfg.TemporalAddress; Run does not
	// close it. Its namespace wins over cfg.TemporalNamespace. The caller owns its data
	// converter: dial it with payloadcodec.DataConverter(keyring) so payloads are
	// encrypted in Temporal like a dialed client's (docs/payload-codec.md).
	Temporal client.Client
	// NewILinkClient builds iLink clients (nil: ilink.New), e.g. to reach a simulator.
	NewILinkClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
	// Ready, when set, is called once the worker runs and the start-up reconcile is done.
	Ready func(ReconcileReport)

	// HTTPListener, when set, serves the reply API (and the admin endpoints when there is
	// no admin listener) instead of listening on cfg.HTTPAddr; Run closes it once it
	// serves. HTTPStarted, when set, is called with the bound address once the server
	// serves (cfg.HTTPAddr may use port 0).
	HTTPListener net.Listener
	HTTPStarted  func(net.Addr)
	// AdminListener and AdminStarted are the same for the admin endpoints (/metrics,
	// /livez, /readyz, /healthz, /codec/, /ui/) instead of cfg.AdminAddr.
	AdminListener net.Listener
	AdminStarted  func(net.Addr)
	// Draining, when set, is called once the worker starts draining (its context ended):
	// /readyz answers 503 and new reply API requests are refused, and nothing is stopped
	// yet. Run waits for it to return.
	Draining func()
	// Metrics, when set, is the registry Run records into and serves. A caller that
	// injects Temporal dials its client with Metrics.TemporalHandler() as
	// client.Options.MetricsHandler to get the SDK's metrics too.
	Metrics *metrics.Registry
	// TracerProvider, when set, is used instead of the one cfg.Tracing builds (a test's
	// in-memory recorder); Run does not shut it down. It traces through the Temporal
	// client Run dials; a caller that injects Temporal adds
	// tracing.TemporalInterceptor(TracerProvider) to that client's interceptors itself.
	TracerProvider trace.TracerProvider

	// DevUICodecOrigin is for `starter dev` only: the worker (cmd/worker) never sets it
	// and no flag or environment variable reaches it (it is not in Config). It is the
	// origin of the Temporal dev server's Web UI (e.g. "http://127.0.0.1:8233"), which
	// has no login and cannot send the codec endpoint's bearer token: a request to
	// /codec/ with exactly this Origin, no Authorization header, over a loopback
	// connection, is served as if it carried cfg.CodecToken; every other request needs
	// the token as usual. It must be an origin on a loopback host, cfg.CodecToken must
	// be set and cfg.CodecCORSOrigin empty or this origin (it becomes the endpoint's one
	// CORS origin), and the listener serving /codec/ must be on a loopback address;
	// otherwise Run fails. See docs/payload-codec.md ("The Temporal UI of `starter dev`").
	DevUICodecOrigin string
}

// Run runs a worker until ctx is done: it connects PostgreSQL and applies the migrations,
// builds the store, dials Temporal, starts a worker on cfg.TaskQueue with the workflows
// and activities, reconciles once, then waits. On cancellation it stops the worker, which
// lets in-flight activities (sends) finish for up to cfg.ShutdownGrace, and returns nil.
// A failure to start, a failed reconcile or a fatal worker error is returned.
func Run(ctx context.Context, cfg Config, opts Options) (err error) {
	if opts.Keyring != nil {
		cfg.Keyring = opts.Keyring
	}
	if cfg.LogFormat == "" {
		cfg.LogFormat = "text"
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = cfg.NewLogger(os.Stderr)
	}
	logger.Info("worker starting", "config", cfg)
	// A shutdown requested while starting is not a failure.
	defer func() {
		if err != nil && ctx.Err() != nil {
			logger.Info("worker start interrupted", "error", err)
			err = nil
		}
	}()

	tp, stopTracing, err := startTracing(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer stopTracing(logger) // last: the spans of the stop are flushed too

	reg, err := newRegistry(cfg, opts, logger)
	if err != nil {
		return err
	}
	if opts.Metrics == nil {
		defer func() { _ = reg.Close(context.Background()) }()
	}

	pool, st, closePool, err := openStore(ctx, cfg, opts, reg, logger)
	if err != nil {
		return err
	}
	defer closePool()

	tc, closeTemporal, err := dialTemporal(ctx, cfg, opts, reg, tp, logger)
	if err != nil {
		return err
	}
	defer closeTemporal()

	// Every workflow of an account carries search attributes: without them in the
	// namespace no poller or window could start.
	ns := cfg.TemporalNamespace
	if opts.Temporal != nil {
		ns = "" // the injected client's namespace, whatever it is
	}
	if err := wfapi.CheckSearchAttributes(ctx, tc, ns); err != nil {
		return err
	}

	ready := newReadiness(pool, tc, logger.With("component", "readiness"))
	handler, err := newHandler(cfg, opts, tc, logger)
	if err != nil {
		return err
	}
	acts := newActivities(cfg, opts, st, pool, tc, handler, reg, logger)
	// The liveness session first, so that the leases this worker takes carry its key: a
	// peer then moves them seconds after this process dies (docs/poll-leases.md).
	live := activity.StartLiveness(acts)
	defer live.Stop() // a stop that did not run (a failed start) still ends it
	select {
	case <-live.Ready():
	case <-time.After(livenessWait):
		logger.Warn("no liveness session yet: the leases taken until there is one move only after the lease ttl if this worker dies",
			"waited", livenessWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	fatal := make(chan error, 1)
	w := newWorker(tc, cfg, acts, fatal)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.TaskQueue, err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			logger.Info("worker stopping", "grace", cfg.ShutdownGrace)
			// The SDK drops a poll task its pollers receive as the stop begins; once they
			// stopped, the polls Temporal counts as started here and never run are failed,
			// so they are retried elsewhere at once, not after their start-to-close.
			dropped := make(chan struct{})
			go func() {
				defer close(dropped)
				t := time.NewTimer(droppedPollsAfter)
				defer t.Stop()
				<-t.C
				dctx, cancel := context.WithTimeout(context.Background(), handOverWithin)
				defer cancel()
				n, err := activity.FailDroppedPolls(dctx, acts)
				if n > 0 {
					logger.Info("poll activities handed to this worker as it stopped retried elsewhere", "polls", n)
				}
				if err != nil {
					logger.Warn("failing the poll activities dropped at the stop failed; peers fail them once this worker is gone", "error", err)
				}
			}()
			// Polls adopted from dead workers stop as the activities do: each after its long
			// poll, handing its bot over.
			adopted := make(chan struct{})
			go func() {
				defer close(adopted)
				activity.StopAdoptedPolls(acts, cfg.ShutdownGrace)
			}()
			w.Stop()
			<-dropped
			<-adopted
			// Polls that ended released their leases and their pollers scheduled the
			// next poll on another worker; a poll still running past the grace hands
			// its lease over here.
			hctx, cancel := context.WithTimeout(context.Background(), handOverWithin)
			n, err := activity.HandOverLeases(hctx, acts)
			if n > 0 {
				logger.Info("poll leases handed over", "leases", n)
			}
			if err != nil {
				logger.Warn("handing poll leases over failed; they expire", "error", err)
			}
			// Last: a lease still held now moves at once, as a dead worker's.
			live.Stop()
			cancel()
		}
	}
	defer stop()
	if cfg.Versioned() {
		logger.Info("worker started", "task_queue", cfg.TaskQueue, "deployment", cfg.DeploymentName, "build_id", cfg.BuildID,
			"note", "new workflows go to the deployment's current version; make this one current with: temporal worker deployment set-current-version --deployment-name "+
				cfg.DeploymentName+" --build-id "+cfg.BuildID)
	} else {
		logger.Info("worker started", "task_queue", cfg.TaskQueue)
	}
	media := &activity.MediaFetcher{Client: acts.Config.Client, NewClient: opts.NewILinkClient}
	httpSrv, err := startHTTP(cfg, opts, st, tc, reg, media, acts.Typer, ready, logger, func(err error) {
		select {
		case fatal <- err:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer httpSrv.shutdown() // before the worker stops (defers run last-in first-out)

	// The lease supervisor replaces the poll activities of dead workers' bots, a worker
	// this one replaces included: from the start, before the reconcile.
	supCtx, stopSup := context.WithCancel(ctx)
	defer stopSup()
	go activity.NewLeaseSupervisor(acts).Run(supCtx)

	rep, err := ReconcileWithOptions(ctx, st, tc, ReconcileOptions{
		TaskQueue:  cfg.TaskQueue,
		Activities: acts,
		Logger:     logger.With("component", "reconcile"),
	})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	logger.Info("reconciled", "report", rep)
	ensureRetention(ctx, st, tc, cfg, logger.With("component", "retention"))
	ready.started.Store(true)
	if opts.Ready != nil {
		opts.Ready(rep)
	}

	select {
	case <-ctx.Done():
		// The drain: not ready at once (a load balancer stops sending), the reply API
		// finishes what it has, then the worker stops taking tasks and hands its poll
		// leases over; the admin endpoints answer until the end.
		ready.draining.Store(true)
		httpSrv.refuseAPI()
		logger.Info("worker draining: not ready; finishing reply API requests, then stopping and handing poll leases over")
		stopSup()
		if opts.Draining != nil {
			opts.Draining()
		}
		httpSrv.drainAPI()
		stop()
		httpSrv.shutdown()
		logger.Info("worker stopped")
		return nil
	case err := <-fatal:
		ready.draining.Store(true)
		httpSrv.shutdown()
		stop()
		return fmt.Errorf("worker: %w", err)
	}
}

// startTracing returns the tracer provider of the run (nil: tracing is off) and the
// function that flushes and stops one Run built: opts.TracerProvider, else the OTLP
// exporter cfg.Tracing names, else none.
func startTracing(ctx context.Context, cfg Config, opts Options) (trace.TracerProvider, func(*slog.Logger), error) {
	if opts.TracerProvider != nil {
		return opts.TracerProvider, func(*slog.Logger) {}, nil
	}
	sdk, shutdown, err := tracing.Start(ctx, cfg.Tracing)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration: %w", err)
	}
	if sdk == nil {
		return nil, func(*slog.Logger) {}, nil
	}
	return sdk, func(logger *slog.Logger) {
		fctx, cancel := context.WithTimeout(context.Background(), tracing.Flush)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			logger.Warn("flushing the last spans failed", "error", err)
		}
	}, nil
}

// handOverWithin bounds the hand-over of the poll leases left at the end of a stop.
const handOverWithin = 10 * time.Second

// TaskPollers is the worker's requests for activity tasks, and for workflow tasks, open at
// Temporal: the default partition count of a task queue.
const TaskPollers = 4

// droppedPollsAfter is how long after a stop began its worker looks for the poll tasks its
// pollers received and dropped as they stopped: they stop within milliseconds.
const droppedPollsAfter = time.Second

// livenessWait bounds the wait for the liveness session at start.
const livenessWait = 10 * time.Second

// activitySlotsBesidePolls is how many activities a worker runs at once besides one poll
// per bot (sends, hand-offs, store activities).
const activitySlotsBesidePolls = 256

// applyPoolBound bounds the worker's connections by maxConns unless the URL sets
// pool_max_conns itself (the pool's bound then, the connections beside it more): the pool
// gets all but the connections held beside it, the worker's liveness session
// (activity.StartLiveness) and, with the iLink facade's listener, that one.
func applyPoolBound(pc *pgxpool.Config, url string, maxConns int, listener bool) {
	if maxConns <= 0 || strings.Contains(url, "pool_max_conns") {
		return
	}
	beside := 1
	if listener {
		beside++
	}
	pc.MaxConns = int32(max(maxConns-beside, 1))
}

// facadeListens reports whether the iLink facade listens for new offers on a connection
// of its own: when the reply API is on and the connection bound leaves room for it beside
// a pool of two and the liveness session (otherwise its polls look every second).
func facadeListens(cfg Config, opts Options) bool {
	return apiEnabled(cfg, opts) && (cfg.DBMaxConns <= 0 || cfg.DBMaxConns >= 4)
}

// activitiesConfig is the activities' share of the configuration.
func (c Config) activitiesConfig() activity.Config {
	return activity.Config{
		TaskQueue:       c.TaskQueue,
		Client:          c.ILinkConfig(),
		PollSession:     c.PollSession,
		HeartbeatEvery:  c.Heartbeat,
		SendGap:         sendGap(c.SendGap),
		ThrottlePenalty: c.ThrottlePenalty,
		MaxAccounts:     c.MaxAccounts,
		DeferredBefore:  c.DeferredBefore,
		SessionTTL:      c.SessionTTL,
		LeaseTTL:        c.PollLeaseTTL,
		Namespace:       c.TemporalNamespace,
		Poller:          wfapi.PollerConfig{StalePause: wfapi.Duration(c.StalePause), PollSession: wfapi.Duration(c.PollSession)},
		ReofferAfter:    reofferAfter(c.ReofferAfter),
		Retention:       c.Retention,
	}
}

// reofferAfter maps the configuration's "0: never" to the workflow's convention, where
// zero means the default interval and a negative value means never.
func reofferAfter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// newHandler is the agent handler: opts.Handler when set, else the one the configuration
// selects (nil for none).
func newHandler(cfg Config, opts Options, tc client.Client, logger *slog.Logger) (handoff.Handler, error) {
	if opts.Handler != nil {
		logger.Info("agent hand-off", "handler", "injected", "reoffer_after", cfg.ReofferAfter)
		return opts.Handler, nil
	}
	h, err := handoff.New(cfg.HandoffConfig(), tc, nil) // the default route is never mcp
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	attrs := []any{"handler", cfg.Handler, "reoffer_after", cfg.ReofferAfter}
	switch cfg.Handler {
	case handoff.KindWebhook:
		if u, err := url.Parse(cfg.WebhookURL); err == nil {
			attrs = append(attrs, "webhook_host", u.Host, "webhook_timeout", cfg.WebhookTimeout) // not the URL: it may hold a key
		}
	case handoff.KindWorkflow:
		attrs = append(attrs, "agent_workflow", cfg.AgentWorkflow, "agent_task_queue", cfg.AgentTaskQueue)
	}
	logger.Info("agent hand-off", attrs...)
	return h, nil
}

// sendGap maps the configuration's "0: no gap" to the activities' convention, where zero
// means the default gap and a negative value means none.
func sendGap(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// openStore connects to PostgreSQL (or takes the injected pool), brings the schema up to
// date and opens the store; a pool it opens counts its round trips in reg. The returned function closes a pool it opened.
func openStore(ctx context.Context, cfg Config, opts Options, reg *metrics.Registry, logger *slog.Logger) (*pgxpool.Pool, *store.Store, func(), error) {
	pool, closePool := opts.Pool, func() {}
	if pool == nil {
		pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
		if err != nil {
			return nil, nil, nil, errors.New("database URL is not a valid PostgreSQL URL or DSN")
		}
		applyPoolBound(pc, cfg.DatabaseURL, cfg.DBMaxConns, facadeListens(cfg, opts))
		if t := reg.DBTracer(); t != nil {
			pc.ConnConfig.Tracer = t // counts round trips for /metrics
		}
		pool, err = pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connect PostgreSQL: %w", err)
		}
		closePool = pool.Close
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, nil, nil, fmt.Errorf("connect PostgreSQL at %s:%d: %w", pc.ConnConfig.Host, pc.ConnConfig.Port, err)
		}
	}
	if err := prepareSchema(ctx, cfg, pool, logger); err != nil {
		closePool()
		return nil, nil, nil, err
	}
	st, err := store.New(pool, cfg.Keyring, cfg.Limits)
	if err != nil {
		closePool()
		return nil, nil, nil, err
	}
	return pool, st, closePool, nil
}

// prepareSchema applies the pending migrations, or with cfg.Migrate off checks that none
// is pending (a schema that lacks one is an error naming "starter migrate").
func prepareSchema(ctx context.Context, cfg Config, pool *pgxpool.Pool, logger *slog.Logger) error {
	if !cfg.Migrate {
		st, err := db.Check(ctx, pool)
		if err != nil {
			return err
		}
		logger.Info("schema ready", "version", st.Version, "migrate", false)
		return nil
	}
	mig, err := db.MigrateWith(ctx, pool, db.Options{Logger: logger.With("component", "migrate"),
		LockTimeout: cfg.MigrateLockTimeout, StatementTimeout: cfg.MigrateStatementTimeout})
	if err != nil {
		return err
	}
	logger.Info("schema ready", "version", mig.Version, "applied", len(mig.Applied))
	return nil
}

// dialTemporal connects to Temporal with the payload codec (or takes the injected
// client). The returned function closes a client it dialed.
func dialTemporal(ctx context.Context, cfg Config, opts Options, reg *metrics.Registry, tp trace.TracerProvider, logger *slog.Logger) (client.Client, func(), error) {
	if opts.Temporal != nil {
		return opts.Temporal, func() {}, nil
	}
	var interceptors []interceptor.ClientInterceptor
	if tp != nil {
		// The client's calls, and the workflows and activities of the workers built on it,
		// get spans, and the trace travels in Temporal's headers.
		ti, err := tracing.TemporalInterceptor(tp)
		if err != nil {
			return nil, nil, err
		}
		interceptors = append(interceptors, ti)
	}
	// Every payload is encrypted in Temporal (docs/payload-codec.md).
	dc, err := payloadcodec.DataConverter(cfg.Keyring)
	if err != nil {
		return nil, nil, err
	}
	conn := cfg.Temporal
	if conn.IsZero() {
		conn = temporalconn.Plain(cfg.TemporalAddress, cfg.TemporalNamespace)
	}
	conn = conn.WithTarget(cfg.TemporalAddress, cfg.TemporalNamespace)
	// Dial bounds the connection and names the cause of a failure (TLS, credentials,
	// namespace) with a stable code: the worker exits with it instead of retrying.
	tc, err := temporalconn.Dial(ctx, conn, client.Options{
		Logger:         NewTemporalLogger(logger.With("component", "temporal")),
		MetricsHandler: temporalMetrics(reg),
		DataConverter:  dc,
		Interceptors:   interceptors,
		ConnectionOptions: client.ConnectionOptions{
			GrpcCompression: grpcCompression(cfg.TemporalCompression),
		},
	})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("Temporal connected", "temporal", conn)
	return tc, tc.Close, nil
}

// newActivities wires the activities' dependencies: all bots share one HTTP client, and
// the hand-offs and the reply API share one Typer (an agent's POST /v1/typing cancel ends
// the keep-alive its hand-off started).
func newActivities(cfg Config, opts Options, st *store.Store, pool *pgxpool.Pool, tc client.Client,
	handler handoff.Handler, reg *metrics.Registry, logger *slog.Logger) *activity.Activities {
	acts := &activity.Activities{
		Store:     st,
		Pool:      pool,
		Temporal:  tc,
		Handler:   handler,
		Metrics:   reg.Product(),
		Config:    cfg.activitiesConfig(),
		Logger:    logger.With("component", "activities"),
		NewClient: opts.NewILinkClient,
	}
	if acts.Config.Client.HTTPClient == nil && opts.NewILinkClient == nil {
		acts.Config.Client.HTTPClient = ilink.NewSharedHTTPClient(cfg.MaxAccounts + 64)
	}
	acts.Typer = &activity.Typer{Store: st, Client: acts.Config.Client, NewClient: opts.NewILinkClient,
		Logger: logger.With("component", "typing")}
	return acts
}

// newWorker is the Temporal worker of the workflows and acts; a fatal worker error goes
// to fatal.
func newWorker(tc client.Client, cfg Config, acts *activity.Activities, fatal chan<- error) worker.Worker {
	opts := worker.Options{
		// Every polled bot runs one long activity; sends, hand-offs and store activities
		// need slots besides.
		MaxConcurrentActivityExecutionSize: cfg.MaxAccounts + activitySlotsBesidePolls,
		// As many requests for work open as a task queue has partitions by default (4):
		// with the SDK's two, a task on a partition no poller waits on waited up to 2 s
		// for matching to forward it (docs/scale-test.md). Not more: a frozen worker's
		// open requests are handed retries it never runs (docs/poll-leases.md).
		MaxConcurrentActivityTaskPollers: TaskPollers,
		MaxConcurrentWorkflowTaskPollers: TaskPollers,
		// Stop waits this long for in-flight activities, so a send in progress completes
		// (or records its outcome) instead of being abandoned mid-transmit.
		WorkerStopTimeout: cfg.ShutdownGrace,
		// The lease holder's name: a peer that finds this process dead fails the poll
		// activities Temporal counts as started by it.
		Identity: activity.WorkerIdentity(acts),
		OnFatalError: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	}
	if cfg.Versioned() {
		// A Worker Deployment Version: each workflow type declares its versioning
		// behaviour at registration (workflows.Register).
		opts.DeploymentOptions = worker.DeploymentOptions{
			UseVersioning: true,
			Version:       worker.WorkerDeploymentVersion{DeploymentName: cfg.DeploymentName, BuildID: cfg.BuildID},
		}
	}
	w := worker.New(tc, cfg.TaskQueue, opts)
	workflows.Register(w)
	w.RegisterActivity(acts)
	return w
}
