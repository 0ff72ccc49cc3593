-- name: InsertAgentSession :exec
INSERT INTO agent_sessions (
    session_id, token_hash, source_message_key, reply_window_id, account_key, peer_id, created_at, expires_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: CloseMessageSessions :execrows
UPDATE agent_sessions SET closed_at = sqlc.arg(now)::timestamptz
WHERE source_message_key = sqlc.arg(message_key) AND closed_at IS NULL;

-- name: CloseSession :execrows
UPDATE agent_sessions SET closed_at = sqlc.arg(now)::timestamptz
WHERE token_hash = sqlc.arg(token_hash) AND closed_at IS NULL;

-- name: LockSession :batchone
-- A session (by token hash or by id) with its message's status, its account and its
-- window, the account and then the window locked (the lock order everywhere: FOR ... OF
-- locks the rows in the order the tables are named).
SELECT sqlc.embed(agent_sessions), inbound.status AS message_status, sqlc.embed(accounts), sqlc.embed(reply_windows)
FROM agent_sessions
JOIN inbound_messages AS inbound ON inbound.message_key = agent_sessions.source_message_key
JOIN accounts ON accounts.account_key = agent_sessions.account_key
JOIN reply_windows ON reply_windows.reply_window_id = agent_sessions.reply_window_id
WHERE agent_sessions.token_hash = sqlc.narg(token_hash) OR agent_sessions.session_id = sqlc.narg(session_id)
FOR NO KEY UPDATE OF accounts, reply_windows;
