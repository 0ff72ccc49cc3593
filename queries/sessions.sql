-- name: InsertAgentSession :batchexec
INSERT INTO agent_sessions (
    session_id, token_hash, source_message_key, reply_window_id, account_key, peer_id, created_at, expires_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: CloseMessageSessions :batchexec
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

-- name: WindowOffer :batchone
-- What an offer of a window's message reads beside the window's lock, in its round trip:
-- the window's account (not locked) and its source message, locked after the window (the
-- lock order: account, window, then what hangs off them).
SELECT sqlc.embed(accounts), sqlc.embed(inbound_messages)
FROM reply_windows
JOIN accounts ON accounts.account_key = reply_windows.account_key
JOIN inbound_messages ON inbound_messages.message_key = reply_windows.source_message_key
WHERE reply_windows.reply_window_id = $1
FOR NO KEY UPDATE OF inbound_messages;

-- name: WindowRoute :batchmany
-- The route of a window's account: no row on the default route.
SELECT account_routes.* FROM account_routes
JOIN reply_windows ON reply_windows.account_key = account_routes.account_key
WHERE reply_windows.reply_window_id = $1;
