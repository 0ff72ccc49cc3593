package e2e_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// Routes: one agent per bot, against the real dev server, PostgreSQL and the simulator.

const (
	agentOneSecret = "e2e-route-agent-one-secret-0123456789"
	agentTwoSecret = "e2e-route-agent-two-secret-9876543210"
)

// handledAnswer answers every delivery with one reply naming the agent, and handled.
func handledAnswer(agent string) func(int, webhook.Delivery) (int, string) {
	return func(_ int, d webhook.Delivery) (int, string) {
		return http.StatusOK, fmt.Sprintf(`{"replies": ["%s got: %s"], "handled": true}`, agent, d.Message.Summary)
	}
}

func TestEachBotReachesOnlyItsRoutedAgentSignedWithItsSecretAndAReRouteAppliesFromTheNextMessage(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	one, oneURL := newReceiverWith(t, agentOneSecret, handledAnswer("one"))
	two, twoURL := newReceiverWith(t, agentTwoSecret, handledAnswer("two"))
	def, defURL := newReceiver(t, handledAnswer("default"))
	logs := &logSink{}
	s := start(t, limits, webhookConfig(defURL, 0), logsTo(logs))

	keyA, infoA := s.enrolledBot("qo_e2e_route_a", "o9cq8e2eroutea00000000001@im.wechat")
	keyB, infoB := s.enrolledBot("qo_e2e_route_b", "o9cq8e2erouteb00000000001@im.wechat")
	keyC, infoC := s.enrolledBot("qo_e2e_route_c", "o9cq8e2eroutec00000000001@im.wechat")
	botA, botB, botC := infoA.BotID, infoB.BotID, infoC.BotID
	route := func(key, url, secret string) {
		t.Helper()
		if _, err := s.store.SetRoute(s.ctx, time.Now(), store.RouteInput{AccountKey: key, Kind: vocab.RouteWebhook,
			WebhookURL: url, WebhookSecret: sealing.NewSecret(secret), By: "e2e"}); err != nil {
			t.Fatal(err)
		}
	}
	route(keyA, oneURL, agentOneSecret)
	route(keyB, twoURL, agentTwoSecret)
	// keyC stays on the default route: the worker's --handler webhook.

	say := func(botID, text string) {
		t.Helper()
		if _, err := s.ctl.InjectText(s.ctx, botID, "", text); err != nil {
			t.Fatal(err)
		}
	}
	say(botA, "a1")
	say(botB, "b1")
	say(botC, "c1")
	if d := one.next(1, time.Minute); d.Message.AccountKey != keyA || d.Message.Summary != "a1" {
		t.Fatalf("agent one got %+v", d.Message)
	}
	if d := two.next(1, time.Minute); d.Message.AccountKey != keyB || d.Message.Summary != "b1" {
		t.Fatalf("agent two got %+v", d.Message)
	}
	if d := def.next(1, time.Minute); d.Message.AccountKey != keyC || d.Message.Summary != "c1" {
		t.Fatalf("the default agent got %+v", d.Message)
	}
	for bot, want := range map[string]string{botA: "one got: a1", botB: "two got: b1", botC: "default got: c1"} {
		if texts := s.sentTexts(bot, 1); len(texts) != 1 || texts[0] != want {
			t.Fatalf("bot %s sent %q, want %q", bot, texts, want)
		}
	}
	first := s.storedWindow(keyA)
	s.messageReaches(first.SourceMessageKey, vocab.MessageHandled, 30*time.Second)

	// Mid-conversation, bot A moves to agent two: its next message goes there, signed with
	// agent two's secret (the receiver verifies each request with its own secret).
	route(keyA, twoURL, agentTwoSecret)
	say(botA, "a2")
	if d := two.next(2, time.Minute); d.Message.AccountKey != keyA || d.Message.Summary != "a2" {
		t.Fatalf("after the re-route agent two got %+v", d.Message)
	}
	if texts := s.sentTexts(botA, 2); texts[1] != "two got: a2" {
		t.Fatalf("bot A sent %q", texts)
	}
	// Nothing more arrives anywhere: each message was delivered once, to its agent.
	time.Sleep(3 * time.Second)
	seen := map[string]string{}
	for name, r := range map[string]*receiver{"one": one, "two": two, "default": def} {
		for _, d := range r.all() {
			if prev, dup := seen[d.Message.MessageKey]; dup {
				t.Errorf("message %q delivered twice (to %s and %s)", d.Message.Summary, prev, name)
			}
			seen[d.Message.MessageKey] = name
		}
	}
	if n1, n2, nd := len(one.all()), len(two.all()), len(def.all()); n1 != 1 || n2 != 2 || nd != 1 {
		t.Fatalf("deliveries: agent one %d, agent two %d, default %d; want 1, 2, 1", n1, n2, nd)
	}
	tokens := []string{agentOneSecret, agentTwoSecret, webhookSecret}
	for _, r := range []*receiver{one, two, def} {
		for _, d := range r.all() {
			tokens = append(tokens, d.SessionToken)
		}
	}
	s.assertAbsentFromHistory(tokens)
	logs.assertNotLogged(t, tokens...)
}
