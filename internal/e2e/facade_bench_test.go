package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// BenchmarkFacadeAndMCPRouteLatency measures what the iLink facade adds to a message's way
// in and a reply's way out, against the MCP route in the same run: one gateway, one bot
// routed to an iLink client (the repo's Go iLink client polling the facade), one to an MCP
// agent (the official Go SDK's client waiting with wait_for_message), the messages of the
// two alternating. In: from the simulator taking the user's message to the agent holding
// it. Out: one text reply, from the agent's call to its answer (the send is done by then).
// It reports the p50 of each, in milliseconds:
//
//	go test ./internal/e2e/ -run '^$' -bench FacadeAndMCPRouteLatency -benchtime 40x
func BenchmarkFacadeAndMCPRouteLatency(b *testing.B) {
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	a := startAPI(b, limits, nil)
	a.iLinkClientAdd("bench")
	fb := a.facadeBotOf("bench", "qo_bench_facade", "o9cq8benchfacade000000001@im.wechat")
	_, mcpBot, token := a.mcpBot("qo_bench_mcp", "o9cq8benchmcp000000000001@im.wechat", "bench")
	cs, err := a.connectMCP(token)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cs.Close() }()

	var facadeIn, facadeOut, mcpIn, mcpOut []time.Duration
	cursor := ""
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The facade route.
		t0 := time.Now()
		if _, err := a.ctl.InjectText(a.ctx, fb.simBot, "", fmt.Sprintf("facade %d", i)); err != nil {
			b.Fatal(err)
		}
		var msgs []ilink.Message
		msgs, cursor = a.takeMessages(fb.client, cursor, 1)
		facadeIn = append(facadeIn, time.Since(t0))
		t1 := time.Now()
		if _, err := fb.client.SendText(a.ctx, ilink.SendOptions{ToUserID: fb.owner, ContextToken: msgs[0].ContextToken}, "ok"); err != nil {
			b.Fatal(err)
		}
		facadeOut = append(facadeOut, time.Since(t1))

		// The MCP route.
		t0 = time.Now()
		if _, err := a.ctl.InjectText(a.ctx, mcpBot.BotID, "", fmt.Sprintf("mcp %d", i)); err != nil {
			b.Fatal(err)
		}
		var out mcpserver.WaitOutput
		if err := benchTool(cs, mcpserver.ToolWait, map[string]any{"timeout_seconds": 60}, &out); err != nil || out.Message == nil {
			b.Fatalf("wait: %v %+v", err, out)
		}
		mcpIn = append(mcpIn, time.Since(t0))
		t1 = time.Now()
		var r mcpserver.ReplyOutput
		if err := benchTool(cs, mcpserver.ToolReplyText, map[string]any{"message_key": out.Message.MessageKey, "text": "ok",
			"idempotency_key": fmt.Sprintf("r%d", i)}, &r); err != nil {
			b.Fatal(err)
		}
		mcpOut = append(mcpOut, time.Since(t1))
		if err := benchTool(cs, mcpserver.ToolFinish, map[string]any{"message_key": out.Message.MessageKey, "status": "handled"},
			&mcpserver.StatusOutput{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for name, d := range map[string][]time.Duration{"facade-in": facadeIn, "facade-out": facadeOut, "mcp-in": mcpIn, "mcp-out": mcpOut} {
		b.ReportMetric(p50ms(d), name+"-p50-ms")
	}
}

// benchTool calls an MCP tool and decodes its structured result; a refusal is an error.
func benchTool(cs *mcp.ClientSession, name string, args map[string]any, out any) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s refused: %s", name, toolText(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func p50ms(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
