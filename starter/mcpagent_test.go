package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestMCPAgentAndRouteHelpShowExamples(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"mcp-agent", []string{"\nexample:\n  starter mcp-agent add support", "revoke", "list"}},
		{"route", []string{"--mcp-agent", "starter route --account ilk_0123abcd --mcp-agent support"}},
	} {
		code, out, errOut := cliRun(t, c.cmd, "--help")
		if code != 0 || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", c.cmd, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s --help lacks %q:\n%s", c.cmd, w, out)
			}
		}
	}
}

func TestAnMCPAgentTokenIsPrintedOnceAndTheAgentAnswersTheBotsRoutedToIt(t *testing.T) {
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
	a, err := storetest.RegisterAccount(ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: "0000000mcp01@im.bot", OwnerPeerID: "o9-mcp@im.wechat",
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("mcp:token")})
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == sealing.EnvKeys {
			return testkit.KeySpec
		}
		return ""
	}
	var printed []string // every token printed: none may show in a later command's output
	starter := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(args[:1:1], append([]string{"--database-url", dbtest.SchemaURL(schema)}, args[1:]...)...)
		code := runMain(ctx, args, strings.NewReader(""), &out, &errOut, getenv)
		for _, tok := range printed {
			if strings.Contains(out.String()+errOut.String(), tok) {
				t.Fatalf("starter %v printed an earlier token", args)
			}
		}
		return code, out.String(), errOut.String()
	}

	code, out, errOut := starter("mcp-agent", "add", "support", "--json")
	var added mcpAgentResult
	if code != 0 || json.Unmarshal([]byte(out), &added) != nil || !strings.HasPrefix(added.Token, store.MCPTokenPrefix) {
		t.Fatalf("mcp-agent add: exit %d, %q, stderr %q", code, out, errOut)
	}
	printed = append(printed, added.Token)
	if name, found, err := st.MCPAgentByToken(ctx, sealing.NewSecret(added.Token)); err != nil || !found || name != "support" {
		t.Fatalf("the printed token resolves to %q %v %v", name, found, err)
	}
	if code, _, errOut = starter("mcp-agent", "add", "support"); code != 1 || !strings.Contains(errOut, "mcp_agent_exists") {
		t.Fatalf("a second add: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut = starter("mcp-agent", "add", "Bad Name"); code != 2 {
		t.Fatalf("a bad name: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut = starter("route", "--account", a.AccountKey, "--mcp-agent", "support"); code != 0 || !strings.Contains(out, "MCP agent support") {
		t.Fatalf("route --mcp-agent: exit %d, %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut = starter("route", "--account", a.AccountKey, "--mcp-agent", "ghost"); code != 1 || !strings.Contains(errOut, "mcp_agent_not_found") {
		t.Fatalf("route to an unknown agent: exit %d, stderr %q", code, errOut)
	}
	if _, text, _ := starter("accounts"); !strings.Contains(text, "mcp (support)") {
		t.Fatalf("accounts text:\n%s", text)
	}
	code, out, errOut = starter("route", "--changes", "--account", a.AccountKey, "--json")
	var changes []routeChangeRow
	if code != 0 || json.Unmarshal([]byte(out), &changes) != nil || len(changes) != 1 || changes[0].From != "default" ||
		changes[0].To != vocab.RouteMCP || changes[0].Detail != "mcp agent support" || changes[0].ChangedBy == "" {
		t.Fatalf("route --changes: exit %d, %q, stderr %q", code, out, errOut)
	}
	if _, text, _ := starter("route", "--changes"); !strings.Contains(text, "mcp agent support") || !strings.Contains(text, "CHANGED AT") {
		t.Fatalf("route --changes text:\n%s", text)
	}
	code, out, errOut = starter("mcp-agent", "list", "--json")
	var rows []mcpAgentRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Agent != "support" || rows[0].Bots != 1 || rows[0].RevokedAt != nil {
		t.Fatalf("mcp-agent list: exit %d, %q, stderr %q", code, out, errOut)
	}

	// A new token replaces the old one; a revoked one is refused.
	code, out, errOut = starter("mcp-agent", "token", "support")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	newer := lines[len(lines)-1]
	if code != 0 || !strings.HasPrefix(newer, store.MCPTokenPrefix) {
		t.Fatalf("mcp-agent token: exit %d, %q, stderr %q", code, out, errOut)
	}
	printed = append(printed, newer)
	if _, found, _ := st.MCPAgentByToken(ctx, sealing.NewSecret(added.Token)); found {
		t.Fatal("the replaced token still resolves")
	}
	if code, out, errOut = starter("mcp-agent", "revoke", "support"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("mcp-agent revoke: exit %d, %q, stderr %q", code, out, errOut)
	}
	if _, found, _ := st.MCPAgentByToken(ctx, sealing.NewSecret(newer)); found {
		t.Fatal("a revoked token resolves")
	}
	if _, text, _ := starter("mcp-agent", "list"); !strings.Contains(text, "support") || !strings.Contains(text, "REVOKED") || strings.Contains(text, store.MCPTokenPrefix) {
		t.Fatalf("mcp-agent list:\n%s", text)
	}
}
