package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestRouteHelpShowsAnExample(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliRun(t, "route", "--help")
	if code != 0 || errOut != "" {
		t.Fatalf("route --help: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"\nexample:\n  starter route --account ilk_", "--webhook-secret-file", "--default", "--workflow-type"} {
		if !strings.Contains(out, want) {
			t.Fatalf("route --help lacks %q:\n%s", want, out)
		}
	}
	// The secret has no flag of its own: it would land in the shell's history.
	if strings.Contains(out, "-webhook-secret ") || strings.Contains(out, "-webhook-secret\n") {
		t.Fatalf("route --help offers the secret as a flag value:\n%s", out)
	}
}

func TestARouteSetWithTheCLIShowsInAccountsJSONWithoutItsSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, bot := range []string{"00000000001a", "00000000001b", "00000000001c"} {
		a, err := storetest.RegisterAccount(ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: bot + "@im.bot", OwnerPeerID: "o9-" + bot + "@im.wechat",
			BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.AccountKey)
	}
	const secret = "cli-route-secret-0123456789abcdef"
	secretFile := filepath.Join(t.TempDir(), "agent.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == sealing.EnvKeys {
			return testkit.KeySpec
		}
		return ""
	}
	starter := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args[:1:1], append([]string{"--database-url", dbtest.SchemaURL(schema)}, args[1:]...)...)
		code := runMain(ctx, args, strings.NewReader(stdin), &out, &errOut, getenv)
		if strings.Contains(out.String()+errOut.String(), secret) {
			t.Fatalf("starter %v printed the secret", args)
		}
		return code, out.String(), errOut.String()
	}

	code, out, errOut := starter("", "route", "--account", keys[0], "--webhook-url", "https://agent-one.example/hook?key=k",
		"--webhook-secret-file", secretFile, "--json")
	var res routeResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Route != vocab.RouteWebhook || res.WebhookHost != "agent-one.example" {
		t.Fatalf("route --webhook-url: exit %d, %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut = starter(secret, "route", "--account", keys[1], "--workflow-type", "MyAgent", "--task-queue", "agents"); code != 0 ||
		!strings.Contains(out, "workflow MyAgent on task queue agents") {
		t.Fatalf("route --workflow-type: exit %d, %q, stderr %q", code, out, errOut)
	}
	// The secret can come on stdin; a short one is refused (exit 1) and changes nothing.
	if code, _, errOut = starter("short\n", "route", "--account", keys[2], "--webhook-url", "https://x.example/", "--webhook-secret-file", "-"); code != 1 ||
		!strings.Contains(errOut, "at least 16 bytes") {
		t.Fatalf("short secret: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut = starter("", "accounts", "--json")
	var rows []operator.Account
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 {
		t.Fatalf("accounts --json: exit %d, %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(out, "key=k") {
		t.Fatalf("accounts --json shows the webhook's full URL: %s", out)
	}
	want := map[string]operator.Account{
		keys[0]: {Route: vocab.RouteWebhook, RouteWebhookHost: "agent-one.example"},
		keys[1]: {Route: vocab.RouteWorkflow, RouteWorkflowType: "MyAgent", RouteTaskQueue: "agents"},
		keys[2]: {Route: operator.RouteDefault},
	}
	for _, r := range rows {
		w := want[r.AccountKey]
		if r.Route != w.Route || r.RouteWebhookHost != w.RouteWebhookHost || r.RouteWorkflowType != w.RouteWorkflowType || r.RouteTaskQueue != w.RouteTaskQueue {
			t.Errorf("account %s shown with route %+v", r.AccountKey, r)
		}
	}
	if _, text, _ := starter("", "accounts"); !strings.Contains(text, "webhook (agent-one.example)") || !strings.Contains(text, "ROUTE") {
		t.Fatalf("accounts text:\n%s", text)
	}

	// Back to the default route.
	if code, out, errOut = starter("", "route", "--account", keys[0], "--default", "--json"); code != 0 ||
		json.Unmarshal([]byte(out), &res) != nil || res.Route != "default" || !res.Changed {
		t.Fatalf("route --default: exit %d, %q, stderr %q", code, out, errOut)
	}
	if _, found, err := st.GetRoute(ctx, keys[0]); err != nil || found {
		t.Fatalf("after --default: found %v, %v", found, err)
	}
	changes, err := st.ListRouteChanges(ctx, "")
	if err != nil || len(changes) != 3 {
		t.Fatalf("route audit: %+v %v", changes, err)
	}
}
