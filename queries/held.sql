-- Held replies (migration 00015): replies a window could no longer carry, kept in order
-- per conversation and sent first when the user's next message opens a new window.

-- name: InsertHeldReply :one
INSERT INTO held_replies (
    held_id, account_key, peer_id, source_message_key, reply_window_id, request_id, content_type, final,
    fingerprint, size_bytes, reason, status, key_generation, nonce, ciphertext, created_at, expires_at, updated_at
) VALUES (
    sqlc.arg(held_id), sqlc.arg(account_key), sqlc.arg(peer_id), sqlc.arg(source_message_key), sqlc.arg(reply_window_id),
    sqlc.arg(request_id), sqlc.arg(content_type), sqlc.arg(final), sqlc.arg(fingerprint), sqlc.arg(size_bytes),
    sqlc.arg(reason), 'held', sqlc.arg(key_generation), sqlc.arg(nonce), sqlc.arg(ciphertext),
    sqlc.arg(now), sqlc.arg(expires_at), sqlc.arg(now)
)
RETURNING *;

-- name: HeldReplyByRequest :one
SELECT * FROM held_replies WHERE source_message_key = $1 AND request_id = $2;

-- name: LockHeldReply :one
SELECT * FROM held_replies WHERE held_id = $1 FOR UPDATE;

-- name: ConversationHeldLoad :one
-- What a conversation holds still to send: the count and the bytes (the limits' measure).
SELECT count(*)::integer AS replies, coalesce(sum(size_bytes), 0)::bigint AS bytes
FROM held_replies
WHERE account_key = $1 AND peer_id = $2 AND status IN ('held', 'sending');

-- name: WaitingHeldReplies :many
-- A conversation's replies still to send, in order.
SELECT held_id, status, expires_at FROM held_replies
WHERE account_key = $1 AND peer_id = $2 AND status IN ('held', 'sending')
ORDER BY held_seq;

-- name: CountWaitingHeld :batchone
-- Whether a conversation has replies to send (the page commit reads it with the page).
SELECT count(*)::integer FROM held_replies
WHERE account_key = $1 AND peer_id = $2 AND status IN ('held', 'sending');

-- name: MarkHeldSending :one
UPDATE held_replies SET status = 'sending', attempt_id = sqlc.arg(attempt_id), updated_at = sqlc.arg(now)
WHERE held_id = sqlc.arg(held_id) AND status = 'held'
RETURNING *;

-- name: DropHeldReply :one
-- A held reply dropped (past its age limit, or by an operator) is never sent; its row
-- stays as the audit record, without its content.
UPDATE held_replies
SET status = 'dropped', drop_reason = sqlc.arg(drop_reason), dropped_by = sqlc.arg(dropped_by),
    key_generation = NULL, nonce = NULL, ciphertext = NULL, updated_at = sqlc.arg(now)
WHERE held_id = sqlc.arg(held_id) AND status = 'held'
RETURNING *;

-- name: ListHeldReplies :many
-- Held replies, newest first: an account's (or every account's when null), of the given
-- statuses (every status when empty).
SELECT held_id, held_seq, account_key, peer_id, source_message_key, reply_window_id, request_id, content_type,
       final, size_bytes, reason, status, attempt_id, drop_reason, dropped_by, created_at, expires_at, updated_at
FROM held_replies
WHERE (sqlc.narg(account_key)::text IS NULL OR account_key = sqlc.narg(account_key)::text)
  AND (cardinality(sqlc.arg(statuses)::text[]) = 0 OR status = ANY(sqlc.arg(statuses)::text[]))
ORDER BY held_seq DESC
LIMIT sqlc.arg(max_rows);

-- name: WaitingHeldCounts :many
-- Replies still to send, per account and conversation (the metrics and the accounts page).
SELECT account_key, peer_id, count(*)::integer AS replies, coalesce(sum(size_bytes), 0)::bigint AS bytes
FROM held_replies
WHERE status IN ('held', 'sending')
GROUP BY account_key, peer_id
ORDER BY account_key, peer_id;

-- name: MessageHasWaitingHeld :batchone
-- Whether some of a message's answer is held still to send.
SELECT EXISTS (SELECT 1 FROM held_replies WHERE source_message_key = $1 AND status IN ('held', 'sending'));

-- name: SetReminder :one
UPDATE accounts SET reminder_before_seconds = sqlc.narg(before_seconds), reminder_text = sqlc.narg(reminder_text),
    updated_at = sqlc.arg(now)
WHERE account_key = sqlc.arg(account_key)
RETURNING *;

-- name: ReminderAttempt :one
-- The reminder a window's message already has (one per message: never twice).
SELECT * FROM send_attempts WHERE source_message_key = $1 AND request_id = 'reminder';

-- name: RequestReminder :one
UPDATE reply_windows SET reminder_requested = true, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open'
RETURNING *;
