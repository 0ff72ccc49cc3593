package store_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAnMCPTokenIsStoredAsItsHashAndARevokedOrReplacedTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, err := e.store.CreateMCPAgent(e.ctx, t0, "support", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token.Reveal(), store.MCPTokenPrefix) || len(token.Reveal()) < 40 {
		t.Fatalf("token of %d bytes", len(token.Reveal()))
	}
	var dump []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT convert_to(mcp_agents::text, 'UTF8') FROM mcp_agents`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(dump, []byte(token.Reveal())) {
		t.Fatal("the MCP token is stored in plaintext")
	}
	if name, found, err := e.store.MCPAgentByToken(e.ctx, token); err != nil || !found || name != "support" {
		t.Fatalf("the token resolves to %q %v %v", name, found, err)
	}
	if _, found, _ := e.store.MCPAgentByToken(e.ctx, sealing.NewSecret(token.Reveal()+"x")); found {
		t.Fatal("a token that differs resolved")
	}
	_, err = e.store.CreateMCPAgent(e.ctx, t0, "support", "bob")
	wantCode(t, err, vocab.CodeMCPAgentExists)
	_, err = e.store.CreateMCPAgent(e.ctx, t0, "Not A Name", "bob")
	wantCode(t, err, vocab.CodeInvalidInput)

	// A new token replaces the old one at once.
	newer, err := e.store.ReissueMCPAgentToken(e.ctx, t0.Add(time.Minute), "support")
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := e.store.MCPAgentByToken(e.ctx, token); found {
		t.Fatal("the replaced token still resolves")
	}
	if _, found, _ := e.store.MCPAgentByToken(e.ctx, newer); !found {
		t.Fatal("the new token does not resolve")
	}
	// A revoked token is refused; revoking again changes nothing; an unknown agent is named.
	if changed, err := e.store.RevokeMCPAgent(e.ctx, t0.Add(2*time.Minute), "support", "alice"); err != nil || !changed {
		t.Fatalf("revoke: %v %v", changed, err)
	}
	if _, found, _ := e.store.MCPAgentByToken(e.ctx, newer); found {
		t.Fatal("a revoked token resolves")
	}
	if changed, err := e.store.RevokeMCPAgent(e.ctx, t0.Add(3*time.Minute), "support", "alice"); err != nil || changed {
		t.Fatalf("second revoke: %v %v", changed, err)
	}
	_, err = e.store.RevokeMCPAgent(e.ctx, t0, "nobody", "alice")
	wantCode(t, err, vocab.CodeMCPAgentNotFound)
	agents, err := e.store.ListMCPAgents(e.ctx)
	if err != nil || len(agents) != 1 || agents[0].RevokedAt == nil || agents[0].RevokedBy != "alice" {
		t.Fatalf("agents %+v %v", agents, err)
	}
}

func TestAnMCPRouteNamesAnExistingAgentAndNoOtherKindNamesOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	before := e.digest()
	_, err := e.store.SetRoute(e.ctx, t0, store.RouteInput{AccountKey: b.key, Kind: vocab.RouteMCP, MCPAgent: "ghost", By: "alice"})
	wantCode(t, err, vocab.CodeMCPAgentNotFound)
	_, err = e.store.SetRoute(e.ctx, t0, store.RouteInput{AccountKey: b.key, Kind: vocab.RouteEcho, MCPAgent: "ghost", By: "alice"})
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)
	if routes, audits := e.routeRows(b.key); routes != 0 || audits != 0 {
		t.Fatalf("a refused route wrote %d routes and %d audits", routes, audits)
	}
	if _, err := e.store.CreateMCPAgent(e.ctx, t0, "support", "alice"); err != nil {
		t.Fatal(err)
	}
	set, err := e.store.SetRoute(e.ctx, t0, store.RouteInput{AccountKey: b.key, Kind: vocab.RouteMCP, MCPAgent: "support", By: "alice"})
	if err != nil || set.MCPAgent != "support" {
		t.Fatalf("SetRoute: %+v %v", set, err)
	}
	got, found, err := e.store.GetRoute(e.ctx, b.key)
	if err != nil || !found || got.Kind != vocab.RouteMCP || got.MCPAgent != "support" {
		t.Fatalf("GetRoute: %+v %v %v", got, found, err)
	}
	changes, err := e.store.ListRouteChanges(e.ctx, b.key)
	if err != nil || len(changes) != 1 || changes[0].Detail != "mcp agent support" {
		t.Fatalf("audit %+v %v", changes, err)
	}
	agents, err := e.store.ListMCPAgents(e.ctx)
	if err != nil || len(agents) != 1 || agents[0].Bots != 1 {
		t.Fatalf("agents %+v %v", agents, err)
	}
}

// mcpOffered delivers a message of a bot routed to the agent and offers it, as the
// hand-off of an mcp route does; it returns the offer input.
func (e *env) mcpOffered(b *bot, agent, text string) store.MCPOfferInput {
	e.t.Helper()
	res := e.commit(b, t0, b.msg(text, t0))
	if res.Deliverable == nil {
		e.t.Fatalf("message was not deliverable: %+v", res)
	}
	return e.reofferMCP(b, agent, res.Deliverable.ReplyWindowID, res.Deliverable.MessageKey, t0)
}

// reofferMCP opens a new session on the window and offers the message with it.
func (e *env) reofferMCP(b *bot, agent string, windowID int64, messageKey string, now time.Time) store.MCPOfferInput {
	e.t.Helper()
	b.nextID++
	tok := sealing.NewSecret(fmt.Sprintf("mcp-session-token-%s-%d", b.key, b.nextID))
	opened, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{ReplyWindowID: windowID, Token: tok})
	if err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	in := store.MCPOfferInput{MessageKey: messageKey, AccountKey: b.key, Agent: agent, ReplyWindowID: windowID,
		SessionID: opened.Session.SessionID, Token: tok}
	if err := e.store.OfferToMCP(e.ctx, now, in); err != nil {
		e.t.Fatalf("offer: %v", err)
	}
	return in
}

func TestAnMCPOfferIsHeldByOneSessionUntilTheSessionEndsOrItsLeaseLapses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateMCPAgent(e.ctx, t0, "support", "alice"); err != nil {
		t.Fatal(err)
	}
	b := e.register()
	in := e.mcpOffered(b, "support", "hello")
	const lease = 30 * time.Second
	o, found, err := e.store.ClaimMCPOffer(e.ctx, t0, "support", "", "s1", lease)
	if err != nil || !found || o.MessageKey != in.MessageKey || o.Token.Reveal() != in.Token.Reveal() || o.ClaimedBy != "s1" || o.Offers != 1 {
		t.Fatalf("first claim: %+v %v %v", o, found, err)
	}
	// Another session (of the same agent) finds nothing while s1 holds it; another agent never does.
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(time.Second), "support", "", "s2", lease); found {
		t.Fatal("a held offer was claimed by a second session")
	}
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(time.Second), "other", "", "s9", lease); found {
		t.Fatal("another agent claimed the offer")
	}
	// Renewed, the claim outlives its first lease.
	if n, err := e.store.RenewMCPClaims(e.ctx, t0.Add(lease+20*time.Second), []string{"s1"}); err != nil || n != 1 {
		t.Fatalf("renew: %d %v", n, err)
	}
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(lease+time.Second), "support", "", "s2", lease); found {
		t.Fatal("a renewed claim was taken over")
	}
	// The session ends: the next wait takes the message.
	if n, err := e.store.ReleaseMCPClaims(e.ctx, "s1"); err != nil || n != 1 {
		t.Fatalf("release: %d %v", n, err)
	}
	if o, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(lease+2*time.Second), "support", b.key, "s2", lease); !found || o.ClaimedBy != "s2" || o.Taken != 2 {
		t.Fatalf("after the release: %+v %v", o, found)
	}
	// s2 dies without a release: its claim lapses after the lease.
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(2*lease+time.Second), "support", "", "s3", lease); found {
		t.Fatal("a claim was taken over before its lease lapsed")
	}
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0.Add(2*lease+3*time.Second), "support", "", "s3", lease); !found {
		t.Fatal("a lapsed claim was not offered again")
	}
}

func TestAReOfferGivesTheNewSessionAndKeepsOnlyALiveClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateMCPAgent(e.ctx, t0, "support", "alice"); err != nil {
		t.Fatal(err)
	}
	b := e.register()
	first := e.mcpOffered(b, "support", "hello")
	const lease = 30 * time.Second
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0, "support", "", "s1", lease); !found {
		t.Fatal("no claim")
	}
	second := e.reofferMCP(b, "support", first.ReplyWindowID, first.MessageKey, t0.Add(10*time.Second))
	o, found, err := e.store.GetMCPOffer(e.ctx, first.MessageKey)
	if err != nil || !found || o.ClaimedBy != "s1" || o.Offers != 2 || o.SessionID != second.SessionID || o.Token.Reveal() != second.Token.Reveal() {
		t.Fatalf("after a re-offer under a live claim: %+v %v %v", o, found, err)
	}
	// A re-offer after the claim lapsed drops it: the next wait takes the message.
	e.reofferMCP(b, "support", first.ReplyWindowID, first.MessageKey, t0.Add(lease+time.Second))
	if o, _, _ := e.store.GetMCPOffer(e.ctx, first.MessageKey); o.ClaimedBy != "" || o.Offers != 3 {
		t.Fatalf("after a re-offer over a lapsed claim: %+v", o)
	}
}

func TestAFinishedMessageIsNoLongerOfferedAndItsOfferIsSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateMCPAgent(e.ctx, t0, "support", "alice"); err != nil {
		t.Fatal(err)
	}
	b, c := e.register(), e.register()
	done := e.mcpOffered(b, "support", "finished soon")
	open := e.mcpOffered(c, "support", "still open")
	if _, err := e.store.FinishMessage(e.ctx, t0, done.MessageKey, vocab.MessageHandled, ""); err != nil {
		t.Fatal(err)
	}
	o, found, err := e.store.ClaimMCPOffer(e.ctx, t0, "support", "", "s1", time.Minute)
	if err != nil || !found || o.MessageKey != open.MessageKey {
		t.Fatalf("claim: %+v %v %v (want only the open message)", o, found, err)
	}
	if _, found, _ := e.store.ClaimMCPOffer(e.ctx, t0, "support", "", "s2", time.Minute); found {
		t.Fatal("a finished message was offered")
	}
	if n, err := e.store.DeleteSettledMCPOffers(e.ctx, t0); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, found, _ := e.store.GetMCPOffer(e.ctx, open.MessageKey); !found {
		t.Fatal("the sweep deleted an open offer")
	}
}
