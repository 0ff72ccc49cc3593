-- name: InsertMCPAgent :exec
INSERT INTO mcp_agents (agent_name, token_hash, created_at, created_by, token_issued_at)
VALUES (sqlc.arg(agent_name), sqlc.arg(token_hash), sqlc.arg(now), sqlc.arg(created_by), sqlc.arg(now));

-- name: ReissueMCPAgentToken :execrows
-- A new token replaces the agent's old one, and lifts a revocation.
UPDATE mcp_agents SET token_hash = sqlc.arg(token_hash), token_issued_at = sqlc.arg(now),
    revoked_at = NULL, revoked_by = NULL
WHERE agent_name = sqlc.arg(agent_name);

-- name: RevokeMCPAgent :execrows
UPDATE mcp_agents SET revoked_at = sqlc.arg(now), revoked_by = sqlc.arg(revoked_by)
WHERE agent_name = sqlc.arg(agent_name) AND revoked_at IS NULL;

-- name: MCPAgentByTokenHash :one
-- The agent a token authenticates: none when the token is unknown or revoked.
SELECT agent_name FROM mcp_agents WHERE token_hash = $1 AND revoked_at IS NULL;

-- name: GetMCPAgent :one
SELECT agent_name, created_at, created_by, token_issued_at, revoked_at, revoked_by
FROM mcp_agents WHERE agent_name = $1;

-- name: ListMCPAgents :many
-- Every MCP agent with the number of bots routed to it; never a token hash.
SELECT a.agent_name, a.created_at, a.created_by, a.token_issued_at, a.revoked_at, a.revoked_by,
       (SELECT count(*) FROM account_routes r WHERE r.mcp_agent = a.agent_name)::bigint AS bots
FROM mcp_agents a
ORDER BY a.agent_name;

-- name: UpsertMCPOffer :exec
-- A hand-off to an MCP agent: the offer of the message with the hand-off's session. A
-- re-offer to the same agent keeps a claim whose lease still runs (the session that took
-- it is still answering); any other claim is dropped, so the next wait takes the offer.
INSERT INTO mcp_offers AS o (
    message_key, account_key, agent_name, reply_window_id, session_id, key_generation, nonce,
    ciphertext, offered_at, offers
) VALUES (
    sqlc.arg(message_key), sqlc.arg(account_key), sqlc.arg(agent_name), sqlc.arg(reply_window_id),
    sqlc.arg(session_id), sqlc.arg(key_generation), sqlc.arg(nonce), sqlc.arg(ciphertext), sqlc.arg(now), 1
)
ON CONFLICT (message_key) DO UPDATE SET
    account_key = EXCLUDED.account_key, agent_name = EXCLUDED.agent_name,
    reply_window_id = EXCLUDED.reply_window_id, session_id = EXCLUDED.session_id,
    key_generation = EXCLUDED.key_generation, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
    offered_at = EXCLUDED.offered_at, offers = o.offers + 1,
    claimed_by = CASE WHEN o.agent_name = EXCLUDED.agent_name AND o.lease_until > EXCLUDED.offered_at
                      THEN o.claimed_by END,
    lease_until = CASE WHEN o.agent_name = EXCLUDED.agent_name AND o.lease_until > EXCLUDED.offered_at
                       THEN o.lease_until END;

-- name: ClaimMCPOffer :one
-- The oldest offer of an agent (of one of its bots, or any when account_key is '') that is
-- still answerable (its message processing, its window open) and that no live session
-- holds, claimed for a session until lease_until.
UPDATE mcp_offers o SET claimed_by = sqlc.arg(session), lease_until = sqlc.arg(lease_until), taken = o.taken + 1
WHERE o.message_key = (
    SELECT c.message_key
    FROM mcp_offers c
    JOIN inbound_messages m ON m.message_key = c.message_key
    JOIN reply_windows w ON w.reply_window_id = c.reply_window_id
    WHERE c.agent_name = sqlc.arg(agent_name)
      AND (sqlc.arg(account_key)::text = '' OR c.account_key = sqlc.arg(account_key)::text)
      AND m.status = 'processing' AND w.state = 'open' AND w.expires_at > sqlc.arg(now)
      AND (c.claimed_by IS NULL OR c.lease_until <= sqlc.arg(now))
    ORDER BY c.offered_at, c.message_key
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
)
RETURNING o.*;

-- name: GetMCPOffer :one
SELECT * FROM mcp_offers WHERE message_key = $1;

-- name: RenewMCPClaims :execrows
-- The claims of the sessions that still live here run on.
UPDATE mcp_offers SET lease_until = sqlc.arg(lease_until)
WHERE claimed_by = ANY(sqlc.arg(sessions)::text[]);

-- name: ReleaseMCPClaims :execrows
-- A session ended: whatever it claimed and did not finish is offered again.
UPDATE mcp_offers SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = $1;

-- name: DeleteSettledMCPOffers :execrows
-- Offers nobody can answer any more: the message was finished, or its window closed.
DELETE FROM mcp_offers o
USING inbound_messages m, reply_windows w
WHERE m.message_key = o.message_key AND w.reply_window_id = o.reply_window_id
  AND (m.status <> 'processing' OR w.state <> 'open' OR w.expires_at <= sqlc.arg(now));
