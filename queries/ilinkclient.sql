-- name: InsertILinkClient :exec
INSERT INTO ilink_clients (client_name, token_hash, created_at, created_by, token_issued_at)
VALUES (sqlc.arg(client_name), sqlc.arg(token_hash), sqlc.arg(now), sqlc.arg(created_by), sqlc.arg(now));

-- name: ReissueILinkClientToken :execrows
-- A new token replaces the client's old one, and lifts a revocation (its bots' tokens
-- come back with it).
UPDATE ilink_clients SET token_hash = sqlc.arg(token_hash), token_issued_at = sqlc.arg(now),
    revoked_at = NULL, revoked_by = NULL
WHERE client_name = sqlc.arg(client_name);

-- name: RevokeILinkClient :execrows
UPDATE ilink_clients SET revoked_at = sqlc.arg(now), revoked_by = sqlc.arg(revoked_by)
WHERE client_name = sqlc.arg(client_name) AND revoked_at IS NULL;

-- name: GetILinkClient :one
SELECT client_name, created_at, created_by, token_issued_at, revoked_at, revoked_by
FROM ilink_clients WHERE client_name = $1;

-- name: ListILinkClients :many
-- Every iLink client with the number of bots routed to it and of its live logins; never a
-- token hash.
SELECT c.client_name, c.created_at, c.created_by, c.token_issued_at, c.revoked_at, c.revoked_by,
       (SELECT count(*) FROM account_routes r WHERE r.ilink_client = c.client_name)::bigint AS bots,
       (SELECT count(*) FROM ilink_client_bots b WHERE b.client_name = c.client_name AND b.revoked_at IS NULL)::bigint AS logins,
       (SELECT count(*) FROM ilink_client_offers o
        WHERE o.client_name = c.client_name
          AND o.seq > COALESCE((SELECT max(k.acked_seq) FROM ilink_client_cursors k WHERE k.client_name = c.client_name), 0))::bigint AS queued
FROM ilink_clients c
ORDER BY c.client_name;

-- name: ILinkCallerByClientToken :one
-- The client a client token authenticates (all its bots); revoked says it is refused.
SELECT client_name, (revoked_at IS NOT NULL)::boolean AS revoked FROM ilink_clients WHERE token_hash = $1;

-- name: ILinkCallerByBotToken :one
-- The bot a bot token authenticates, with its client; revoked says it is refused (the
-- bot's login was revoked, or its client was).
SELECT b.bot_id, b.client_name, b.account_key,
       (b.revoked_at IS NOT NULL OR c.revoked_at IS NOT NULL)::boolean AS revoked
FROM ilink_client_bots b JOIN ilink_clients c ON c.client_name = b.client_name
WHERE b.token_hash = $1;

-- name: UpsertILinkClientOffer :execrows
-- A hand-off to an iLink client: the message joins the client's queue with the next
-- number (taken under the client's row lock, so numbers follow commit order). A re-offer
-- to the same client keeps the message's number (a client past it has it) and takes the
-- new session; a re-offer to another client (the route changed) queues it there.
WITH n AS (
    UPDATE ilink_clients SET last_seq = last_seq + 1
    WHERE client_name = sqlc.arg(client_name)
    RETURNING last_seq
)
INSERT INTO ilink_client_offers AS o (
    message_key, client_name, seq, account_key, reply_window_id, session_id, key_generation, nonce,
    ciphertext, offered_at, offers
)
SELECT sqlc.arg(message_key), sqlc.arg(client_name), n.last_seq, sqlc.arg(account_key), sqlc.arg(reply_window_id),
       sqlc.arg(session_id), sqlc.arg(key_generation), sqlc.arg(nonce), sqlc.arg(ciphertext), sqlc.arg(now), 1
FROM n
ON CONFLICT (message_key) DO UPDATE SET
    seq = CASE WHEN o.client_name = EXCLUDED.client_name THEN o.seq ELSE EXCLUDED.seq END,
    client_name = EXCLUDED.client_name, account_key = EXCLUDED.account_key,
    reply_window_id = EXCLUDED.reply_window_id, session_id = EXCLUDED.session_id,
    key_generation = EXCLUDED.key_generation, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
    offered_at = EXCLUDED.offered_at, offers = o.offers + 1;

-- name: NotifyILinkClient :exec
-- Wakes the facade's long polls of the client (a hint: a poll also looks on its own).
SELECT pg_notify('ilink_client_offers', sqlc.arg(client_name)::text);

-- name: ListILinkClientOffers :many
-- The client's queue past a cursor (of one bot, or of all when account_key is ''), in
-- order.
SELECT * FROM ilink_client_offers
WHERE client_name = sqlc.arg(client_name)
  AND (sqlc.arg(account_key)::text = '' OR account_key = sqlc.arg(account_key)::text)
  AND seq > sqlc.arg(after_seq)
ORDER BY seq
LIMIT sqlc.arg(max_offers);

-- name: GetILinkClientOffer :one
SELECT * FROM ilink_client_offers WHERE message_key = $1;

-- name: LatestILinkClientOffer :one
-- The newest offer to a client of a conversation with one user (of one bot, or of any when
-- account_key is ''): what typing acts on.
SELECT o.* FROM ilink_client_offers o JOIN inbound_messages m ON m.message_key = o.message_key
WHERE o.client_name = sqlc.arg(client_name)
  AND (sqlc.arg(account_key)::text = '' OR o.account_key = sqlc.arg(account_key)::text)
  AND m.peer_id = sqlc.arg(peer_id)
ORDER BY o.seq DESC
LIMIT 1;

-- name: GetILinkClientCursor :one
SELECT acked_seq FROM ilink_client_cursors WHERE client_name = $1 AND bot_id = $2;

-- name: AckILinkClientCursor :exec
-- The client's poll showed it holds everything up to acked_seq: the cursor only moves on.
INSERT INTO ilink_client_cursors AS k (client_name, bot_id, acked_seq, updated_at)
VALUES (sqlc.arg(client_name), sqlc.arg(bot_id), sqlc.arg(acked_seq), sqlc.arg(now))
ON CONFLICT (client_name, bot_id) DO UPDATE SET
    acked_seq = GREATEST(k.acked_seq, EXCLUDED.acked_seq), updated_at = EXCLUDED.updated_at
WHERE EXCLUDED.acked_seq > k.acked_seq;

-- name: DeleteAckedILinkClientOffers :execrows
-- Offers every cursor of their client has passed whose window closed: nobody polls or
-- answers them any more.
DELETE FROM ilink_client_offers o
USING reply_windows w
WHERE w.reply_window_id = o.reply_window_id AND (w.state <> 'open' OR w.expires_at <= sqlc.arg(now))
  AND o.seq <= (SELECT COALESCE(min(k.acked_seq), 0) FROM ilink_client_cursors k WHERE k.client_name = o.client_name);

-- name: InsertILinkClientLogin :exec
INSERT INTO ilink_client_logins (qrcode_hash, code, created_at, expires_at)
VALUES (sqlc.arg(qrcode_hash), sqlc.arg(code), sqlc.arg(now), sqlc.arg(expires_at));

-- name: GetILinkClientLogin :one
SELECT * FROM ilink_client_logins WHERE qrcode_hash = $1;

-- name: ScanILinkClientLogin :execrows
-- Someone opened the login's approval page: the client shows "scanned".
UPDATE ilink_client_logins SET scanned_at = COALESCE(scanned_at, sqlc.arg(now))
WHERE code = sqlc.arg(code) AND approved_at IS NULL AND expires_at > sqlc.arg(now);

-- name: ApproveILinkClientLogin :execrows
UPDATE ilink_client_logins SET approved_at = sqlc.arg(now), approved_by = sqlc.arg(approved_by),
    client_name = sqlc.arg(client_name), account_key = sqlc.arg(account_key),
    scanned_at = COALESCE(scanned_at, sqlc.arg(now))
WHERE code = sqlc.arg(code) AND approved_at IS NULL AND expires_at > sqlc.arg(now);

-- name: GetILinkClientLoginByCode :one
SELECT * FROM ilink_client_logins WHERE code = $1;

-- name: ListILinkClientLogins :many
-- The logins waiting for an operator: not approved, not expired.
SELECT code, created_at, expires_at, scanned_at FROM ilink_client_logins
WHERE approved_at IS NULL AND expires_at > sqlc.arg(now)
ORDER BY created_at;

-- name: CollectILinkClientLogin :execrows
-- The client collected its confirmation: the login is spent (a second collect finds it
-- collected and issues nothing).
UPDATE ilink_client_logins SET collected_at = sqlc.arg(now)
WHERE qrcode_hash = sqlc.arg(qrcode_hash) AND approved_at IS NOT NULL AND collected_at IS NULL;

-- name: InsertILinkClientBot :exec
INSERT INTO ilink_client_bots (bot_id, client_name, account_key, token_hash, created_at)
VALUES (sqlc.arg(bot_id), sqlc.arg(client_name), sqlc.arg(account_key), sqlc.arg(token_hash), sqlc.arg(now));

-- name: DeleteExpiredILinkClientLogins :execrows
DELETE FROM ilink_client_logins WHERE expires_at <= sqlc.arg(before);

-- name: InsertILinkClientUpload :exec
INSERT INTO ilink_client_uploads (upload_id, client_name, account_key, media_type, key_generation, nonce, ciphertext, created_at)
VALUES (sqlc.arg(upload_id), sqlc.arg(client_name), sqlc.arg(account_key), sqlc.arg(media_type), sqlc.arg(key_generation),
        sqlc.arg(nonce), sqlc.arg(ciphertext), sqlc.arg(now));

-- name: GetILinkClientUpload :one
SELECT * FROM ilink_client_uploads WHERE upload_id = $1;

-- name: DeleteOldILinkClientUploads :execrows
DELETE FROM ilink_client_uploads WHERE created_at <= sqlc.arg(before);
