package gateway

import (
	"context"
	"log/slog"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
)

// redactedValue replaces a payload in the log.
const redactedValue = "[payload not logged]"

// payloadKeys are the attribute keys under which the Temporal SDK (or an interceptor) may
// log workflow or activity data: an activity's result ("Result"), inputs, heartbeat
// details, memos. Compared case-insensitively.
var payloadKeys = map[string]bool{
	"result": true, "results": true, "payload": true, "payloads": true, "input": true,
	"inputs": true, "args": true, "arguments": true, "details": true, "heartbeatdetails": true,
	"memo": true, "signalinput": true, "output": true,
}

// NewTemporalLogger adapts logger for the Temporal SDK (client and worker). It never logs
// payloads: attributes that carry workflow or activity data (the SDK logs an activity's
// result, for one) and values of payload types are replaced by a placeholder. Tokens are
// sealing.Secret or ilink.Secret values, which redact themselves.
func NewTemporalLogger(logger *slog.Logger) tlog.Logger {
	if logger == nil {
		logger = slog.Default()
	}
	return tlog.NewStructuredLogger(slog.New(payloadFilter{next: logger.Handler()}))
}

// payloadFilter is a slog.Handler that redacts payload attributes before next sees them.
type payloadFilter struct{ next slog.Handler }

func (f payloadFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return f.next.Enabled(ctx, l)
}

func (f payloadFilter) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return f.next.Handle(ctx, out)
}

func (f payloadFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redactAttr(a)
	}
	return payloadFilter{next: f.next.WithAttrs(clean)}
}

func (f payloadFilter) WithGroup(name string) slog.Handler {
	return payloadFilter{next: f.next.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	if payloadKeys[strings.ToLower(a.Key)] {
		return slog.String(a.Key, redactedValue)
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = redactAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		if isPayload(v.Any()) {
			return slog.String(a.Key, redactedValue)
		}
	case slog.KindLogValuer:
		return redactAttr(slog.Attr{Key: a.Key, Value: v.Resolve()})
	}
	return a
}

// isPayload reports whether v is a Temporal payload in any of its forms.
func isPayload(v any) bool {
	switch v.(type) {
	case *commonpb.Payload, *commonpb.Payloads, []*commonpb.Payload, map[string]*commonpb.Payload,
		*commonpb.Memo, *commonpb.Header, converter.EncodedValue, converter.EncodedValues:
		return true
	}
	return false
}
