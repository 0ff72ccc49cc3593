package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// A message's trace runs from its page's commit to its reply: the worker, with an
// in-memory span recorder as its tracer provider, polls a simulated bot, the echo agent
// answers, and the page's commit (under the poll activity), the hand-off, the window's
// workflow, the Send activity's store writes and its iLink sendmessage are spans of one
// trace. No span carries the bot token, the context token or the message's text.
func TestAMessagesTraceRunsFromItsPageCommitToItsReply(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Temporal dev server and PostgreSQL")
	}
	t.Parallel()
	srv := devserver.Start(t)
	ns, _ := srv.NewNamespace(t)
	pool := dbtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	simCfg := ilinksim.DefaultConfig()
	simCfg.LongPollHold = time.Second
	simCfg.ThrottleBurst = 0
	sim := ilinksim.New(simCfg)
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	ctl := ilinksim.NewControl(simSrv.URL, simSrv.Client())
	bot, err := ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	acct, err := storetest.RegisterAccount(ctx, st, time.Now(), store.ConfirmInput{
		ProviderAccountID: bot.BotID, OwnerPeerID: bot.Owner, BaseURL: simSrv.URL, BotToken: sealing.NewSecret(bot.Token),
	})
	if err != nil {
		t.Fatal(err)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress = srv.HostPort
	cfg.TemporalNamespace = ns
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.DatabaseURL = "postgres://unused@127.0.0.1:1/unused" // the injected pool is used
	cfg.ILinkBaseURL = simSrv.URL
	cfg.ILinkCDNBaseURL = simSrv.URL + "/c2c"
	cfg.SendGap = 5 * time.Millisecond
	cfg.PollSession = 3 * time.Second
	cfg.Heartbeat = time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.HTTPAddr = ""
	var logs syncBuffer
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- gateway.Run(runCtx, cfg, gateway.Options{
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), Pool: pool, Keyring: testKeys,
			Handler: handoff.Echo{}, TracerProvider: tp, Ready: func(gateway.ReconcileReport) { close(ready) },
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- nil // for the cleanup
		t.Fatalf("Run returned before it was ready: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("Run never became ready\n%s", logs.String())
	}

	const text = "trace me, secret words"
	if _, err := ctl.InjectText(ctx, bot.BotID, bot.Owner, text); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the echo reply reaches the simulator", time.Minute, func() (bool, error) {
		sent, err := ctl.Sent(ctx, bot.BotID)
		return len(sent) > 0, err
	})

	// The spans of the message's trace, found from its page's commit.
	var commit sdktrace.ReadOnlySpan
	var inTrace map[string]sdktrace.ReadOnlySpan
	testkit.Eventually(t, "the trace from the commit to the sendmessage is recorded", 30*time.Second, func() (bool, error) {
		spans := rec.Ended()
		commit = nil
		for _, s := range spans {
			if s.Name() == "store.CommitPage" && hasAttr(s, tracing.AttrAccount, acct.AccountKey) {
				commit = s
			}
		}
		if commit == nil {
			return false, nil
		}
		inTrace = map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			if s.SpanContext().TraceID() == commit.SpanContext().TraceID() {
				inTrace[s.Name()] = s
			}
		}
		_, sent := inTrace["ilink.sendmessage"]
		_, completed := inTrace["store.CompleteSend"]
		for _, s := range rec.Started() { // the window's workflow runs until the window ends
			if _, ok := inTrace[s.Name()]; !ok && s.SpanContext().TraceID() == commit.SpanContext().TraceID() {
				inTrace[s.Name()] = s
			}
		}
		return sent && completed, nil
	})
	for _, name := range []string{
		"ilinkflow.page", "store.CommitPage", "handoff.deliver", "store.OpenAgentSession",
		"StartWorkflow:ReplyWindow", "RunWorkflow:ReplyWindow", "StartActivity:Send", "RunActivity:Send",
		"store.ReserveAndStart", "ilink.sendmessage", "store.CompleteSend",
	} {
		if _, ok := inTrace[name]; !ok {
			t.Errorf("the message's trace lacks the span %q; it has %v", name, names(inTrace))
		}
	}
	// The page's trace is its own, linked to the poll activity that fetched it.
	page := inTrace["ilinkflow.page"]
	if page != nil {
		if page.Parent().IsValid() || len(page.Links()) != 1 {
			t.Errorf("the page span has parent %v and %d links: want a root linked to its poll", page.Parent(), len(page.Links()))
		} else if poll := spanByID(rec.Started(), page.Links()[0].SpanContext.SpanID()); poll == nil || poll.Name() != "RunActivity:PollAccount" {
			t.Errorf("the page span links to %v, want the poll activity's span", poll)
		}
	}
	if s := inTrace["ilink.sendmessage"]; s != nil && s.SpanKind() != trace.SpanKindClient {
		t.Errorf("ilink.sendmessage is a %v span, want client", s.SpanKind())
	}
	// Nothing secret in any span: not the tokens, not the message's text.
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			for _, secret := range []string{bot.Token, text, "secret words"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s holds a secret: %q", s.Name(), kv.Key, v)
				}
			}
		}
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key attribute.Key, value string) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == key && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}

// spanByID finds a started span (the poll's may still run).
func spanByID(spans []sdktrace.ReadWriteSpan, id trace.SpanID) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.SpanContext().SpanID() == id {
			return s
		}
	}
	return nil
}

func names(m map[string]sdktrace.ReadOnlySpan) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return fmt.Sprint(out)
}
