package store

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// MCPTokenPrefix starts every MCP agent token, so that a leaked one is recognisable.
const MCPTokenPrefix = "ilkmcp_"

// mcpAgentName is the form of an MCP agent's name (the CHECK of mcp_agents).
var mcpAgentName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckMCPAgentName accepts 1 to 63 lower-case letters, digits, '.', '_' and '-',
// starting with a letter or a digit.
func CheckMCPAgentName(name string) error {
	if !mcpAgentName.MatchString(name) {
		return fail(vocab.CodeInvalidInput, "an MCP agent name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or a digit")
	}
	return nil
}

// MCPAgent is an MCP agent as an operator sees it: never its token or the token's hash.
type MCPAgent struct {
	Name          string
	CreatedAt     time.Time
	CreatedBy     string
	TokenIssuedAt time.Time
	// RevokedAt is set while the agent's token is revoked.
	RevokedAt *time.Time
	RevokedBy string
	// Bots counts the bots routed to the agent.
	Bots int64
}

// CreateMCPAgent adds an MCP agent and returns its token, which is shown once: only its
// hash is stored. A taken name is mcp_agent_exists.
func (s *Store) CreateMCPAgent(ctx context.Context, now time.Time, name, by string) (sealing.Secret, error) {
	return s.createHolder(ctx, mcpAgents, now, name, by)
}

// ReissueMCPAgentToken gives an MCP agent a new token, which replaces the old one at once
// (and lifts a revocation). An unknown agent is mcp_agent_not_found.
func (s *Store) ReissueMCPAgentToken(ctx context.Context, now time.Time, name string) (sealing.Secret, error) {
	return s.reissueHolder(ctx, mcpAgents, now, name)
}

// RevokeMCPAgent revokes an MCP agent's token: from now on it is refused. It reports
// whether the token was live (revoking a revoked agent changes nothing); an unknown agent
// is mcp_agent_not_found.
func (s *Store) RevokeMCPAgent(ctx context.Context, now time.Time, name, by string) (bool, error) {
	return s.revokeHolder(ctx, mcpAgents, now, name, by)
}

// ListMCPAgents lists the MCP agents by name, with the number of bots routed to each.
func (s *Store) ListMCPAgents(ctx context.Context) ([]MCPAgent, error) {
	var out []MCPAgent
	err := s.read(ctx, "list MCP agents", func(q *dbq.Queries) error {
		rows, err := q.ListMCPAgents(ctx)
		for _, r := range rows {
			a := MCPAgent{Name: r.AgentName, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, TokenIssuedAt: r.TokenIssuedAt,
				RevokedAt: r.RevokedAt, Bots: r.Bots}
			if r.RevokedBy != nil {
				a.RevokedBy = *r.RevokedBy
			}
			out = append(out, a)
		}
		return err
	})
	return out, err
}

// MCPAgentByToken resolves an MCP agent token to its agent's name; found is false for a
// token that is unknown or revoked. It writes nothing and never logs the token.
func (s *Store) MCPAgentByToken(ctx context.Context, token sealing.Secret) (name string, found bool, err error) {
	if n := len(token.Reveal()); n < 16 || n > 512 {
		return "", false, nil
	}
	err = s.read(ctx, "MCP agent by token", func(q *dbq.Queries) error {
		var err error
		name, err = q.MCPAgentByTokenHash(ctx, secretHash(token))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	return name, found, err
}

// MCPOfferInput is a message handed to an MCP agent, with the hand-off's session.
type MCPOfferInput struct {
	MessageKey    string
	AccountKey    string
	Agent         string
	ReplyWindowID int64
	SessionID     string
	// Token is the session's bearer token, stored sealed (purpose mcp_session, bound to
	// the message key): the MCP tools reply under it.
	Token sealing.Secret
}

// MCPOffer is a message in an MCP agent's inbox.
type MCPOffer struct {
	MessageKey    string
	AccountKey    string
	Agent         string
	ReplyWindowID int64
	SessionID     string
	// Token is the session's bearer token, opened.
	Token     sealing.Secret
	OfferedAt time.Time
	// Offers counts the hand-offs of the message to MCP (1 at the first).
	Offers int32
	// Taken counts the claims of the offer by sessions (1 at the first): more when a
	// session that took it ended, or its claim lapsed, before the message was finished.
	Taken int32
	// ClaimedBy is the MCP session that holds the offer ("" when none does), until
	// LeaseUntil.
	ClaimedBy  string
	LeaseUntil time.Time
}

// OfferToMCP puts a message in its MCP agent's inbox, or (a re-offer) gives its offer the
// new session. A re-offer keeps a claim whose lease still runs: the session that took the
// message is still answering it. An unknown agent is mcp_agent_not_found.
func (s *Store) OfferToMCP(ctx context.Context, now time.Time, in MCPOfferInput) error {
	if err := CheckMCPAgentName(in.Agent); err != nil {
		return err
	}
	o, err := s.offerSession(now, in.MessageKey, in.AccountKey, in.SessionID, in.Token, sealing.PurposeMCPSession)
	if err != nil {
		return err
	}
	return s.read(ctx, "offer to MCP", func(q *dbq.Queries) error {
		return q.UpsertMCPOffer(ctx, dbq.UpsertMCPOfferParams{MessageKey: in.MessageKey, AccountKey: in.AccountKey, AgentName: in.Agent,
			ReplyWindowID: in.ReplyWindowID, SessionID: o.session, KeyGeneration: o.sealed.KeyGeneration, Nonce: o.sealed.Nonce,
			Ciphertext: o.sealed.Ciphertext, Now: o.now})
	})
}

// ClaimMCPOffer claims for an MCP session the oldest answerable offer of an agent (of the
// bot accountKey, or of any of its bots when accountKey is ""), until now+lease. found is
// false when there is none. An offer is answerable while its message is processing and
// its window open; one that a live session holds is skipped.
func (s *Store) ClaimMCPOffer(ctx context.Context, now time.Time, agent, accountKey, session string, lease time.Duration) (o MCPOffer, found bool, err error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return MCPOffer{}, false, err
	}
	if err := CheckMCPAgentName(agent); err != nil {
		return MCPOffer{}, false, err
	}
	if err := validAccountFilter(accountKey); err != nil {
		return MCPOffer{}, false, err
	}
	if session == "" || len(session) > 200 || lease <= 0 {
		return MCPOffer{}, false, fail(vocab.CodeInvalidInput, "a claim needs a session of 1 to 200 bytes and a positive lease")
	}
	until := now.Add(lease)
	return s.readOffer(ctx, "claim MCP offer", func(q *dbq.Queries) (dbq.McpOffer, error) {
		return q.ClaimMCPOffer(ctx, dbq.ClaimMCPOfferParams{Session: &session, LeaseUntil: &until, AgentName: agent,
			AccountKey: accountKey, Now: now})
	})
}

// GetMCPOffer returns a message's MCP offer with its session token opened; found is false
// when the message was never offered to an MCP agent.
func (s *Store) GetMCPOffer(ctx context.Context, messageKey string) (o MCPOffer, found bool, err error) {
	if err := validMessageKey(messageKey); err != nil {
		return MCPOffer{}, false, err
	}
	return s.readOffer(ctx, "get MCP offer", func(q *dbq.Queries) (dbq.McpOffer, error) { return q.GetMCPOffer(ctx, messageKey) })
}

// readOffer runs a statement that returns one offer row, or none (found false), and opens
// the row's session token.
func (s *Store) readOffer(ctx context.Context, op string, stmt func(q *dbq.Queries) (dbq.McpOffer, error)) (MCPOffer, bool, error) {
	return readOptional(ctx, s, op, stmt, s.mcpOfferFrom)
}

func (s *Store) mcpOfferFrom(r dbq.McpOffer) (MCPOffer, error) {
	token, err := s.keys.Open(sealing.PurposeMCPSession, r.MessageKey,
		sealing.Sealed{KeyGeneration: r.KeyGeneration, Nonce: r.Nonce, Ciphertext: r.Ciphertext})
	if err != nil {
		return MCPOffer{}, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open MCP session token", Err: err}
	}
	o := MCPOffer{MessageKey: r.MessageKey, AccountKey: r.AccountKey, Agent: r.AgentName, ReplyWindowID: r.ReplyWindowID,
		SessionID: r.SessionID.String(), Token: token, OfferedAt: r.OfferedAt, Offers: r.Offers, Taken: r.Taken}
	if r.ClaimedBy != nil && r.LeaseUntil != nil {
		o.ClaimedBy, o.LeaseUntil = *r.ClaimedBy, *r.LeaseUntil
	}
	return o, nil
}

// RenewMCPClaims runs the claims of the given MCP sessions on until the given time.
func (s *Store) RenewMCPClaims(ctx context.Context, until time.Time, sessions []string) (int64, error) {
	if len(sessions) == 0 {
		return 0, nil
	}
	var n int64
	err := s.read(ctx, "renew MCP claims", func(q *dbq.Queries) (err error) {
		until := until.Truncate(time.Microsecond)
		n, err = q.RenewMCPClaims(ctx, &until, sessions)
		return err
	})
	return n, err
}

// ReleaseMCPClaims releases what an ended MCP session claimed, so that it is offered
// again.
func (s *Store) ReleaseMCPClaims(ctx context.Context, session string) (int64, error) {
	var n int64
	err := s.read(ctx, "release MCP claims", func(q *dbq.Queries) (err error) {
		n, err = q.ReleaseMCPClaims(ctx, &session)
		return err
	})
	return n, err
}

// DeleteSettledMCPOffers deletes the offers nobody can answer any more (their message
// finished, their window closed).
func (s *Store) DeleteSettledMCPOffers(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.read(ctx, "delete settled MCP offers", func(q *dbq.Queries) (err error) {
		n, err = q.DeleteSettledMCPOffers(ctx, now.Truncate(time.Microsecond))
		return err
	})
	return n, err
}
