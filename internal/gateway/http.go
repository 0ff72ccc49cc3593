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

// httpEnabled reports whether Run serves HTTP.
func httpEnabled(cfg Config, opts Options) bool {
	return cfg.HTTPAddr != "" || opts.HTTPListener != nil
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

// httpServer is the worker's HTTP server: the reply API, /metrics and /healthz.
type httpServer struct {
	srv   *http.Server
	grace time.Duration
	log   *slog.Logger
	once  sync.Once
	done  chan struct{}
}

// UIPath is where the enrollment web front end is served when ILINKFLOW_UI_TOKEN is set.
const UIPath = "/ui"

// startHTTP starts the HTTP server when enabled (nil otherwise); fatal receives a serve
// failure.
func startHTTP(cfg Config, opts Options, st *store.Store, tc client.Client, reg *metrics.Registry, media replyapi.Media, typing replyapi.Typing,
	logger *slog.Logger, fatal func(error)) (*httpServer, error) {
	if !httpEnabled(cfg, opts) {
		return nil, nil
	}
	log := logger.With("component", "http")
	if err := reg.WatchStore(st, metrics.StoreOptions{}); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", replyapi.New(replyapi.Config{
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
	}))
	mux.Handle("/metrics", reg.Handler())
	mux.Handle("/healthz", &metrics.Health{Source: st, Window: cfg.HealthWindow, Logger: log})
	codec, err := codecHandler(cfg)
	if err != nil {
		return nil, err
	}
	mux.Handle(CodecPath, codec)
	if !cfg.UIToken.IsZero() {
		ui, err := webui.New(webui.Config{Temporal: tc, TaskQueue: cfg.TaskQueue, Store: st, OperatorToken: cfg.UIToken,
			Secure: cfg.UISecureCookie, Prefix: UIPath, Logger: logger.With("component", "webui")})
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		mux.Handle(UIPath+"/", ui)
	}

	ln := opts.HTTPListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("listen for HTTP on %s: %w", cfg.HTTPAddr, err)
		}
	}
	s := &httpServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      replyapi.DefaultReplyTimeout + 30*time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		grace: cfg.ShutdownGrace,
		log:   log,
		done:  make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fatal(fmt.Errorf("HTTP server: %w", err))
		}
	}()
	routes := "/v1/reply /v1/done /v1/messages/{key}/attachments/{n} /v1/typing /metrics /healthz"
	if !cfg.CodecToken.IsZero() {
		routes += " " + CodecPath
	}
	if !cfg.UIToken.IsZero() {
		routes += " " + UIPath + "/"
	}
	log.Info("serving HTTP", "addr", ln.Addr().String(), "routes", routes)
	if opts.HTTPStarted != nil {
		opts.HTTPStarted(ln.Addr())
	}
	return s, nil
}

// shutdown stops accepting requests and lets in-flight ones (replies waiting for their
// send) finish for up to the shutdown grace, then closes what is left. It runs before the
// worker stops, so that a reply in flight still has a worker to run its send. Safe on
// nil and more than once.
func (s *httpServer) shutdown() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.log.Warn("HTTP requests still in flight at the end of the grace; closing them", "error", err)
			_ = s.srv.Close()
		}
		<-s.done
		s.log.Info("HTTP server stopped")
	})
}
