-- name: InsertOutboundMedia :exec
INSERT INTO outbound_media (
    media_id, session_id, reply_window_id, kind, file_name, size, sha256,
    key_generation, nonce, ciphertext, created_at, expires_at
) VALUES (
    sqlc.arg(media_id), sqlc.arg(session_id), sqlc.arg(reply_window_id), sqlc.arg(kind), sqlc.arg(file_name),
    sqlc.arg(size)::bigint, sqlc.arg(sha256), sqlc.arg(key_generation)::integer, sqlc.arg(nonce), sqlc.arg(ciphertext),
    sqlc.arg(now)::timestamptz, sqlc.arg(now)::timestamptz + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
);

-- name: GetOutboundMedia :one
SELECT * FROM outbound_media WHERE media_id = $1;

-- name: RecordMediaUpload :execrows
-- Records an upload's sealed result once: a second upload of the same media never
-- replaces the first.
UPDATE outbound_media
SET upload_key_generation = sqlc.arg(key_generation)::integer, upload_nonce = sqlc.arg(nonce),
    upload_ciphertext = sqlc.arg(ciphertext), uploaded_at = sqlc.arg(now)::timestamptz
WHERE media_id = sqlc.arg(media_id) AND uploaded_at IS NULL;

-- name: DeleteExpiredOutboundMedia :execrows
DELETE FROM outbound_media WHERE expires_at <= sqlc.arg(now)::timestamptz;
