// Package tracing sets up OpenTelemetry tracing for the worker and the operator's CLI, and
// holds the helpers the store, the iLink client, the hand-off and the activities start
// their spans with.
//
// Tracing is on only when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: then [Start] builds a TracerProvider that
// exports over OTLP/HTTP, installs it (and the W3C trace-context propagator) as the global
// one, and the Temporal SDK's tracing interceptor ([TemporalInterceptor]) gives the
// workflows, activities and client calls their spans and carries the trace through
// Temporal's headers. Otherwise nothing is built: no exporter, no interceptor.
//
// Spans below the Temporal ones are children of the span in the context ([Child]): the
// tracer is the parent span's own provider, so no tracer is handed around, and where no
// span records (tracing off) [Child] returns at once without allocating. No span carries
// a secret: account keys and message keys only, never a token or message text.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/ilinkflow/ilinkflow/internal/version"
)

// The environment variables read (through the caller's getenv). The exporter reads the
// other standard ones itself from the process environment (OTEL_EXPORTER_OTLP_HEADERS,
// ..._TIMEOUT, ..._COMPRESSION, ..._CERTIFICATE), and the SDK reads OTEL_TRACES_SAMPLER,
// OTEL_RESOURCE_ATTRIBUTES and the OTEL_BSP_* batch settings.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Env lists the variables [ConfigFromEnv] reads.
var Env = []string{EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol, EnvServiceName, EnvSDKDisabled}

// Default service names of the two processes (OTEL_SERVICE_NAME wins).
const (
	ServiceWorker  = "ilinkflow-worker"
	ServiceStarter = "ilinkflow-starter"
)

// tracesPath is what OTLP/HTTP appends to OTEL_EXPORTER_OTLP_ENDPOINT (not to the
// traces-specific endpoint, which is the whole URL).
const tracesPath = "/v1/traces"

// ErrConfig marks a tracing setting that cannot be used.
var ErrConfig = errors.New("tracing configuration")

// Config is the tracing setup: off when TracesURL is empty.
type Config struct {
	// TracesURL is the OTLP/HTTP URL spans are POSTed to.
	TracesURL string
	// ServiceName is the service.name resource attribute.
	ServiceName string
}

// Enabled reports whether spans are exported.
func (c Config) Enabled() bool { return c.TracesURL != "" }

// LogValue names the collector's host only: the URL may carry credentials.
func (c Config) LogValue() slog.Value {
	if !c.Enabled() {
		return slog.StringValue("off")
	}
	host := ""
	if u, err := url.Parse(c.TracesURL); err == nil {
		host = u.Host
	}
	return slog.GroupValue(slog.String("otlp_host", host), slog.String("service", c.ServiceName))
}

// ConfigFromEnv reads the standard OTEL_* variables through getenv. OTLP/HTTP with
// protobuf is the only protocol: another one set explicitly is an error, not a silent
// mismatch with the collector's port.
func ConfigFromEnv(getenv func(string) string, defaultService string) (Config, error) {
	c := Config{ServiceName: strings.TrimSpace(getenv(EnvServiceName))}
	if c.ServiceName == "" {
		c.ServiceName = defaultService
	}
	traces, base := strings.TrimSpace(getenv(EnvTracesEndpoint)), strings.TrimSpace(getenv(EnvEndpoint))
	protocol := strings.TrimSpace(getenv(EnvTracesProtocol))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv(EnvProtocol))
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return Config{ServiceName: c.ServiceName}, nil
	}
	switch {
	case traces != "":
		c.TracesURL = traces
	case base != "":
		c.TracesURL = strings.TrimRight(base, "/") + tracesPath
	default:
		return c, nil
	}
	if protocol != "" && protocol != "http/protobuf" {
		return Config{}, fmt.Errorf("%w: %s=%q: only http/protobuf is supported (OTLP over HTTP, usually port 4318)", ErrConfig, EnvProtocol, protocol)
	}
	u, err := url.Parse(c.TracesURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		name := EnvEndpoint
		if traces != "" {
			name = EnvTracesEndpoint
		}
		return Config{}, fmt.Errorf("%w: %s is not an http(s) URL with a host (e.g. http://collector:4318)", ErrConfig, name)
	}
	return c, nil
}

// Start builds the exporting TracerProvider of an enabled cfg, installs it and the W3C
// propagator globally, and returns it with the function that flushes and stops it. For a
// disabled cfg it returns a nil provider and a no-op shutdown: nothing is built.
func Start(ctx context.Context, cfg Config) (*sdktrace.TracerProvider, func(context.Context) error, error) {
	if !cfg.Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.TracesURL))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: OTLP exporter: %w", ErrConfig, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(cfg.ServiceName), semconv.ServiceVersion(version.Get().Version)))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	return tp, tp.Shutdown, nil
}

// Propagator is the W3C trace context (and baggage) propagator of every process.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// TemporalInterceptor is the Temporal SDK's tracing interceptor over tp: set on a
// client's options, it traces the client's calls and, on the workers built from that
// client, the workflows and activities, carrying the trace in Temporal's headers.
func TemporalInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            tp.Tracer("go.temporal.io/sdk"),
		TextMapPropagator: Propagator,
		// Queries are read-only and frequent (the web front end polls them).
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: Temporal tracing interceptor: %w", ErrConfig, err)
	}
	return i, nil
}

// Instrumentation scope of the spans this module starts.
const scope = "github.com/ilinkflow/ilinkflow"

// Attribute keys of the spans this module starts.
const (
	AttrAccount  = attribute.Key("ilinkflow.account_key")
	AttrMessage  = attribute.Key("ilinkflow.message_key")
	AttrMessages = attribute.Key("ilinkflow.messages")
)

// Child starts a span named prefix+"."+name under the span in ctx (which may have ended:
// the page's span ends before the hand-off it started in a goroutine), with that span's
// own tracer provider. With no span in ctx (tracing off, or a call outside any traced
// operation) it returns ctx and the non-recording span at once: nothing is allocated.
// Attributes go on with span.SetAttributes behind span.IsRecording().
func Child(ctx context.Context, prefix, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, prefix+"."+name, trace.WithSpanKind(kind))
}

// Root starts a span named name as the root of a new trace, linked to the span in ctx
// (a page's trace, linked to the long poll that fetched it). Like Child it does nothing
// without a span in ctx.
func Root(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, name, trace.WithNewRoot(),
		trace.WithLinks(trace.Link{SpanContext: parent.SpanContext()}))
}

// AttrError is the stable code of a failed span's error.
const AttrError = attribute.Key("error.type")

// End ends span; a non-empty failed marks it failed with that stable code (an error's
// code, never its text: an error's text may quote the input it refused).
func End(span trace.Span, failed string) {
	if failed != "" && span.IsRecording() {
		span.SetAttributes(AttrError.String(failed))
		span.SetStatus(codes.Error, failed)
	}
	span.End()
}

// Flush bounds a shutdown: the exporter gets this long to send what it holds.
const Flush = 5 * time.Second
