-- name: InsertInboundMessage :one
INSERT INTO inbound_messages (
    message_key, account_key, peer_id, provider_message_id, sent_at, status, deferred, payload,
    created_at, updated_at
) VALUES (
    sqlc.arg(message_key), sqlc.arg(account_key), sqlc.arg(peer_id), sqlc.arg(provider_message_id),
    sqlc.arg(sent_at), 'received', sqlc.arg(deferred), sqlc.arg(payload), sqlc.arg(now), sqlc.arg(now)
)
ON CONFLICT DO NOTHING
RETURNING inbox_seq;

-- name: GetInboundMessage :one
SELECT * FROM inbound_messages WHERE message_key = $1;

-- name: LockInboundMessage :one
SELECT * FROM inbound_messages WHERE message_key = $1 FOR NO KEY UPDATE;

-- name: AbsorbMessages :execrows
UPDATE inbound_messages
SET status = 'absorbed', deferred = false, payload = NULL, updated_at = sqlc.arg(now)
WHERE message_key = ANY(sqlc.arg(message_keys)::text[]) AND status = 'received';

-- name: ReceivedBacklog :many
SELECT message_key, inbox_seq, payload FROM inbound_messages
WHERE account_key = sqlc.arg(account_key) AND peer_id = sqlc.arg(peer_id)
  AND status = 'received' AND inbox_seq < sqlc.arg(before_seq)
ORDER BY inbox_seq;

-- name: SetMessagePayload :execrows
UPDATE inbound_messages SET payload = sqlc.arg(payload), updated_at = sqlc.arg(now)
WHERE message_key = sqlc.arg(message_key) AND status = 'received';

-- name: SetMessageStatus :execrows
UPDATE inbound_messages
SET status = sqlc.arg(status), failure_reason = sqlc.arg(failure_reason), updated_at = sqlc.arg(now)
WHERE message_key = sqlc.arg(message_key) AND status = ANY(sqlc.arg(from_statuses)::text[]);

-- name: CountInboxByStatus :many
SELECT status, count(*) AS messages FROM inbound_messages
WHERE account_key = $1 GROUP BY status ORDER BY status;

-- name: InsertInboundImage :exec
INSERT INTO inbound_images (message_key, position, account_key, peer_id, key_generation, nonce, ciphertext, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: ImagesOfMessages :many
SELECT image.*, inbound.inbox_seq FROM inbound_images AS image
JOIN inbound_messages AS inbound USING (message_key)
WHERE image.message_key = ANY(sqlc.arg(message_keys)::text[])
ORDER BY CASE WHEN image.message_key = sqlc.arg(first_key) THEN 0 ELSE 1 END,
         inbound.inbox_seq DESC, image.position;

-- name: DeleteImagesOfMessages :execrows
DELETE FROM inbound_images WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: GetInboundImage :one
SELECT * FROM inbound_images WHERE message_key = $1 AND position = $2;
