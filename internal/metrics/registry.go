package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// Registry is the process's Prometheus registry: the product counters, the store gauges
// once [Registry.WatchStore] is called, the Temporal SDK metrics, and the Go runtime and
// process collectors. Serve it with [Registry.Handler].
type Registry struct {
	reg      *prometheus.Registry
	product  *Product
	db       *DBTracer
	provider *sdkmetric.MeterProvider
	temporal client.MetricsHandler
	log      *slog.Logger

	watchOnce sync.Once
	watchErr  error
}

// New builds a registry. logger receives metric errors (a failing store gauge, an SDK
// instrument error); nil means slog.Default().
func New(logger *slog.Logger) (*Registry, error) {
	if logger == nil {
		logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	product, err := NewProduct(reg)
	if err != nil {
		return nil, err
	}
	db, err := newDBTracer(reg)
	if err != nil {
		return nil, err
	}
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	r := &Registry{reg: reg, product: product, db: db, provider: provider, log: logger}
	r.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("temporal-sdk-go"),
		UseMonotonicCounters: true,
		// The default panics; a metric must never take the worker down.
		OnError: func(err error) { logger.Warn("temporal SDK metric error", "error", err) },
	})
	return r, nil
}

// Product returns the product counters (nil on a nil registry, which records nothing).
func (r *Registry) Product() *Product {
	if r == nil {
		return nil
	}
	return r.product
}

// DBTracer counts the PostgreSQL round trips of a pool whose ConnConfig.Tracer it is
// (nil registry: nil).
func (r *Registry) DBTracer() *DBTracer {
	if r == nil {
		return nil
	}
	return r.db
}

// TemporalHandler is the Temporal SDK metrics handler to put in
// client.Options.MetricsHandler; the SDK's metrics (temporal_*) then appear in this
// registry.
func (r *Registry) TemporalHandler() client.MetricsHandler { return r.temporal }

// Gatherer exposes the registry, e.g. for tests.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus text format. A failing store gauge is
// logged and left out; the rest of the scrape is still served.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      errorLog{r.log},
	})
}

// WatchStore registers the store gauges read from src at scrape time. Only the first
// call registers; later calls return its result.
func (r *Registry) WatchStore(src Source, opts StoreOptions) error {
	if src == nil {
		return errors.New("metrics: nil store source")
	}
	r.watchOnce.Do(func() {
		r.watchErr = r.reg.Register(newStoreCollector(src, opts))
	})
	return r.watchErr
}

// Close flushes and stops the OpenTelemetry meter provider behind the SDK metrics.
func (r *Registry) Close(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.provider.Shutdown(ctx)
}

// errorLog adapts slog to promhttp's logger.
type errorLog struct{ l *slog.Logger }

func (e errorLog) Println(v ...any) { e.l.Warn("metrics scrape error", "error", v) }
