package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The MCP server, driven by the official Go SDK's MCP client over streamable HTTP, against
// the real dev server, PostgreSQL and the simulator.

// bearer adds an MCP agent's token to every request of the client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpAgent adds an MCP agent and returns its token.
func (a *apiSystem) mcpAgent(name string) string {
	a.t.Helper()
	token, err := a.store.CreateMCPAgent(a.ctx, time.Now(), name, "e2e")
	if err != nil {
		a.t.Fatal(err)
	}
	return token.Reveal()
}

// routeToMCP routes a bot to an MCP agent.
func (a *apiSystem) routeToMCP(accountKey, agentName string) {
	a.t.Helper()
	if _, err := a.store.SetRoute(a.ctx, time.Now(), store.RouteInput{AccountKey: accountKey, Kind: vocab.RouteMCP, MCPAgent: agentName, By: "e2e"}); err != nil {
		a.t.Fatal(err)
	}
}

// mcpBot enrolls a bot, adds an MCP agent and routes the bot to it.
func (a *apiSystem) mcpBot(offerID, owner, agentName string) (string, ilinksim.BotInfo, string) {
	a.t.Helper()
	key, bot := a.enrolledBot(offerID, owner)
	token := a.mcpAgent(agentName)
	a.routeToMCP(key, agentName)
	return key, bot, token
}

// connectMCP connects an MCP client session with the token.
func (a *apiSystem) connectMCP(token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	return c.Connect(a.ctx, &mcp.StreamableClientTransport{Endpoint: a.base + mcpserver.Path,
		HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, nil)
}

func (a *apiSystem) mustConnectMCP(token string) *mcp.ClientSession {
	a.t.Helper()
	cs, err := a.connectMCP(token)
	if err != nil {
		a.t.Fatalf("connect MCP: %v", err)
	}
	a.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its result (a protocol error fails the test).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// toolOK decodes a successful tool result's structured content into out.
func toolOK(t *testing.T, name string, res *mcp.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s refused: %s", name, toolText(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, raw, err)
	}
}

// toolRefusal is a refused tool call's typed error.
func toolRefusal(t *testing.T, name string, res *mcp.CallToolResult) mcpserver.ToolError {
	t.Helper()
	if !res.IsError {
		t.Fatalf("%s was not refused: %s", name, toolText(res))
	}
	var e mcpserver.ToolError
	if err := json.Unmarshal([]byte(toolText(res)), &e); err != nil || e.Code == "" || e.Status == 0 || e.Message == "" {
		t.Fatalf("%s: the refusal is not a typed error: %s", name, toolText(res))
	}
	return e
}

func toolText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// waitMessage waits for the next message of the agent.
func waitMessage(t *testing.T, cs *mcp.ClientSession, timeoutSeconds int) mcpserver.WaitOutput {
	t.Helper()
	var out mcpserver.WaitOutput
	toolOK(t, mcpserver.ToolWait, callTool(t, cs, mcpserver.ToolWait, map[string]any{"timeout_seconds": timeoutSeconds}), &out)
	return out
}

func TestAnMCPAgentWaitsFetchesTheImageRepliesWithTextAndImageAndFinishes(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxMediaBytes = 256 << 10
	limits.WindowLifetime = time.Hour
	a := startAPI(t, limits, nil)
	const owner = "o9cq8mcpowner000000000001@im.wechat"
	key, bot, token := a.mcpBot("qo_e2e_mcp", owner, "support")
	cs := a.mustConnectMCP(token)

	tools, err := cs.ListTools(a.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	want := []string{mcpserver.ToolFetchAttachment, mcpserver.ToolFinish, mcpserver.ToolReplyMedia, mcpserver.ToolReplyText,
		mcpserver.ToolTyping, mcpserver.ToolWait}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %q, want %q", names, want)
	}

	// Nothing yet: a look finds nothing.
	if out := waitMessage(t, cs, 0); !out.TimedOut || out.Message != nil {
		t.Fatalf("an empty inbox answered %+v", out)
	}
	picture := pngBytes(t, 11)
	if _, err := a.ctl.Inject(a.ctx, bot.BotID, ilinksim.InjectRequest{Kind: "image", Data: picture}); err != nil {
		t.Fatal(err)
	}
	out := waitMessage(t, cs, 90)
	m := out.Message
	if m == nil || m.Bot != key || m.Conversation != owner || len(m.Attachments) != 1 || m.Attachments[0].Kind != "image" ||
		!m.Attachments[0].Fetchable || m.Taken != 1 || m.Window.SendsLeft != int32(limits.MaxSends) {
		t.Fatalf("the wait answered %+v", out)
	}

	res := callTool(t, cs, mcpserver.ToolFetchAttachment, map[string]any{"message_key": m.MessageKey, "index": 0})
	var fetched mcpserver.FetchOutput
	toolOK(t, mcpserver.ToolFetchAttachment, res, &fetched)
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || !bytes.Equal(img.Data, picture) || img.MIMEType != "image/png" || fetched.Size != len(picture) {
		t.Fatalf("fetched %+v; image content present %v", fetched, img != nil)
	}

	toolOK(t, mcpserver.ToolTyping, callTool(t, cs, mcpserver.ToolTyping, map[string]any{"message_key": m.MessageKey, "status": "typing"}), &mcpserver.StatusOutput{})
	var r1, r1again, r2 mcpserver.ReplyOutput
	toolOK(t, mcpserver.ToolReplyText, callTool(t, cs, mcpserver.ToolReplyText,
		map[string]any{"message_key": m.MessageKey, "text": "a fine picture", "idempotency_key": "r1"}), &r1)
	// The same call again (a retry) answers the first outcome and sends nothing.
	toolOK(t, mcpserver.ToolReplyText, callTool(t, cs, mcpserver.ToolReplyText,
		map[string]any{"message_key": m.MessageKey, "text": "a fine picture", "idempotency_key": "r1"}), &r1again)
	answerPicture := pngBytes(t, 12)
	toolOK(t, mcpserver.ToolReplyMedia, callTool(t, cs, mcpserver.ToolReplyMedia,
		map[string]any{"message_key": m.MessageKey, "type": "image", "data_base64": base64.StdEncoding.EncodeToString(answerPicture),
			"idempotency_key": "r2"}), &r2)
	if r1.Status != vocab.AttemptSent || r1again.AttemptID != r1.AttemptID || r2.Status != vocab.AttemptSent ||
		r2.SendsLeft != int32(limits.MaxSends)-2 {
		t.Fatalf("replies: %+v, again %+v, image %+v", r1, r1again, r2)
	}
	var fin mcpserver.StatusOutput
	toolOK(t, mcpserver.ToolFinish, callTool(t, cs, mcpserver.ToolFinish, map[string]any{"message_key": m.MessageKey, "status": "handled"}), &fin)
	a.messageReaches(m.MessageKey, vocab.MessageHandled, 30*time.Second)

	// The user received exactly the text and the image.
	sent, err := a.ctl.Sent(a.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want 2", len(sent))
	}
	if texts := a.sentTexts(bot.BotID); len(texts) != 2 || texts[0] != "a fine picture" || texts[1] != "" { // the image has no text
		t.Fatalf("texts sent %q", texts)
	}
	var msg struct {
		ItemList []sentItem `json:"item_list"`
	}
	if err := json.Unmarshal(sent[1].Msg, &msg); err != nil || len(msg.ItemList) != 1 || msg.ItemList[0].ImageItem == nil {
		t.Fatalf("second reply %s", sent[1].Msg)
	}
	obj, err := a.ctl.CDNObject(a.ctx, msg.ItemList[0].ImageItem.Media.EncryptQueryParam)
	if err != nil || !bytes.Equal(obj.Plaintext, answerPicture) {
		t.Fatalf("the image reply's CDN object differs from the bytes sent (%v)", err)
	}
	// A finished message is not offered again.
	if out := waitMessage(t, cs, 0); out.Message != nil {
		t.Fatalf("a finished message was offered again: %+v", out.Message)
	}
	a.logs.assertNotLogged(t, token, "a fine picture")
}

func TestAnMCPMessageDroppedByItsClientIsOfferedAgainOnReconnectAndAnsweredOnce(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	a := startAPI(t, limits, nil)
	_, bot, token := a.mcpBot("qo_e2e_mcp_drop", "o9cq8mcpdrop0000000000001@im.wechat", "dropper")

	first, err := a.connectMCP(token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "are you there?"); err != nil {
		t.Fatal(err)
	}
	got := waitMessage(t, first, 90).Message
	if got == nil || got.Text != "are you there?" {
		t.Fatalf("first session got %+v", got)
	}
	// While the first session holds it, no other session of the agent gets it.
	second := a.mustConnectMCP(token)
	if out := waitMessage(t, second, 2); out.Message != nil {
		t.Fatalf("a message held by a live session was offered to another: %+v", out.Message)
	}
	// The first client goes away before it replies.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := waitMessage(t, second, 60).Message
	if again == nil || again.MessageKey != got.MessageKey || again.Taken != 2 {
		t.Fatalf("after the disconnect the agent got %+v, want %s again, taken twice", again, got.MessageKey)
	}
	var r mcpserver.ReplyOutput
	toolOK(t, mcpserver.ToolReplyText, callTool(t, second, mcpserver.ToolReplyText,
		map[string]any{"message_key": again.MessageKey, "text": "yes, here", "idempotency_key": "only"}), &r)
	toolOK(t, mcpserver.ToolFinish, callTool(t, second, mcpserver.ToolFinish, map[string]any{"message_key": again.MessageKey, "status": "handled"}),
		&mcpserver.StatusOutput{})
	a.messageReaches(got.MessageKey, vocab.MessageHandled, 30*time.Second)
	if texts := a.sentTexts(bot.BotID); len(texts) != 1 || texts[0] != "yes, here" {
		t.Fatalf("sent %q, want one answer", texts)
	}
	a.logs.assertNotLogged(t, token, "are you there?", "yes, here")
}

func TestAnMCPTokenReachesOnlyItsOwnBotsAndARevokedTokenIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	a := startAPI(t, limits, nil)
	keyA, botA := a.enrolledBot("qo_e2e_mcp_sec_a", "o9cq8mcpseca000000000001@im.wechat")
	tokenA, tokenB := a.mcpAgent("agent-a"), a.mcpAgent("agent-b")
	a.routeToMCP(keyA, "agent-a")
	csA, csB := a.mustConnectMCP(tokenA), a.mustConnectMCP(tokenB)
	if _, err := a.ctl.Inject(a.ctx, botA.BotID, ilinksim.InjectRequest{Kind: "image", Data: pngBytes(t, 3)}); err != nil {
		t.Fatal(err)
	}
	m := waitMessage(t, csA, 90).Message
	if m == nil {
		t.Fatal("agent A got nothing")
	}

	// Agent B can neither wait on, reply to, fetch from nor finish agent A's bot.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{mcpserver.ToolWait, map[string]any{"bot": keyA, "timeout_seconds": 0}},
		{mcpserver.ToolReplyText, map[string]any{"message_key": m.MessageKey, "text": "hijack", "idempotency_key": "b1"}},
		{mcpserver.ToolFetchAttachment, map[string]any{"message_key": m.MessageKey, "index": 0}},
		{mcpserver.ToolTyping, map[string]any{"message_key": m.MessageKey, "status": "typing"}},
		{mcpserver.ToolFinish, map[string]any{"message_key": m.MessageKey, "status": "failed", "reason": "hijack"}},
	} {
		if e := toolRefusal(t, c.tool, callTool(t, csB, c.tool, c.args)); e.Code != mcpserver.CodeBotNotRouted || e.Status != http.StatusForbidden {
			t.Fatalf("agent B's %s: %+v, want 403 %s", c.tool, e, mcpserver.CodeBotNotRouted)
		}
	}
	// Bad arguments are typed refusals.
	for _, c := range []struct {
		tool, code string
		args       map[string]any
	}{
		{mcpserver.ToolReplyText, mcpserver.CodeInvalidArgument, map[string]any{"message_key": 7, "text": "x", "idempotency_key": "k"}},
		{mcpserver.ToolReplyText, mcpserver.CodeInvalidArgument, map[string]any{"message_key": m.MessageKey, "text": "x", "idempotency_key": "k", "extra": 1}},
		{mcpserver.ToolReplyText, mcpserver.CodeInvalidArgument, map[string]any{"message_key": m.MessageKey, "text": "x"}},
		{mcpserver.ToolReplyText, "invalid_text", map[string]any{"message_key": m.MessageKey, "text": "nul\x00here", "idempotency_key": "k0"}},
		{mcpserver.ToolFetchAttachment, mcpserver.CodeInvalidArgument, map[string]any{"message_key": "im_nothex", "index": 0}},
		{mcpserver.ToolFetchAttachment, mcpserver.CodeMessageNotFound, map[string]any{"message_key": "im_" + strings.Repeat("0", 32), "index": 0}},
		{mcpserver.ToolWait, mcpserver.CodeInvalidArgument, map[string]any{"timeout_seconds": 100000}},
		{mcpserver.ToolFinish, "invalid_status", map[string]any{"message_key": m.MessageKey, "status": "maybe"}},
		{mcpserver.ToolReplyMedia, mcpserver.CodeInvalidArgument, map[string]any{"message_key": m.MessageKey, "type": "image", "idempotency_key": "k1"}},
	} {
		if e := toolRefusal(t, c.tool, callTool(t, csA, c.tool, c.args)); e.Code != c.code || e.Status < 400 || e.Status >= 500 {
			t.Fatalf("%s %v: %+v, want %s", c.tool, c.args, e, c.code)
		}
	}

	// A revoked token is refused at its next request, and cannot connect again.
	if _, err := a.store.RevokeMCPAgent(a.ctx, time.Now(), "agent-a", "e2e"); err != nil {
		t.Fatal(err)
	}
	if _, err := csA.CallTool(a.ctx, &mcp.CallToolParams{Name: mcpserver.ToolWait, Arguments: map[string]any{"timeout_seconds": 0}}); err == nil {
		t.Fatal("a revoked token's call went through")
	}
	if cs, err := a.connectMCP(tokenA); err == nil {
		_ = cs.Close()
		t.Fatal("a revoked token connected")
	}
	// Without a token, or with a made-up one: 401 with a typed code.
	for _, h := range []string{"", "Bearer ilkmcp_made-up-token-0123456789"} {
		var headers []string
		if h != "" {
			headers = []string{"Authorization", h}
		}
		ans := a.do(http.MethodPost, mcpserver.Path, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`),
			append(headers, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")...)
		var body struct {
			Error mcpserver.ToolError `json:"error"`
		}
		ans.json(t, &body)
		if ans.status != http.StatusUnauthorized || body.Error.Code != mcpserver.CodeInvalidToken {
			t.Fatalf("authorization %q: %d %s", h, ans.status, ans.body)
		}
	}
	if texts := a.sentTexts(botA.BotID); len(texts) != 0 {
		t.Fatalf("sent %q", texts)
	}
	a.logs.assertNotLogged(t, tokenA, tokenB, "hijack")
}
