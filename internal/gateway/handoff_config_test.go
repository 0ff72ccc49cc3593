package gateway_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

const hookSecret = "hook-secret-0123456789abcdef"

func TestHandlerConfigDefaultsToNone(t *testing.T) {
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Handler != handoff.KindNone || cfg.ReofferAfter != wfapi.DefaultReofferAfter || cfg.WebhookTimeout != handoff.DefaultTimeout ||
		!cfg.WebhookSecret.IsZero() {
		t.Fatalf("defaults: handler %q reoffer %v timeout %v", cfg.Handler, cfg.ReofferAfter, cfg.WebhookTimeout)
	}
}

func TestHandlerConfigFromFlagsAndEnvironment(t *testing.T) {
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{
		"ILINKFLOW_HANDLER": "echo", gateway.EnvWebhookSecret: hookSecret, "ILINKFLOW_REOFFER_AFTER": "0",
		"ILINKFLOW_WEBHOOK_URL": "https://env.example/hook",
	})), []string{"--handler", "webhook", "--webhook-url", "https://agent.example/hook", "--webhook-timeout", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Handler != "webhook" || cfg.WebhookURL != "https://agent.example/hook" || cfg.WebhookSecret.Reveal() != hookSecret ||
		cfg.WebhookTimeout != 5*time.Second || cfg.ReofferAfter != 0 {
		t.Fatalf("config %+v", cfg)
	}
	hc := cfg.HandoffConfig()
	if h, err := handoff.New(hc, nil, nil); err != nil || h == nil {
		t.Fatalf("handler from the configuration: %v %v", h, err)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withKeys(nil)),
		[]string{"--handler", "workflow", "--agent-workflow", "Agent", "--agent-task-queue", "agents", "--reoffer-after", "90s"})
	if err != nil || cfg.AgentWorkflow != "Agent" || cfg.AgentTaskQueue != "agents" || cfg.ReofferAfter != 90*time.Second {
		t.Fatalf("workflow handler config %+v %v", cfg, err)
	}
}

func TestHandlerConfigErrorsAreClearAndNeverShowTheSecret(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--handler", "smoke-signals"}, `flag --handler="smoke-signals": want none, echo, webhook or workflow`},
		{nil, []string{"--handler", "webhook", "--webhook-url", "https://agent.example/hook"}, "ILINKFLOW_WEBHOOK_SECRET"},
		{map[string]string{gateway.EnvWebhookSecret: hookSecret}, []string{"--handler", "webhook"}, "webhook URL is required"},
		{map[string]string{gateway.EnvWebhookSecret: hookSecret}, []string{"--handler", "webhook", "--webhook-url", "agent.example/hook"}, "absolute http or https URL"},
		{map[string]string{gateway.EnvWebhookSecret: "s3cr3t"}, []string{"--handler", "webhook", "--webhook-url", "https://agent.example/hook"}, "at least 16 bytes"},
		{map[string]string{gateway.EnvWebhookSecret: hookSecret}, []string{"--handler", "webhook", "--webhook-url", "https://agent.example/hook", "--webhook-timeout", "5m"}, "timeout"},
		{nil, []string{"--handler", "workflow", "--agent-task-queue", "agents"}, "agent workflow type is required"},
		{nil, []string{"--handler", "workflow", "--agent-workflow", "Agent"}, "agent task queue is required"},
		{nil, []string{"--reoffer-after", "-1m"}, "reoffer-after"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := gateway.ConfigFromEnv(envOf(withKeys(c.env)), c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
			if s := c.env[gateway.EnvWebhookSecret]; s != "" && strings.Contains(err.Error(), s) {
				t.Fatal("the error shows the webhook secret")
			}
		})
	}
}

func TestTheWebhookSecretIsNeverLoggedOrPrinted(t *testing.T) {
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(map[string]string{gateway.EnvWebhookSecret: hookSecret})),
		[]string{"--handler", "webhook", "--webhook-url", "https://agent.example/hook"})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", cfg)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", cfg)
	out := logs.String() + fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)
	if strings.Contains(out, hookSecret) {
		t.Fatal("the webhook secret is printed")
	}
	var usage bytes.Buffer
	gateway.Usage(&usage)
	for _, want := range []string{"--handler", "--webhook-url", "--webhook-timeout", "--agent-workflow", "--agent-task-queue", "--reoffer-after", gateway.EnvWebhookSecret} {
		if !strings.Contains(usage.String(), want) {
			t.Fatalf("usage does not mention %s", want)
		}
	}
}
