package gateway_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	tlog "go.temporal.io/sdk/log"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/sealing"
)

func TestTemporalLoggerNeverLogsPayloads(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := gateway.NewTemporalLogger(base)

	payload := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`"PAYLOAD-DATA-1"`)}}}
	// The SDK logs an activity's output under "Result" (internal_task_handlers.go).
	l.Info("Activity complete after timeout.", "ActivityType", "Send", "Result", []byte("PAYLOAD-DATA-2"), "Error", "deadline")
	l.Warn("odd key", "whatever", payload)
	tlog.With(l, "Input", "PAYLOAD-DATA-3").Error("with attrs", "WorkflowID", "ilink-window/1")
	l.Debug("grouped", slog.Group("req", slog.String("details", "PAYLOAD-DATA-4"), slog.Int("n", 1)))
	l.Info("secrets", "token", sealing.NewSecret("BOT-TOKEN-1"), "ctx", ilink.Secret("CONTEXT-TOKEN-2"))

	out := buf.String()
	for _, leaked := range []string{"PAYLOAD-DATA", "BOT-TOKEN-1", "CONTEXT-TOKEN-2"} {
		if strings.Contains(out, leaked) {
			t.Fatalf("log shows %s:\n%s", leaked, out)
		}
	}
	for _, kept := range []string{`"ActivityType":"Send"`, `"WorkflowID":"ilink-window/1"`, `"Error":"deadline"`, `"n":1`, "payload not logged"} {
		if !strings.Contains(out, kept) {
			t.Fatalf("log lost %s:\n%s", kept, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 5 {
		t.Fatalf("%d records, want 5:\n%s", n, out)
	}
}
