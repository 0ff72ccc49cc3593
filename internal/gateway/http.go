package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinkfacade"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/webui"
)

// Defaults of the HTTP settings.
const (
	// DefaultHTTPAddr serves the reply API, /metrics and /healthz on loopback only.
	DefaultHTTPAddr = "127.0.0.1:8090"
	// DefaultHealthWindow is three long-poll periods of getupdates.
	DefaultHealthWindow = 3 * ilink.DefaultPollTimeout
	// MaxAPIStoreTimeout bounds Config.APIStoreTimeout; MaxAPIUploads Config.APIMaxUploads.
	MaxAPIStoreTimeout = time.Minute
	MaxAPIUploads      = 64
)

// setHTTPAddr parses --http-addr: host:port (port 0 picks a free one), or "" / "off".
func setHTTPAddr(c *Config, v string) error {
	if v == "" || strings.EqualFold(v, "off") {
		c.HTTPAddr = ""
		return nil
	}
	if err := checkHTTPAddr(v); err != nil {
		return err
	}
	c.HTTPAddr = v
	return nil
}

func checkHTTPAddr(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:8090, or off")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number in 0..65535")
	}
	return nil
}

// validateHTTP checks the HTTP settings of a configuration.
func (c Config) validateHTTP() error {
	var errs []error
	if c.HTTPAddr != "" {
		if err := checkHTTPAddr(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("HTTP address %q: %v", c.HTTPAddr, err))
		}
	}
	if c.AdminAddr != "" {
		if err := checkHTTPAddr(c.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("admin address %q: %v", c.AdminAddr, err))
		} else if c.AdminAddr == c.HTTPAddr && !strings.HasSuffix(c.AdminAddr, ":0") {
			errs = append(errs, fmt.Errorf("admin address %q is the HTTP address: give it another port, or leave it unset to serve both on one", c.AdminAddr))
		}
	}
	if c.HealthWindow <= 0 {
		errs = append(errs, fmt.Errorf("health window %v must be positive", c.HealthWindow))
	}
	if c.APIStoreTimeout < 0 || c.APIStoreTimeout > MaxAPIStoreTimeout {
		errs = append(errs, fmt.Errorf("reply API store timeout %v must be positive and at most %v (0: the default %v)",
			c.APIStoreTimeout, MaxAPIStoreTimeout, replyapi.DefaultStoreTimeout))
	}
	if c.APIMaxUploads < 0 || c.APIMaxUploads > MaxAPIUploads {
		errs = append(errs, fmt.Errorf("reply API uploads %d must be between 1 and %d (0: the default %d)",
			c.APIMaxUploads, MaxAPIUploads, replyapi.DefaultMaxUploads))
	}
	if err := c.validateCodec(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// httpEnabled reports whether Run serves HTTP (the reply API, the admin endpoints or both).
func httpEnabled(cfg Config, opts Options) bool {
	return cfg.HTTPAddr != "" || opts.HTTPListener != nil || adminSeparate(cfg, opts)
}

// apiEnabled reports whether Run serves the reply API.
func apiEnabled(cfg Config, opts Options) bool {
	return cfg.HTTPAddr != "" || opts.HTTPListener != nil
}

// adminSeparate reports whether the admin endpoints have a listener of their own.
func adminSeparate(cfg Config, opts Options) bool {
	return cfg.AdminAddr != "" || opts.AdminListener != nil
}

// setAdminAddr parses --admin-addr: host:port (port 0 picks a free one), or "" (the admin
// endpoints are served on --http-addr).
func setAdminAddr(c *Config, v string) error {
	if v == "" {
		c.AdminAddr = ""
		return nil
	}
	if err := checkHTTPAddr(v); err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:9090")
	}
	c.AdminAddr = v
	return nil
}

// newRegistry returns the metrics registry of a run: the injected one, a new one when
// HTTP is served, or nil (nothing recorded) when it is not.
func newRegistry(cfg Config, opts Options, logger *slog.Logger) (*metrics.Registry, error) {
	if opts.Metrics != nil {
		return opts.Metrics, nil
	}
	if !httpEnabled(cfg, opts) {
		return nil, nil
	}
	reg, err := metrics.New(logger.With("component", "metrics"))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return reg, nil
}

// temporalMetrics is the SDK metrics handler of reg (nil: the SDK's no-op).
func temporalMetrics(reg *metrics.Registry) client.MetricsHandler {
	if reg == nil {
		return nil
	}
	return reg.TemporalHandler()
}

// httpServer is one of the worker's HTTP servers.
type httpServer struct {
	name  string
	srv   *http.Server
	grace time.Duration
	log   *slog.Logger
	once  sync.Once
	done  chan struct{}
}

// httpServers are the worker's HTTP servers: the reply API on HTTPAddr and the admin
// endpoints on AdminAddr, or one server with both when there is no admin address.
type httpServers struct {
	api   *httpServer // nil when the reply API is off
	admin *httpServer // nil when the admin endpoints are served by api
	gate  *apiGate    // the reply API's requests (nil when it is off)
	mcp   *mcpserver.Server
	// stopMCP ends the MCP server's claim keeping.
	stopMCP context.CancelFunc
	facade  *ilinkfacade.Facade
	// stopFacade ends the iLink facade's wake-ups and sweeps.
	stopFacade context.CancelFunc
	grace      time.Duration
	log        *slog.Logger
}

// UIPath is where the enrollment web front end is served when ILINKFLOW_UI_TOKEN is set.
const UIPath = "/ui"

// startHTTP starts the HTTP servers when enabled (nil otherwise); fatal receives a serve
// failure.
func startHTTP(cfg Config, opts Options, st *store.Store, tc client.Client, reg *metrics.Registry, media replyapi.Media, typing replyapi.Typing,
	ready *readiness, logger *slog.Logger, fatal func(error)) (*httpServers, error) {
	if !httpEnabled(cfg, opts) {
		return nil, nil
	}
	log := logger.With("component", "http")
	if err := reg.WatchStore(st, metrics.StoreOptions{}); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	adminMux := http.NewServeMux()
	adminMux.Handle("/metrics", reg.Handler())
	adminMux.HandleFunc(LivezPath, livez)
	adminMux.Handle(ReadyzPath, ready)
	adminMux.Handle(HealthzPath, &metrics.Health{Source: st, Window: cfg.HealthWindow, Logger: log})
	codec, err := codecHandler(cfg, opts.DevUICodecOrigin)
	if err != nil {
		return nil, err
	}
	adminMux.Handle(CodecPath, codec)
	adminRoutes := "/metrics " + LivezPath + " " + ReadyzPath + " " + HealthzPath
	if !cfg.CodecToken.IsZero() {
		adminRoutes += " " + CodecPath
	}
	if !cfg.UIToken.IsZero() {
		ui, err := webui.New(webui.Config{Temporal: tc, TaskQueue: cfg.TaskQueue, Store: st, OperatorToken: cfg.UIToken,
			Secure: cfg.UISecureCookie, Prefix: UIPath, Logger: logger.With("component", "webui"),
			ClientAddressHeader: cfg.UIClientAddressHeader, PublicURL: cfg.UIPublicURL,
			TemporalUIURL: cfg.TemporalUIURL, Namespace: cfg.TemporalNamespace})
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		adminMux.Handle(UIPath+"/", ui)
		adminRoutes += " " + UIPath + "/"
	}

	s := &httpServers{grace: cfg.ShutdownGrace, log: log}
	var apiMux *http.ServeMux
	if apiEnabled(cfg, opts) {
		s.gate = &apiGate{next: replyapi.New(replyapi.Config{
			Store:         st,
			Temporal:      tc,
			Metrics:       reg.Product(),
			Logger:        logger.With("component", "replyapi"),
			MaxTextBytes:  cfg.Limits.MaxTextBytes,
			Media:         media,
			Typing:        typing,
			MaxMediaBytes: cfg.Limits.MediaCap(),
			StoreTimeout:  cfg.APIStoreTimeout,
			MaxUploads:    cfg.APIMaxUploads,
		})}
		apiMux = http.NewServeMux()
		apiMux.Handle("/v1/", s.gate)
		// The MCP tools act through the gate: a worker that drains refuses them too.
		s.mcp = mcpserver.New(mcpserver.Config{Store: st, Replies: s.gate, Logger: logger.With("component", "mcp"), Metrics: reg.Product(),
			MaxMediaBytes: int(cfg.Limits.MediaCap())})
		apiMux.Handle(mcpserver.Path, s.mcp.Handler())
		var mcpCtx context.Context
		mcpCtx, s.stopMCP = context.WithCancel(context.Background())
		go s.mcp.Run(mcpCtx)
		// The iLink facade too: its replies, typing and downloads go through the gate.
		s.facade = ilinkfacade.New(ilinkfacade.Config{Store: st, Replies: s.gate, Keys: cfg.Keyring, PublicURL: cfg.ILinkPublicURL,
			Logger: logger, Metrics: reg.Product(), NoListen: !facadeListens(cfg, opts)})
		apiMux.Handle(ilinkfacade.BotPath, s.facade.Handler())
		apiMux.Handle(ilinkfacade.CDNPath, s.facade.Handler())
		apiMux.Handle(ilinkfacade.LoginPath, s.facade.Handler())
		var facadeCtx context.Context
		facadeCtx, s.stopFacade = context.WithCancel(context.Background())
		go s.facade.Run(facadeCtx)
	}
	apiRoutes := "/v1/reply /v1/done /v1/remind /v1/messages/{key}/attachments/{n} /v1/typing " + mcpserver.Path + " " +
		ilinkfacade.BotPath + " " + ilinkfacade.CDNPath + " " + ilinkfacade.LoginPath
	switch {
	case apiMux == nil:
		// Admin endpoints only.
	case adminSeparate(cfg, opts):
	default:
		apiMux.Handle("/", adminMux) // one listener serves both
		apiRoutes += " " + adminRoutes
	}

	// Listen on both before serving either, so that a bad address fails the start whole.
	var apiLn, adminLn net.Listener
	if apiMux != nil {
		if apiLn, err = listen(opts.HTTPListener, cfg.HTTPAddr, "HTTP"); err != nil {
			return nil, err
		}
	}
	if adminSeparate(cfg, opts) {
		if adminLn, err = listen(opts.AdminListener, cfg.AdminAddr, "the admin endpoints"); err != nil {
			if apiLn != nil {
				_ = apiLn.Close()
			}
			return nil, err
		}
	}
	// The token-less codec path of `starter dev` is served on loopback only.
	codecLn := apiLn
	if adminLn != nil {
		codecLn = adminLn
	}
	if err := checkDevUICodecListener(opts.DevUICodecOrigin, codecLn); err != nil {
		for _, ln := range []net.Listener{apiLn, adminLn} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if apiLn != nil {
		s.api = serve("HTTP", apiLn, apiMux, cfg.ShutdownGrace, log, fatal)
		log.Info("serving HTTP", "addr", apiLn.Addr().String(), "routes", apiRoutes)
		if opts.HTTPStarted != nil {
			opts.HTTPStarted(apiLn.Addr())
		}
	}
	if adminLn != nil {
		s.admin = serve("admin HTTP", adminLn, adminMux, cfg.ShutdownGrace, log, fatal)
		log.Info("serving admin HTTP", "addr", adminLn.Addr().String(), "routes", adminRoutes)
		if opts.AdminStarted != nil {
			opts.AdminStarted(adminLn.Addr())
		}
	}
	return s, nil
}

// listen returns ln when set, else a listener on addr.
func listen(ln net.Listener, addr, what string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for %s on %s: %w", what, addr, err)
	}
	return ln, nil
}

// serve serves h on ln until shut down.
func serve(name string, ln net.Listener, h http.Handler, grace time.Duration, log *slog.Logger, fatal func(error)) *httpServer {
	s := &httpServer{
		name: name,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      replyapi.DefaultReplyTimeout + 30*time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		grace: grace,
		log:   log,
		done:  make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fatal(fmt.Errorf("%s server: %w", name, err))
		}
	}()
	return s
}

// refuseAPI makes the reply API refuse new requests (503 draining). Safe on nil.
func (s *httpServers) refuseAPI() {
	if s != nil {
		s.gate.refuse()
	}
}

// drainAPI refuses new reply API requests (503 draining) and lets those in flight
// (replies waiting for their send) finish for up to the shutdown grace; then a reply API
// server of its own closes. It runs before the worker stops, so that a reply in flight
// still has a worker to run its send. The admin endpoints keep serving. Safe on nil.
func (s *httpServers) drainAPI() {
	if s == nil {
		return
	}
	if s.gate != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		left := s.gate.drain(ctx)
		cancel()
		if left > 0 {
			s.log.Warn("reply API requests still in flight at the end of the grace", "requests", left)
		}
	}
	if s.mcp != nil {
		// The MCP sessions end here: what they took and did not finish is offered again
		// (to a session on another worker, or on this one's successor).
		s.stopMCP()
		s.mcp.Close()
	}
	if s.facade != nil {
		// The facade's long polls answer an empty page at once: the client polls again,
		// on another worker or this one's successor, from the same cursor.
		s.stopFacade()
		s.facade.Close()
	}
	if s.admin != nil {
		s.api.shutdown()
	}
}

// shutdown closes every server (after drainAPI: nothing of the reply API is left in
// flight). Safe on nil and more than once.
func (s *httpServers) shutdown() {
	if s == nil {
		return
	}
	if s.facade != nil {
		// Also on the ways out that skip the drain: the facade's listener lets go of its
		// connection.
		s.stopFacade()
		s.facade.Close()
	}
	s.api.shutdown()
	s.admin.shutdown()
}

// shutdown stops accepting requests and lets in-flight ones finish for up to the
// shutdown grace, then closes what is left. Safe on nil and more than once.
func (s *httpServer) shutdown() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.log.Warn("HTTP requests still in flight at the end of the grace; closing them", "server", s.name, "error", err)
			_ = s.srv.Close()
		}
		<-s.done
		s.log.Info("HTTP server stopped", "server", s.name)
	})
}
