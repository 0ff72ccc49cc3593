-- name: InsertPageMessages :batchmany
-- A page's new messages in page order (so the inbox sequence follows it), the reply window
-- of each, and the sealed context token of the one window the page leaves open (if any),
-- in one statement. A provider sequence of -1 stands for none.
WITH entry AS (
    SELECT unnest(sqlc.arg(message_keys)::text[]) AS message_key,
           generate_subscripts(sqlc.arg(message_keys)::text[], 1) AS ord,
           unnest(sqlc.arg(provider_message_ids)::text[]) AS provider_message_id,
           unnest(sqlc.arg(sent_ats)::timestamptz[]) AS sent_at,
           unnest(sqlc.arg(statuses)::text[]) AS status,
           unnest(sqlc.arg(deferreds)::boolean[]) AS deferred,
           unnest(sqlc.arg(payloads)::text[]) AS payload,
           unnest(sqlc.arg(provider_seqs)::bigint[]) AS provider_seq,
           unnest(sqlc.arg(expires_ats)::timestamptz[]) AS expires_at,
           unnest(sqlc.arg(window_states)::text[]) AS window_state,
           unnest(sqlc.arg(retired_reasons)::text[]) AS retired_reason
), message AS (
    INSERT INTO inbound_messages (
        message_key, account_key, peer_id, provider_message_id, sent_at, status, deferred, payload,
        created_at, updated_at
    )
    SELECT entry.message_key, sqlc.arg(account_key), sqlc.arg(peer_id), entry.provider_message_id, entry.sent_at,
           entry.status, entry.deferred, CASE WHEN entry.status = 'absorbed' THEN NULL ELSE entry.payload::jsonb END,
           sqlc.arg(now), sqlc.arg(now)
    FROM entry ORDER BY entry.ord
    RETURNING message_key, inbox_seq
), opened AS (
    INSERT INTO reply_windows (
        account_key, peer_id, account_generation, source_message_key, source_inbox_seq,
        provider_message_id, provider_seq, issued_at, expires_at, max_sends, state, retired_reason,
        created_at, updated_at
    )
    SELECT sqlc.arg(account_key), sqlc.arg(peer_id), sqlc.arg(account_generation)::integer, entry.message_key, message.inbox_seq,
           entry.provider_message_id, NULLIF(entry.provider_seq, -1), entry.sent_at, entry.expires_at,
           sqlc.arg(max_sends)::integer, entry.window_state, entry.retired_reason, sqlc.arg(now), sqlc.arg(now)
    FROM entry JOIN message USING (message_key) ORDER BY entry.ord
    RETURNING reply_window_id, source_message_key
), secret AS (
    INSERT INTO reply_window_secrets (reply_window_id, key_generation, nonce, ciphertext, updated_at)
    SELECT reply_window_id, sqlc.arg(secret_key_generation)::integer, sqlc.arg(secret_nonce)::bytea,
           sqlc.arg(secret_ciphertext)::bytea, sqlc.arg(now)
    FROM opened WHERE source_message_key = sqlc.arg(open_message_key)
)
SELECT source_message_key, reply_window_id FROM opened;

-- name: PageKnownMessages :batchmany
-- The page's messages already in the inbox, each with whether it owns a reply window: one
-- primary-key probe per key. OFFSET 0 keeps each probe a subquery of its own, planned as a
-- lookup of one key: planned as a join over a page the planner must guess at ten keys, a
-- scan of the whole inbox (and of every window, hashed) looked cheaper while the tables
-- were small, and that plan stayed cached as they grew (a page read every stored message).
-- The keys go through ARRAY(SELECT unnest(...)) so that the planner cannot count them: a
-- plan made for one key looked cheaper than the generic one, and the statement was planned
-- again on every page (TestHotPathStatementsBindBaseTypesAndKeepAGenericPlan).
SELECT inbound.message_key, inbound.account_key, inbound.peer_id, inbound.provider_message_id,
       EXISTS (SELECT 1 FROM reply_windows WHERE reply_windows.source_message_key = inbound.message_key OFFSET 0) AS windowed
FROM unnest(ARRAY(SELECT unnest(sqlc.arg(message_keys)::text[]))) AS page(message_key)
JOIN LATERAL (
    SELECT stored.message_key, stored.account_key, stored.peer_id, stored.provider_message_id
    FROM inbound_messages AS stored
    WHERE stored.message_key = page.message_key
    OFFSET 0
) AS inbound ON true;

-- name: GetInboundMessage :one
SELECT * FROM inbound_messages WHERE message_key = $1;

-- name: LockInboundMessage :one
SELECT * FROM inbound_messages WHERE message_key = $1 FOR NO KEY UPDATE;

-- name: AbsorbMessages :batchone
WITH absorbed AS (
    UPDATE inbound_messages
    SET status = 'absorbed', deferred = false, payload = NULL, updated_at = sqlc.arg(now)
    WHERE message_key = ANY(sqlc.arg(message_keys)::text[]) AND status IN ('received', 'processing')
    RETURNING 1
)
SELECT count(*) FROM absorbed;

-- name: ReceivedBacklog :batchmany
-- The conversation's messages no agent answered, oldest first: those not yet handed to an
-- agent, and the open window's message when it was handed out but no reply of it was
-- transmitted (should the page supersede that window, the agent's answer could no longer
-- be sent: the message goes with the next delivery instead of being lost or falsely
-- handled). Index lookups only, so the conversation's history is never scanned: the open
-- window (at most one per conversation) names its message, which is looked up by key (a
-- join there was planned as a scan of the inbox while it was small, and kept).
SELECT backlog.message_key, backlog.inbox_seq, backlog.payload, backlog.status FROM (
    SELECT received.message_key, received.inbox_seq, received.payload, received.status
    FROM inbound_messages AS received
    WHERE received.account_key = sqlc.arg(account_key) AND received.peer_id = sqlc.arg(peer_id)
      AND received.status = 'received'
    UNION ALL
    SELECT handed.message_key, handed.inbox_seq, handed.payload, handed.status
    FROM inbound_messages AS handed
    WHERE handed.message_key = (
        SELECT unanswered.source_message_key FROM reply_windows AS unanswered
        WHERE unanswered.account_key = sqlc.arg(account_key) AND unanswered.peer_id = sqlc.arg(peer_id)
          AND unanswered.state = 'open' AND unanswered.transmitted = 0
    ) AND handed.status = 'processing'
) AS backlog
ORDER BY backlog.inbox_seq;

-- name: SetMessageStatus :execrows
UPDATE inbound_messages
SET status = sqlc.arg(status)::text, failure_reason = sqlc.arg(failure_reason), updated_at = sqlc.arg(now)
WHERE message_key = sqlc.arg(message_key) AND status = ANY(sqlc.arg(from_statuses)::text[]);

-- name: CountInboxByStatus :many
SELECT status, count(*) AS messages FROM inbound_messages
WHERE account_key = $1 GROUP BY status ORDER BY status;

-- name: InsertInboundImages :batchexec
-- The images of one message, by position.
INSERT INTO inbound_images (message_key, position, account_key, peer_id, key_generation, nonce, ciphertext, created_at)
SELECT sqlc.arg(message_key), unnest(sqlc.arg(positions)::integer[]), sqlc.arg(account_key), sqlc.arg(peer_id),
       unnest(sqlc.arg(key_generations)::integer[]), unnest(sqlc.arg(nonces)::bytea[]),
       unnest(sqlc.arg(ciphertexts)::bytea[]), sqlc.arg(now);

-- name: ReceivedBacklogImages :batchmany
-- The images of ReceivedBacklog's messages, newest first (store.MediaPositionBase: 500).
SELECT image.message_key, image.position, image.key_generation, image.nonce, image.ciphertext
FROM inbound_images AS image
JOIN (
    SELECT received.message_key, received.inbox_seq
    FROM inbound_messages AS received
    WHERE received.account_key = sqlc.arg(account_key) AND received.peer_id = sqlc.arg(peer_id)
      AND received.status = 'received'
    UNION ALL
    SELECT handed.message_key, handed.inbox_seq
    FROM inbound_messages AS handed
    WHERE handed.message_key = (
        SELECT unanswered.source_message_key FROM reply_windows AS unanswered
        WHERE unanswered.account_key = sqlc.arg(account_key) AND unanswered.peer_id = sqlc.arg(peer_id)
          AND unanswered.state = 'open' AND unanswered.transmitted = 0
    ) AND handed.status = 'processing'
) AS backlog ON backlog.message_key = image.message_key
WHERE image.position < 500 -- images only: a file, voice or video locator (500 and up) is never merged
ORDER BY backlog.inbox_seq DESC, image.position;

-- name: DeleteImagesOfMessages :batchexec
DELETE FROM inbound_images WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: GetInboundImage :one
SELECT * FROM inbound_images WHERE message_key = $1 AND position = $2;
