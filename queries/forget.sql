-- Erasing a WeChat user's content (migration 00022, store.ForgetPeer). Every erasing
-- statement selects its rows once (target) and writes them only when dry_run is false, so
-- that a dry run counts exactly what a run erases. The rows are reached from the peer's
-- messages (their keys, a batch at a time): every row of a conversation hangs off the
-- message it answers, through indexes on the message key or the window id.

-- name: ForgetAccounts :many
-- The accounts (one, or every one when account_key is '') that hold the peer's messages or
-- whose owner the peer is (an iLink bot talks to its owner only).
SELECT a.account_key::text AS account_key
FROM accounts AS a
WHERE (sqlc.arg(account_key)::text = '' OR a.account_key = sqlc.arg(account_key)::text)
  AND (a.owner_peer_id = sqlc.arg(peer_id)::text
       OR EXISTS (SELECT 1 FROM inbound_messages AS m
                  WHERE m.account_key = a.account_key AND m.peer_id = sqlc.arg(peer_id)::text))
ORDER BY a.account_key;

-- name: ForgetMessageKeys :many
-- The keys of the peer's messages on an account, erased already or not, oldest first.
SELECT message_key::text AS message_key
FROM inbound_messages
WHERE account_key = sqlc.arg(account_key)::text AND peer_id = sqlc.arg(peer_id)::text
ORDER BY inbox_seq;

-- name: ForgetOpenWindow :many
-- The peer's open window on an account (at most one).
SELECT reply_window_id FROM reply_windows
WHERE account_key = sqlc.arg(account_key)::text AND peer_id = sqlc.arg(peer_id)::text AND state = 'open';

-- name: ForgetWindows :many
-- The windows of a batch of the peer's messages (one per message).
SELECT reply_window_id FROM reply_windows
WHERE source_message_key = ANY(sqlc.arg(message_keys)::text[])
ORDER BY reply_window_id;

-- name: ForgetHeldReplies :one
-- Held replies of the messages that still hold content (sealed text, or a fingerprint of
-- it): the content goes, and one still waiting (held, or being sent) is dropped, never to
-- be sent. The row stays as the audit record of the reply.
WITH target AS (
    SELECT h.held_id FROM held_replies AS h
    WHERE h.source_message_key = ANY(sqlc.arg(message_keys)::text[])
      AND (h.ciphertext IS NOT NULL OR h.fingerprint <> sqlc.arg(erased_fingerprint)::text)
), erased AS (
    UPDATE held_replies AS h
    SET status = CASE WHEN h.status = ANY(sqlc.arg(dropped_statuses)::text[]) THEN 'dropped' ELSE h.status END,
        drop_reason = CASE WHEN h.status = ANY(sqlc.arg(dropped_statuses)::text[]) THEN sqlc.arg(drop_reason)::text
                           ELSE h.drop_reason END,
        dropped_by = CASE WHEN h.status = ANY(sqlc.arg(dropped_statuses)::text[]) THEN sqlc.arg(dropped_by)::text
                          ELSE h.dropped_by END,
        key_generation = NULL, nonce = NULL, ciphertext = NULL, fingerprint = sqlc.arg(erased_fingerprint)::text,
        updated_at = sqlc.arg(now)
    FROM target
    WHERE h.held_id = target.held_id AND NOT sqlc.arg(dry_run)::boolean
    RETURNING h.held_id
)
SELECT count(*)::integer FROM target;

-- name: ForgetAttempts :one
-- Send attempts of the messages not erased yet: status, ids and counters stay; the
-- content, its metadata, the error message and the fingerprint go.
WITH target AS (
    SELECT s.attempt_id FROM send_attempts AS s
    WHERE s.source_message_key = ANY(sqlc.arg(message_keys)::text[]) AND s.erased_at IS NULL
), erased AS (
    UPDATE send_attempts AS s
    SET payload = 'null'::jsonb, metadata = '{}'::jsonb, error_message = '',
        fingerprint = sqlc.arg(erased_fingerprint)::text, erased_at = sqlc.arg(now)::timestamptz
    FROM target
    WHERE s.attempt_id = target.attempt_id AND NOT sqlc.arg(dry_run)::boolean
    RETURNING s.attempt_id
)
SELECT count(*)::integer FROM target;

-- name: ForgetImages :one
-- The sealed CDN locators of the messages' attachments.
WITH target AS (
    SELECT i.message_key, i.position FROM inbound_images AS i
    WHERE i.message_key = ANY(sqlc.arg(message_keys)::text[])
), erased AS (
    DELETE FROM inbound_images AS i
    USING target
    WHERE i.message_key = target.message_key AND i.position = target.position AND NOT sqlc.arg(dry_run)::boolean
    RETURNING i.message_key
)
SELECT count(*)::integer FROM target;

-- name: ForgetMCPOffers :one
-- The MCP inbox's offers of the messages (an erased message is offered to no agent).
WITH target AS (
    SELECT o.message_key FROM mcp_offers AS o
    WHERE o.message_key = ANY(sqlc.arg(message_keys)::text[])
), erased AS (
    DELETE FROM mcp_offers AS o
    USING target
    WHERE o.message_key = target.message_key AND NOT sqlc.arg(dry_run)::boolean
    RETURNING o.message_key
)
SELECT count(*)::integer FROM target;

-- name: ForgetContextTokens :one
-- The sealed context tokens of the windows.
WITH target AS (
    SELECT t.reply_window_id FROM reply_window_secrets AS t
    WHERE t.reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[])
), erased AS (
    DELETE FROM reply_window_secrets AS t
    USING target
    WHERE t.reply_window_id = target.reply_window_id AND NOT sqlc.arg(dry_run)::boolean
    RETURNING t.reply_window_id
)
SELECT count(*)::integer FROM target;

-- name: ForgetStagedMedia :one
-- The media replies staged in the windows (sealed bytes, and the CDN upload's key).
WITH target AS (
    SELECT m.media_id FROM outbound_media AS m
    WHERE m.reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[])
), erased AS (
    DELETE FROM outbound_media AS m
    USING target
    WHERE m.media_id = target.media_id AND NOT sqlc.arg(dry_run)::boolean
    RETURNING m.media_id
)
SELECT count(*)::integer FROM target;

-- name: ForgetSessions :one
-- The windows' agent sessions still open: closed, so no agent replies with them.
WITH target AS (
    SELECT a.session_id FROM agent_sessions AS a
    WHERE a.reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[]) AND a.closed_at IS NULL
), erased AS (
    UPDATE agent_sessions AS a
    SET closed_at = sqlc.arg(now)::timestamptz
    FROM target
    WHERE a.session_id = target.session_id AND NOT sqlc.arg(dry_run)::boolean
    RETURNING a.session_id
)
SELECT count(*)::integer FROM target;

-- name: ForgetMessages :one
-- The messages not erased yet: the payload and the failure reason go, erased_at says
-- when; key, account, peer, iLink id, status and times stay (the inbox deduplicates on
-- them). A message not settled yet (never handed out, handed out, or held) is settled as
-- failed: nothing will answer it, and an erased message is no backlog to merge.
WITH target AS (
    SELECT m.message_key FROM inbound_messages AS m
    WHERE m.message_key = ANY(sqlc.arg(message_keys)::text[]) AND m.erased_at IS NULL
), erased AS (
    UPDATE inbound_messages AS m
    SET payload = NULL, failure_reason = '', erased_at = sqlc.arg(now)::timestamptz,
        status = CASE WHEN m.status = ANY(sqlc.arg(settled_statuses)::text[]) THEN 'failed' ELSE m.status END
    FROM target
    WHERE m.message_key = target.message_key AND NOT sqlc.arg(dry_run)::boolean
    RETURNING m.message_key
)
SELECT count(*)::integer FROM target;

-- name: DeleteQuarantinedPages :execrows
DELETE FROM quarantined_pages WHERE quarantine_id = ANY(sqlc.arg(quarantine_ids)::text[]);

-- name: InsertForgetAudit :exec
INSERT INTO forget_audit (requested_at, completed_at, requested_by, account_key, counts)
-- completed_at is the database's clock when the erasure's last transaction writes it (the
-- store reads no clock of its own).
VALUES (sqlc.arg(requested_at), greatest(sqlc.arg(requested_at)::timestamptz, clock_timestamp()), sqlc.arg(requested_by),
        sqlc.narg(account_key), sqlc.arg(counts));

-- name: ForgetILinkClientOffers :one
-- The iLink clients' queue entries of the messages (an erased message is offered to no
-- client).
WITH target AS (
    SELECT o.message_key FROM ilink_client_offers AS o
    WHERE o.message_key = ANY(sqlc.arg(message_keys)::text[])
), erased AS (
    DELETE FROM ilink_client_offers AS o
    USING target
    WHERE o.message_key = target.message_key AND NOT sqlc.arg(dry_run)::boolean
    RETURNING o.message_key
)
SELECT count(*)::integer FROM target;
