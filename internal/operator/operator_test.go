package operator_test

import (
	"context"
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

// The account list carries each bot's route, with what names its agent (an MCP agent, an
// iLink client, ...), and shows it in one phrase: "ilink (openclaw)" as "mcp (support)".
func TestAccountsCarryEachBotsRouteAndShowItInOnePhrase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(dbtest.NewPool(t), testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.CreateMCPAgent(ctx, now, "support", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateILinkClient(ctx, now, "openclaw", "test"); err != nil {
		t.Fatal(err)
	}
	routes := []struct {
		in   *store.RouteInput
		want string
	}{
		{&store.RouteInput{Kind: vocab.RouteILink, ILinkClient: "openclaw"}, "ilink (openclaw)"},
		{&store.RouteInput{Kind: vocab.RouteMCP, MCPAgent: "support"}, "mcp (support)"},
		{&store.RouteInput{Kind: vocab.RouteWorkflow, WorkflowType: "MyAgent", TaskQueue: "agents"}, "workflow (MyAgent on agents)"},
		{&store.RouteInput{Kind: vocab.RouteEcho}, "echo"},
		{nil, operator.RouteDefault},
	}
	want := map[string]string{}
	for i, r := range routes {
		bot := []string{"00000000ro0a", "00000000ro0b", "00000000ro0c", "00000000ro0d", "00000000ro0e"}[i]
		a, err := storetest.RegisterAccount(ctx, st, now, store.ConfirmInput{ProviderAccountID: bot + "@im.bot", OwnerPeerID: "o9-" + bot + "@im.wechat",
			BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
		if err != nil {
			t.Fatal(err)
		}
		if r.in != nil {
			r.in.AccountKey, r.in.By = a.AccountKey, "test"
			if _, err := st.SetRoute(ctx, now, *r.in); err != nil {
				t.Fatal(err)
			}
		}
		want[a.AccountKey] = r.want
	}
	rows, err := operator.Accounts(ctx, st, "", false)
	if err != nil || len(rows) != len(routes) {
		t.Fatalf("accounts: %d rows, %v", len(rows), err)
	}
	for _, row := range rows {
		if got := row.RouteState(); got != want[row.AccountKey] {
			t.Errorf("%s: route %q, want %q (%+v)", row.AccountKey, got, want[row.AccountKey], row)
		}
		if row.Route == vocab.RouteILink && (row.RouteILinkClient != "openclaw" || row.RouteMCPAgent != "") {
			t.Errorf("the ilink route's row: %+v", row)
		}
	}
}
