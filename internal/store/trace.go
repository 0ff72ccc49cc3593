package store

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/ilinkflow/ilinkflow/internal/tracing"
)

// startSpan starts the span of a hot-path operation under the span in ctx (the activity's
// when tracing is on). Without a recording span it costs a context look-up and nothing
// else; the keys are set only on a recording span.
func startSpan(ctx context.Context, op, accountKey string) (context.Context, trace.Span) {
	ctx, span := tracing.Child(ctx, "store", op, trace.SpanKindInternal)
	if accountKey != "" && span.IsRecording() {
		span.SetAttributes(tracing.AttrAccount.String(accountKey))
	}
	return ctx, span
}

// endSpan ends span with the keys of what the operation found (when it recorded, and
// they are known) and err's store code when it failed.
func endSpan(span trace.Span, err error, accountKey, messageKey string) {
	if !span.IsRecording() {
		return
	}
	if accountKey != "" {
		span.SetAttributes(tracing.AttrAccount.String(accountKey))
	}
	if messageKey != "" {
		span.SetAttributes(tracing.AttrMessage.String(messageKey))
	}
	failed := ""
	if err != nil {
		failed = string(CodeOf(err))
		if failed == "" {
			failed = "error"
		}
	}
	tracing.End(span, failed)
}
