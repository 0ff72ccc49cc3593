package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Bounds of the MCP crash test, for a busy 2-core machine.
const (
	// mcpCrashReadyWithin bounds a worker process's start (reconciled, serving HTTP).
	mcpCrashReadyWithin = 3 * time.Minute
	// mcpCrashWaitSeconds is the timeout of the agent's waits (the tool's maximum).
	mcpCrashWaitSeconds = int(mcpserver.MaxWait / time.Second)
	// mcpCrashBackWithin bounds, from the kill, the arrival at the new session of both
	// messages: the one the dead session held comes back once its lease lapsed (the
	// MCP server's default lease, which the worker does not shorten), the other once the
	// new worker polls its bot; the margin covers the new worker's start.
	mcpCrashBackWithin = mcpserver.DefaultLease + 3*time.Minute
	mcpCrashAgent      = "crash-agent"
)

// TestAWorkerKilledWhileAnMCPAgentWaitsLosesNoMessageAndAnswersEachOnce: an MCP agent
// answers two bots routed to it (set with the starter, as an operator does) through a
// worker process's MCP server. The agent took the first bot's message in its session
// (the claim is the dead session's from then on) and waits for the next message when
// the worker is SIGKILLed; the second bot's user writes while no worker runs. A new
// worker process starts on another port, the agent connects to it (a new MCP session)
// and waits: it gets both messages, the first only once the dead session's claim lapsed
// (never while it runs), answers each once and finishes it. The users got exactly one
// answer per message, no client message id reached iLink twice, both messages end
// handled, and a finished message is not offered again.
//
// Two bots, not two messages of one: a user's second message supersedes the window of
// the first, which is then absorbed into the second's delivery (a backlog) when none of
// its replies was sent (docs/architecture.md), so one bot would get one answer for both.
func TestAWorkerKilledWhileAnMCPAgentWaitsLosesNoMessageAndAnswersEachOnce(t *testing.T) {
	t.Parallel()
	began := time.Now()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newProcRig(t, 500*time.Millisecond, limits)
	ctx := r.ctx
	bot1, acct1 := r.bot, r.acct
	bot2, err := r.ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	acct2, err := storetest.RegisterAccount(ctx, r.store, time.Now(), store.ConfirmInput{ProviderAccountID: bot2.BotID,
		OwnerPeerID: bot2.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(bot2.Token)})
	if err != nil {
		t.Fatal(err)
	}
	env := r.baseEnv(map[string]string{
		"ILINKFLOW_WINDOW_LIFETIME": limits.WindowLifetime.String(),
		"ILINKFLOW_SEND_GAP":        "5ms",
		"ILINKFLOW_POLL_SESSION":    "3s",
		"ILINKFLOW_HEARTBEAT":       "1s",
		"ILINKFLOW_LOG_LEVEL":       "info",
		"ILINKFLOW_SHUTDOWN_GRACE":  "2s",
		// A short poll lease: the new worker resumes the dead one's bots within seconds.
		"ILINKFLOW_POLL_LEASE_TTL": "6s",
		"TEMPORAL_CONFIG_FILE":     emptyConfigFile,
	})

	// The operator adds the MCP agent and routes both bots to it.
	var added struct {
		Agent, Token string
	}
	mcpCrashStarter(t, env, &added, "mcp-agent", "add", mcpCrashAgent, "--json", "--by", "e2e")
	if added.Agent != mcpCrashAgent || !strings.HasPrefix(added.Token, store.MCPTokenPrefix) {
		t.Fatalf("starter mcp-agent add printed agent %q and a token of %d bytes", added.Agent, len(added.Token))
	}
	for _, key := range []string{acct1.AccountKey, acct2.AccountKey} {
		var routed struct {
			AccountKey string `json:"account_key"`
			Route      string `json:"route"`
			MCPAgent   string `json:"mcp_agent"`
		}
		mcpCrashStarter(t, env, &routed, "route", "--json", "--by", "e2e", "--account", key, "--mcp-agent", mcpCrashAgent)
		if routed.AccountKey != key || routed.Route != vocab.RouteMCP || routed.MCPAgent != mcpCrashAgent {
			t.Fatalf("starter route printed %+v", routed)
		}
	}

	// Worker A; the agent's first session waits on it.
	workerA := startProc(t, "worker A", r.bin, env)
	baseA := mcpCrashServing(t, workerA)
	agent := &mcpCrashTransport{token: added.Token, waitWritten: make(chan struct{}, 16)}
	s1 := mcpCrashConnect(t, baseA, agent)
	t.Logf("worker A (pid %d) serves MCP on %s after %v; session 1 is %s", workerA.cmd.Process.Pid, baseA,
		time.Since(began).Round(time.Millisecond), s1.ID())
	waitCtx, stopWaits := context.WithCancel(ctx)
	defer stopWaits()
	first := mcpCrashWaitAsync(waitCtx, s1)

	const text1, text2 = "first bot: are you there?", "second bot: hello while you were down"
	in1, err := r.ctl.InjectText(ctx, bot1.BotID, "", text1)
	if err != nil {
		t.Fatal(err)
	}
	var taken mcpCrashWait
	select {
	case taken = <-first:
	case <-time.After(mcpserver.MaxWait + time.Minute):
		t.Fatalf("session 1's wait did not end within %v", mcpserver.MaxWait+time.Minute)
	}
	if taken.err != nil || taken.out.Message == nil {
		t.Fatalf("session 1's wait for the first message: %+v, %v", taken.out, taken.err)
	}
	m1 := *taken.out.Message
	if m1.Bot != acct1.AccountKey || m1.Text != text1 || m1.Conversation != bot1.Owner || m1.Taken != 1 {
		t.Fatalf("session 1 got %+v, want %q of bot %s", m1, text1, acct1.AccountKey)
	}
	if claimedBy, _ := mcpCrashClaim(t, r, m1.MessageKey); claimedBy != s1.ID() {
		t.Fatalf("the first message is claimed by %q, want session 1 (%s)", claimedBy, s1.ID())
	}
	// The agent holds the first message, not answered yet, and waits for the next one:
	// its wait request is on the wire when the worker dies.
	for len(agent.waitWritten) > 0 {
		<-agent.waitWritten
	}
	second := mcpCrashWaitAsync(waitCtx, s1)
	select {
	case <-agent.waitWritten:
	case w := <-second:
		t.Fatalf("session 1's second wait ended before the kill: %+v, %v", w.out, w.err)
	case <-time.After(time.Minute):
		t.Fatal("session 1's second wait was not sent within a minute")
	}

	if err := workerA.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-workerA.exited
	killed := time.Now()
	// Nothing renews the dead session's claim any more: its lease is final.
	claimedBy, leaseUntil := mcpCrashClaim(t, r, m1.MessageKey)
	if claimedBy != s1.ID() || leaseUntil.Before(killed) {
		t.Fatalf("after the kill the first message is claimed by %q until %v, want session 1 (%s) past the kill (%v)",
			claimedBy, leaseUntil, s1.ID(), killed)
	}
	t.Logf("worker A SIGKILLed while session 1 waited and held the first message; its claim lapses %v after the kill",
		leaseUntil.Sub(killed).Round(time.Millisecond))

	// The second bot's user writes while no worker runs. No getupdates of the dead worker
	// may still be held at iLink: it would take the message with it (iLink hands a
	// message out once).
	testkit.Eventually(t, "no getupdates of the dead worker held at the simulator", 30*time.Second, func() (bool, error) {
		n := mcpCrashPollsHeld(r.tap)
		return n == 0, fmt.Errorf("%d getupdates held", n)
	})
	in2, err := r.ctl.InjectText(ctx, bot2.BotID, "", text2)
	if err != nil {
		t.Fatal(err)
	}
	if bs, err := r.ctl.BotState(ctx, bot2.BotID); err != nil || bs.Queued != 1 {
		t.Fatalf("the second bot's message is not queued at the simulator while no worker runs: %+v, %v", bs, err)
	}
	// The dead session's wait ends with an error, never with a message.
	select {
	case w := <-second:
		if w.err == nil {
			t.Fatalf("session 1's wait across the kill answered %+v", w.out)
		}
		t.Logf("session 1's wait ended %v after the kill: %v", time.Since(killed).Round(time.Millisecond), w.err)
	case <-time.After(time.Minute):
		t.Fatal("session 1's wait did not end within a minute of the kill")
	}

	// Worker B, on another port; the agent connects to it and answers what it gets.
	workerB := startProc(t, "worker B", r.bin, env)
	baseB := mcpCrashServing(t, workerB)
	s2 := mcpCrashConnect(t, baseB, agent)
	t.Logf("worker B (pid %d) serves MCP on %s %v after the kill; session 2 is %s", workerB.cmd.Process.Pid, baseB,
		time.Since(killed).Round(time.Millisecond), s2.ID())
	want := map[string]struct {
		bot, owner, text string
		injected         uint64
	}{
		acct1.AccountKey: {bot1.BotID, bot1.Owner, text1, in1.MessageID},
		acct2.AccountKey: {bot2.BotID, bot2.Owner, text2, in2.MessageID},
	}
	answered := map[string]string{} // message key → account key
	arrived := map[string]time.Duration{}
	deadline := killed.Add(mcpCrashBackWithin)
	for len(answered) < len(want) {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("within %v of the kill session 2 got %d of %d messages (%v)", mcpCrashBackWithin, len(answered), len(want), answered)
		}
		out := waitMessage(t, s2, min(mcpCrashWaitSeconds, max(1, int(left/time.Second))))
		if out.Message == nil {
			continue
		}
		m, got := *out.Message, time.Now()
		if acct, twice := answered[m.MessageKey]; twice {
			t.Fatalf("message %s (bot %s) was offered again after the agent finished it", m.MessageKey, acct)
		}
		w, ok := want[m.Bot]
		if !ok || m.Text != w.text || m.Conversation != w.owner {
			t.Fatalf("session 2 got %+v", m)
		}
		if m.Bot == acct1.AccountKey {
			if m.MessageKey != m1.MessageKey {
				t.Fatalf("the first bot's message came back as %s, want %s", m.MessageKey, m1.MessageKey)
			}
			if got.Before(leaseUntil) {
				t.Fatalf("the message the dead session held was given to session 2 %v before its claim lapsed", leaseUntil.Sub(got))
			}
			if m.Taken != 2 {
				t.Fatalf("the message the dead session held came back taken %d times, want 2 (the agent must know it may have replied)", m.Taken)
			}
		}
		arrived[m.Bot] = got.Sub(killed)
		var reply mcpserver.ReplyOutput
		toolOK(t, mcpserver.ToolReplyText, callTool(t, s2, mcpserver.ToolReplyText, map[string]any{
			"message_key": m.MessageKey, "text": "answer: " + w.text, "idempotency_key": "answer-" + m.MessageKey}), &reply)
		if reply.Status != vocab.AttemptSent {
			t.Fatalf("the reply to %s: %+v", m.MessageKey, reply)
		}
		var fin mcpserver.StatusOutput
		toolOK(t, mcpserver.ToolFinish, callTool(t, s2, mcpserver.ToolFinish, map[string]any{"message_key": m.MessageKey, "status": "handled"}), &fin)
		answered[m.MessageKey] = m.Bot
	}
	// Nothing finished comes back.
	if out := waitMessage(t, s2, 2); out.Message != nil {
		t.Fatalf("after both were finished session 2 got %+v", out.Message)
	}

	// Each user got exactly one answer, each message ends handled, and nothing else
	// reached the inbox.
	sent, err := r.ctl.Sent(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	clientIDs := map[string]int{}
	perBot := map[string][]string{}
	for _, s := range sent {
		clientIDs[s.ClientID]++
		if s.Outcome != ilinksim.OutcomeAccepted {
			t.Errorf("send #%d to %s was %s (%s)", s.Index, s.BotID, s.Outcome, s.Reason)
		}
		perBot[s.BotID] = append(perBot[s.BotID], s.Text)
	}
	for id, n := range clientIDs {
		if n > 1 {
			t.Errorf("client message id %q reached the simulator %d times", id, n)
		}
	}
	for _, w := range want {
		if texts := perBot[w.bot]; len(texts) != 1 || texts[0] != "answer: "+w.text {
			t.Errorf("bot %s sent %q, want exactly one %q", w.bot, texts, "answer: "+w.text)
		}
	}
	if len(sent) != len(want) {
		t.Errorf("%d sends in all, want %d", len(sent), len(want))
	}
	for key := range answered {
		testkit.Eventually(t, "message "+key+" handled", 30*time.Second, func() (bool, error) {
			m, err := r.store.GetMessage(ctx, key)
			if err != nil {
				return false, err
			}
			return m.Status == vocab.MessageHandled, fmt.Errorf("status %s", m.Status)
		})
	}
	rows, err := r.pool.Query(ctx, "SELECT account_key, provider_message_id, status FROM inbound_messages ORDER BY inbox_seq")
	if err != nil {
		t.Fatal(err)
	}
	var inbox []string
	for rows.Next() {
		var acct, id, status string
		if err := rows.Scan(&acct, &id, &status); err != nil {
			t.Fatal(err)
		}
		inbox = append(inbox, acct+" "+id+" "+status)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantInbox := []string{
		fmt.Sprintf("%s %d %s", acct1.AccountKey, in1.MessageID, vocab.MessageHandled),
		fmt.Sprintf("%s %d %s", acct2.AccountKey, in2.MessageID, vocab.MessageHandled),
	}
	if strings.Join(inbox, "\n") != strings.Join(wantInbox, "\n") {
		t.Errorf("inbox:\n%s\nwant:\n%s", strings.Join(inbox, "\n"), strings.Join(wantInbox, "\n"))
	}
	t.Logf("after the kill session 2 got the second bot's message after %v and the dead session's message after %v (its claim lapsed after %v); total %v",
		arrived[acct2.AccountKey].Round(time.Millisecond), arrived[acct1.AccountKey].Round(time.Millisecond),
		leaseUntil.Sub(killed).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// mcpCrashStarter runs the starter with env and args (--json among them) and decodes
// what it printed into out.
func mcpCrashStarter(t *testing.T, env []string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, starterBinary(t), args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("starter %s: %v\n%s", args[0], err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("starter %s printed %d bytes that do not decode: %v", args[0], len(stdout), err)
	}
}

// mcpCrashServing waits until the worker has reconciled and serves HTTP, and returns the
// base URL of its agent-facing address.
func mcpCrashServing(t *testing.T, p *proc) string {
	t.Helper()
	p.waitLog(t, workerReady, mcpCrashReadyWithin)
	p.waitLog(t, `msg="serving HTTP"`, mcpCrashReadyWithin)
	return "http://" + p.httpAddr(t)
}

// mcpCrashTransport is the agent's HTTP transport: it adds the agent's token, and tells
// waitWritten (without blocking) each time a wait_for_message call was written to the
// connection.
type mcpCrashTransport struct {
	token       string
	waitWritten chan struct{}
}

func (a *mcpCrashTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if bytes.Contains(body, []byte(`"`+mcpserver.ToolWait+`"`)) {
			r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
				WroteRequest: func(info httptrace.WroteRequestInfo) {
					if info.Err == nil {
						select {
						case a.waitWritten <- struct{}{}:
						default:
						}
					}
				}}))
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpCrashConnect connects an MCP client session of the agent to base (no reconnects: a
// dead server ends the session).
func mcpCrashConnect(t *testing.T, base string, agent *mcpCrashTransport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-crash-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + mcpserver.Path,
		HTTPClient: &http.Client{Transport: agent}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect MCP to %s: %v", base, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpCrashWait is how a wait_for_message call ended.
type mcpCrashWait struct {
	out mcpserver.WaitOutput
	err error
}

// mcpCrashWaitAsync calls wait_for_message (the longest timeout) in a goroutine; the
// channel gets how it ended.
func mcpCrashWaitAsync(ctx context.Context, cs *mcp.ClientSession) <-chan mcpCrashWait {
	done := make(chan mcpCrashWait, 1)
	go func() {
		var w mcpCrashWait
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolWait,
			Arguments: map[string]any{"timeout_seconds": mcpCrashWaitSeconds}})
		switch {
		case err != nil:
			w.err = err
		case res.IsError:
			w.err = errors.New(toolText(res))
		default:
			raw, err := json.Marshal(res.StructuredContent)
			if err == nil {
				err = json.Unmarshal(raw, &w.out)
			}
			w.err = err
		}
		done <- w
	}()
	return done
}

// mcpCrashClaim is the MCP session holding a message's offer and its lease ("" when
// none does).
func mcpCrashClaim(t *testing.T, r *procRig, messageKey string) (string, time.Time) {
	t.Helper()
	o, found, err := r.store.GetMCPOffer(r.ctx, messageKey)
	if err != nil || !found {
		t.Fatalf("the offer of message %s: found %v, %v", messageKey, found, err)
	}
	return o.ClaimedBy, o.LeaseUntil
}

// mcpCrashPollsHeld counts the getupdates requests the simulator is answering.
func mcpCrashPollsHeld(tap *crashTap) int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return len(tap.inflight)
}
