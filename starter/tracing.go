package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"

	"github.com/ilinkflow/ilinkflow/internal/tracing"
)

// tracerKey carries the command's tracer provider (tracing on) in its context.
type tracerKey struct{}

// withTracing starts the command's tracing when the OTEL_* variables ask for it (read
// through getenv, as the worker reads them): the Temporal clients it dials then trace
// their calls. The returned function flushes the spans.
func withTracing(ctx context.Context, getenv func(string) string, stderr io.Writer) (context.Context, func(), error) {
	if getenv == nil {
		return ctx, func() {}, nil
	}
	cfg, err := tracing.ConfigFromEnv(getenv, tracing.ServiceStarter)
	if err != nil {
		return ctx, nil, err
	}
	tp, shutdown, err := tracing.Start(ctx, cfg)
	if err != nil || tp == nil {
		return ctx, func() {}, err
	}
	return context.WithValue(ctx, tracerKey{}, trace.TracerProvider(tp)), func() {
		fctx, cancel := context.WithTimeout(context.Background(), tracing.Flush)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			fmt.Fprintln(stderr, "starter: flushing the last spans failed:", err)
		}
	}, nil
}

// tracerOf is the command's tracer provider (nil: tracing is off).
func tracerOf(ctx context.Context) trace.TracerProvider {
	tp, _ := ctx.Value(tracerKey{}).(trace.TracerProvider)
	return tp
}

// clientInterceptors are the interceptors of the command's Temporal clients: the tracing
// one when tracing is on.
func clientInterceptors(ctx context.Context) ([]interceptor.ClientInterceptor, error) {
	tp := tracerOf(ctx)
	if tp == nil {
		return nil, nil
	}
	ti, err := tracing.TemporalInterceptor(tp)
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{ti}, nil
}
