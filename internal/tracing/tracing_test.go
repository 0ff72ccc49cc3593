package tracing_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/ilinkflow/ilinkflow/internal/tracing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Without an OTLP endpoint tracing is off: no provider is built, nothing is exported, and
// the span helpers start nothing (and allocate nothing) under a context without a span.
func TestWithoutAnOTLPEndpointNothingIsBuiltOrExported(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{tracing.EnvServiceName: "svc"},
		{tracing.EnvEndpoint: "http://127.0.0.1:4318", tracing.EnvSDKDisabled: "true"},
	} {
		cfg, err := tracing.ConfigFromEnv(envOf(env), tracing.ServiceWorker)
		if err != nil || cfg.Enabled() {
			t.Fatalf("%v: enabled %v, %v", env, cfg.Enabled(), err)
		}
		tp, shutdown, err := tracing.Start(context.Background(), cfg)
		if err != nil || tp != nil {
			t.Fatalf("%v: provider %v, %v: want none", env, tp, err)
		}
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	c, span := tracing.Child(ctx, "store", "CommitPage", trace.SpanKindInternal)
	if c != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("a span started without a recording parent: %v", span.SpanContext())
	}
	if r, span := tracing.Root(ctx, "ilinkflow.page"); r != ctx || span.IsRecording() {
		t.Fatal("a root span started without a recording poll span")
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, span := tracing.Child(ctx, "store", "CommitPage", trace.SpanKindInternal)
		tracing.End(span, "")
	})
	if allocs != 0 {
		t.Fatalf("a span helper allocates %v times with tracing off", allocs)
	}
}

// The endpoint variables follow the OTLP/HTTP rules: the general endpoint gets
// /v1/traces appended, the traces endpoint is the whole URL, the service name defaults
// per process, and another protocol or a URL without a scheme is refused.
func TestTheOTLPVariablesFollowTheStandard(t *testing.T) {
	cfg, err := tracing.ConfigFromEnv(envOf(map[string]string{tracing.EnvEndpoint: "http://collector:4318/"}), tracing.ServiceWorker)
	if err != nil || cfg.TracesURL != "http://collector:4318/v1/traces" || cfg.ServiceName != "ilinkflow-worker" {
		t.Fatalf("general endpoint: %+v, %v", cfg, err)
	}
	cfg, err = tracing.ConfigFromEnv(envOf(map[string]string{tracing.EnvEndpoint: "http://a:4318",
		tracing.EnvTracesEndpoint: "https://b/custom", tracing.EnvServiceName: "mine", tracing.EnvProtocol: "http/protobuf"}), tracing.ServiceStarter)
	if err != nil || cfg.TracesURL != "https://b/custom" || cfg.ServiceName != "mine" {
		t.Fatalf("traces endpoint: %+v, %v", cfg, err)
	}
	for _, env := range []map[string]string{
		{tracing.EnvEndpoint: "http://a:4317", tracing.EnvProtocol: "grpc"},
		{tracing.EnvEndpoint: "http://a:4317", tracing.EnvTracesProtocol: "grpc"},
		{tracing.EnvEndpoint: "collector:4318"},
	} {
		if _, err := tracing.ConfigFromEnv(envOf(env), tracing.ServiceWorker); !errors.Is(err, tracing.ErrConfig) {
			t.Errorf("%v: %v, want ErrConfig", env, err)
		}
	}
}

// With an endpoint set, spans are exported over OTLP/HTTP to it (a collector stand-in
// here) and flushed by the shutdown function.
func TestWithAnOTLPEndpointSpansAreExportedAndFlushedOnShutdown(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies int
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path+" "+r.Header.Get("Content-Type"))
		if len(b) > 0 {
			bodies++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	cfg, err := tracing.ConfigFromEnv(envOf(map[string]string{tracing.EnvEndpoint: collector.URL}), tracing.ServiceWorker)
	if err != nil {
		t.Fatal(err)
	}
	tp, shutdown, err := tracing.Start(context.Background(), cfg)
	if err != nil || tp == nil {
		t.Fatalf("provider %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "parent")
	ctx := trace.ContextWithSpan(context.Background(), span)
	_, child := tracing.Child(ctx, "store", "CommitPage", trace.SpanKindInternal)
	if !child.IsRecording() || child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Fatal("the child span is not in its parent's trace")
	}
	tracing.End(child, "")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if bodies == 0 || len(paths) == 0 || !strings.HasPrefix(paths[0], "/v1/traces application/x-protobuf") {
		t.Fatalf("the collector saw %v (%d bodies), want a POST to /v1/traces", paths, bodies)
	}
}
