package store_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

const routeSecret = "route-secret-0123456789abcdef"

func webhookRoute(key, url, secret string) store.RouteInput {
	return store.RouteInput{AccountKey: key, Kind: vocab.RouteWebhook, WebhookURL: url,
		WebhookSecret: sealing.NewSecret(secret), WebhookTimeout: 5 * time.Second, By: "alice"}
}

// routeRows counts the rows of the route tables of an account.
func (e *env) routeRows(key string) (routes, audits int) {
	e.t.Helper()
	if err := e.pool.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM account_routes WHERE account_key = $1),
		(SELECT count(*) FROM route_audit WHERE account_key = $1)`, key).Scan(&routes, &audits); err != nil {
		e.t.Fatal(err)
	}
	return routes, audits
}

func TestAWebhookRouteSecretIsSealedAtRestAndOpensOnlyForItsAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.register(), e.register()
	set, err := e.store.SetRoute(e.ctx, t0, webhookRoute(a.key, "https://agent-a.example/hook?key=k1", routeSecret))
	if err != nil {
		t.Fatal(err)
	}
	if set.WebhookHost != "agent-a.example" || !set.WebhookSecret.IsZero() || set.WebhookURL != "" || set.Version < 1 {
		t.Fatalf("SetRoute returned %+v", set)
	}
	// Nothing in the row holds the secret in plaintext.
	var dump []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT convert_to(account_routes::text, 'UTF8') FROM account_routes WHERE account_key = $1`,
		a.key).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(dump, []byte(routeSecret)) {
		t.Fatal("the route secret is stored in plaintext")
	}
	got, found, err := e.store.GetRoute(e.ctx, a.key)
	if err != nil || !found {
		t.Fatalf("GetRoute: %v %v", found, err)
	}
	if got.WebhookSecret.Reveal() != routeSecret || got.WebhookURL != "https://agent-a.example/hook?key=k1" ||
		got.WebhookTimeout != 5*time.Second || got.Version != set.Version {
		t.Fatalf("GetRoute returned %+v", got)
	}
	// The sealed secret is bound to its account: copied to another bot's row, it does not open.
	if _, err := e.store.SetRoute(e.ctx, t0, webhookRoute(b.key, "https://agent-b.example/", "another-secret-0123456789")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE account_routes SET nonce = src.nonce, ciphertext = src.ciphertext, key_generation = src.key_generation
		FROM account_routes src WHERE src.account_key = $1 AND account_routes.account_key = $2`, a.key, b.key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.GetRoute(e.ctx, b.key); store.CodeOf(err) != vocab.CodeSealedUnreadable {
		t.Fatalf("a route secret copied to another account opened: %v", err)
	}
	// A list shows no secret and no full URL.
	list, err := e.store.ListRoutes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if !r.WebhookSecret.IsZero() || r.WebhookURL != "" {
			t.Fatalf("ListRoutes shows a secret or a URL: %+v", r)
		}
	}
}

func TestBadRouteInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register()
	ok := webhookRoute(a.key, "https://agent.example/hook", routeSecret)
	cases := map[string]func(*store.RouteInput){
		"unknown kind":             func(in *store.RouteInput) { in.Kind = "carrier-pigeon" },
		"no kind":                  func(in *store.RouteInput) { in.Kind = "" },
		"short secret":             func(in *store.RouteInput) { in.WebhookSecret = sealing.NewSecret("short") },
		"no secret":                func(in *store.RouteInput) { in.WebhookSecret = sealing.Secret{} },
		"no URL":                   func(in *store.RouteInput) { in.WebhookURL = "" },
		"relative URL":             func(in *store.RouteInput) { in.WebhookURL = "/hook" },
		"ftp URL":                  func(in *store.RouteInput) { in.WebhookURL = "ftp://agent.example/" },
		"user info":                func(in *store.RouteInput) { in.WebhookURL = "https://u:p@agent.example/" },
		"URL too long":             func(in *store.RouteInput) { in.WebhookURL = "https://agent.example/" + strings.Repeat("a", 5000) },
		"timeout over the maximum": func(in *store.RouteInput) { in.WebhookTimeout = 91 * time.Second },
		"negative timeout":         func(in *store.RouteInput) { in.WebhookTimeout = -time.Second },
		"webhook with a workflow":  func(in *store.RouteInput) { in.WorkflowType = "Agent" },
		"workflow without a queue": func(in *store.RouteInput) {
			*in = store.RouteInput{AccountKey: in.AccountKey, Kind: vocab.RouteWorkflow, WorkflowType: "Agent", By: "alice"}
		},
		"workflow with a URL": func(in *store.RouteInput) {
			in.Kind, in.WorkflowType, in.TaskQueue = vocab.RouteWorkflow, "Agent", "agents"
		},
		"echo with settings": func(in *store.RouteInput) { in.Kind = vocab.RouteEcho },
		"control in task name": func(in *store.RouteInput) {
			*in = store.RouteInput{AccountKey: in.AccountKey, Kind: vocab.RouteWorkflow, WorkflowType: "A\nB", TaskQueue: "q", By: "alice"}
		},
		"nobody changed it": func(in *store.RouteInput) { in.By = "" },
		"bad account key":   func(in *store.RouteInput) { in.AccountKey = "ilk_nothex" },
	}
	for name, mutate := range cases {
		in := ok
		mutate(&in)
		_, err := e.store.SetRoute(e.ctx, t0, in)
		if store.CodeOf(err) != vocab.CodeInvalidInput {
			t.Errorf("%s: got %v, want invalid_input", name, err)
		}
		if err != nil && strings.Contains(err.Error(), routeSecret) {
			t.Errorf("%s: the error holds the secret: %v", name, err)
		}
	}
	if routes, audits := e.routeRows(a.key); routes != 0 || audits != 0 {
		t.Fatalf("refused routes wrote %d routes and %d audit rows", routes, audits)
	}
	// An unknown account is account_not_found, and writes nothing either.
	ghost := ok
	ghost.AccountKey = store.AccountKey("nobody@im.bot")
	if _, err := e.store.SetRoute(e.ctx, t0, ghost); store.CodeOf(err) != vocab.CodeAccountNotFound {
		t.Fatalf("route of an unknown account: %v", err)
	}
	if _, err := e.store.ClearRoute(e.ctx, t0, ghost.AccountKey, "alice"); store.CodeOf(err) != vocab.CodeAccountNotFound {
		t.Fatalf("clear of an unknown account: %v", err)
	}
	if routes, audits := e.routeRows(ghost.AccountKey); routes != 0 || audits != 0 {
		t.Fatalf("an unknown account's route wrote %d routes and %d audit rows", routes, audits)
	}
}

func TestEveryRouteChangeIsAuditedWithoutTheSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register()
	first, err := e.store.SetRoute(e.ctx, t0, webhookRoute(a.key, "https://agent-a.example/hook?key=url-key", routeSecret))
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.store.SetRoute(e.ctx, t0.Add(time.Minute), store.RouteInput{AccountKey: a.key, Kind: vocab.RouteWorkflow,
		WorkflowType: "MyAgent", TaskQueue: "agents", By: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Version <= first.Version {
		t.Fatalf("versions %d then %d", first.Version, second.Version)
	}
	if cleared, err := e.store.ClearRoute(e.ctx, t0.Add(2*time.Minute), a.key, "carol"); err != nil || !cleared {
		t.Fatalf("ClearRoute: %v %v", cleared, err)
	}
	// Clearing the default route is no change: nothing is audited.
	if cleared, err := e.store.ClearRoute(e.ctx, t0.Add(3*time.Minute), a.key, "carol"); err != nil || cleared {
		t.Fatalf("second ClearRoute: %v %v", cleared, err)
	}
	third, err := e.store.SetRoute(e.ctx, t0.Add(4*time.Minute), store.RouteInput{AccountKey: a.key, Kind: vocab.RouteEcho, By: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	if third.Version <= second.Version {
		t.Fatalf("a route set again after a clear reused version %d (before: %d)", third.Version, second.Version)
	}
	changes, err := e.store.ListRouteChanges(e.ctx, a.key)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RouteChange{
		{ChangedBy: "alice", OldKind: "", NewKind: vocab.RouteWebhook, Detail: "webhook host agent-a.example", NewVersion: first.Version},
		{ChangedBy: "bob", OldKind: vocab.RouteWebhook, NewKind: vocab.RouteWorkflow, Detail: "workflow MyAgent on task queue agents", NewVersion: second.Version},
		{ChangedBy: "carol", OldKind: vocab.RouteWorkflow, NewKind: "", Detail: "default route"},
		{ChangedBy: "dave", OldKind: "", NewKind: vocab.RouteEcho, Detail: vocab.RouteEcho, NewVersion: third.Version},
	}
	if len(changes) != len(want) {
		t.Fatalf("%d audit rows, want %d: %+v", len(changes), len(want), changes)
	}
	for i, c := range changes {
		w := want[i]
		if c.ChangedBy != w.ChangedBy || c.OldKind != w.OldKind || c.NewKind != w.NewKind || c.Detail != w.Detail ||
			c.NewVersion != w.NewVersion || c.AccountKey != a.key || c.ChangedAt.IsZero() {
			t.Errorf("change %d: %+v, want %+v", i, c, w)
		}
	}
	var dump string
	if err := e.pool.QueryRow(e.ctx, `SELECT string_agg(route_audit::text, ' ') FROM route_audit WHERE account_key = $1`, a.key).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, routeSecret) || strings.Contains(dump, "url-key") {
		t.Fatalf("the audit holds the secret or the webhook's full URL: %s", dump)
	}
	if _, found, err := e.store.GetRoute(e.ctx, a.key); err != nil || !found {
		t.Fatalf("GetRoute after the last set: %v %v", found, err)
	}
}
