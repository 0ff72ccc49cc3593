-- name: GetReplyWindow :one
SELECT * FROM reply_windows WHERE reply_window_id = $1;

-- name: LockReplyWindow :one
SELECT * FROM reply_windows WHERE reply_window_id = $1 FOR NO KEY UPDATE;

-- name: GetReplyWindowBySource :one
SELECT * FROM reply_windows WHERE source_message_key = $1;

-- name: LockOpenWindow :one
SELECT * FROM reply_windows
WHERE account_key = $1 AND peer_id = $2 AND state = 'open'
FOR NO KEY UPDATE;

-- name: OpenWindowIDsOfAccount :many
SELECT reply_window_id FROM reply_windows
WHERE account_key = $1 AND state = 'open'
ORDER BY reply_window_id
FOR NO KEY UPDATE;

-- name: ListReplyWindows :many
SELECT * FROM reply_windows
WHERE (sqlc.narg(account_key)::text IS NULL OR account_key = sqlc.narg(account_key))
  AND (sqlc.narg(state)::text IS NULL OR state = sqlc.narg(state))
ORDER BY reply_window_id DESC
LIMIT sqlc.arg(max_rows);

-- name: InsertReplyWindow :one
INSERT INTO reply_windows (
    account_key, peer_id, account_generation, source_message_key, source_inbox_seq,
    provider_message_id, provider_seq, issued_at, expires_at, max_sends, state, created_at, updated_at
) VALUES (
    sqlc.arg(account_key), sqlc.arg(peer_id), sqlc.arg(account_generation), sqlc.arg(source_message_key),
    sqlc.arg(source_inbox_seq), sqlc.arg(provider_message_id), sqlc.narg(provider_seq), sqlc.arg(issued_at),
    sqlc.arg(expires_at), sqlc.arg(max_sends), sqlc.arg(state), sqlc.arg(now), sqlc.arg(now)
)
RETURNING reply_window_id;

-- name: RetireReplyWindow :execrows
UPDATE reply_windows
SET state = sqlc.arg(state), retired_reason = sqlc.arg(reason), reserved = 0, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open';

-- name: ReserveWindowSend :execrows
UPDATE reply_windows
SET next_send_index = next_send_index + 1, reserved = reserved + 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open'
  AND next_send_index = sqlc.arg(expected_index)
  AND reserved + transmitted < max_sends;

-- name: ReserveStartedWindowSend :execrows
UPDATE reply_windows
SET next_send_index = next_send_index + 1, transmitted = transmitted + 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open'
  AND next_send_index = sqlc.arg(expected_index)
  AND reserved + transmitted < max_sends;

-- name: StartWindowSend :execrows
UPDATE reply_windows
SET reserved = reserved - 1, transmitted = transmitted + 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open' AND reserved > 0;

-- name: ReleaseWindowReservations :execrows
UPDATE reply_windows
SET reserved = reserved - sqlc.arg(released)::integer, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND reserved >= sqlc.arg(released)::integer;

-- name: InsertWindowSecret :exec
INSERT INTO reply_window_secrets (reply_window_id, key_generation, nonce, ciphertext, updated_at)
VALUES ($1, $2, $3, $4, $5);

-- name: GetWindowSecret :one
SELECT * FROM reply_window_secrets WHERE reply_window_id = $1;

-- name: DeleteWindowSecret :execrows
DELETE FROM reply_window_secrets WHERE reply_window_id = $1;

-- name: UnstartWindowSend :execrows
UPDATE reply_windows
SET transmitted = transmitted - 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND transmitted > 0;
