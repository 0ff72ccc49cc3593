-- name: InsertAgentSession :exec
INSERT INTO agent_sessions (
    session_id, token_hash, source_message_key, reply_window_id, account_key, peer_id, created_at, expires_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: CloseMessageSessions :execrows
UPDATE agent_sessions SET closed_at = sqlc.arg(now)::timestamptz
WHERE source_message_key = sqlc.arg(message_key) AND closed_at IS NULL;

-- name: SessionByID :batchone
-- A session by its id with its message's status; a batch query, so that it can travel
-- with the locks it is checked against.
SELECT sqlc.embed(agent_sessions), inbound.status AS message_status
FROM agent_sessions
JOIN inbound_messages AS inbound ON inbound.message_key = agent_sessions.source_message_key
WHERE agent_sessions.session_id = $1;

-- name: SessionByTokenHash :batchone
-- A session by its token's hash with its message's status; a batch query, so that it can
-- travel with the locks it is checked against.
SELECT sqlc.embed(agent_sessions), inbound.status AS message_status
FROM agent_sessions
JOIN inbound_messages AS inbound ON inbound.message_key = agent_sessions.source_message_key
WHERE agent_sessions.token_hash = $1;
