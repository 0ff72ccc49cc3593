-- name: InsertPageMessages :batchmany
-- A page's new messages in page order (so the inbox sequence follows it), the reply window
-- of each, and the sealed context token of the one window the page leaves open (if any),
-- in one statement. A provider sequence of -1 stands for none.
--
-- The page is read with its position (WITH ORDINALITY), and each message's inbox sequence
-- and its window's id are drawn from the columns' own identity sequences there, in page
-- order: a function scan WITH ORDINALITY is ordered by its position, so the planner needs
-- no sort, and the three inserts read the page as it is, without joining the messages
-- they stored back to it. (Letting the columns draw their values cost five sorts and a
-- merge join per page: a third of the statement for a one-message page.) The other
-- arrays are indexed by position. Indexing a text array walks it from its start, so that
-- part grows with the square of the page's size: at the store's limit of 1,000 messages
-- the statement took 15 % longer than with the sorts, while pages of up to 100 messages
-- (iLink's pages are a few) took 4-19 % less. ROWS FROM (unnest(...), ...) reads every
-- array in order, but it cost 23 % more for ten messages.
WITH entry AS (
    SELECT page.message_key, (sqlc.arg(provider_message_ids)::text[])[page.position] AS provider_message_id,
           (sqlc.arg(sent_ats)::timestamptz[])[page.position] AS sent_at,
           (sqlc.arg(statuses)::text[])[page.position] AS status,
           (sqlc.arg(deferreds)::boolean[])[page.position] AS deferred,
           (sqlc.arg(payloads)::text[])[page.position] AS payload,
           (sqlc.arg(provider_seqs)::bigint[])[page.position] AS provider_seq,
           (sqlc.arg(expires_ats)::timestamptz[])[page.position] AS expires_at,
           (sqlc.arg(window_states)::text[])[page.position] AS window_state,
           (sqlc.arg(retired_reasons)::text[])[page.position] AS retired_reason,
           nextval('inbound_messages_inbox_seq_seq') AS inbox_seq,
           nextval('reply_windows_reply_window_id_seq') AS reply_window_id
    FROM unnest(sqlc.arg(message_keys)::text[]) WITH ORDINALITY AS page(message_key, position)
    ORDER BY page.position
), message AS (
    INSERT INTO inbound_messages (
        message_key, inbox_seq, account_key, peer_id, provider_message_id, sent_at, status, deferred, payload,
        created_at, updated_at
    ) OVERRIDING SYSTEM VALUE
    SELECT entry.message_key, entry.inbox_seq, sqlc.arg(account_key), sqlc.arg(peer_id), entry.provider_message_id,
           entry.sent_at, entry.status, entry.deferred,
           CASE WHEN entry.status = 'absorbed' THEN NULL ELSE entry.payload::json END, sqlc.arg(now), sqlc.arg(now)
    FROM entry
), opened AS (
    INSERT INTO reply_windows (
        reply_window_id, account_key, peer_id, account_generation, source_message_key, source_inbox_seq,
        provider_message_id, provider_seq, issued_at, expires_at, max_sends, state, retired_reason,
        created_at, updated_at
    ) OVERRIDING SYSTEM VALUE
    SELECT entry.reply_window_id, sqlc.arg(account_key), sqlc.arg(peer_id), sqlc.arg(account_generation)::integer,
           entry.message_key, entry.inbox_seq, entry.provider_message_id, NULLIF(entry.provider_seq, -1), entry.sent_at,
           entry.expires_at, sqlc.arg(max_sends)::integer, entry.window_state, entry.retired_reason, sqlc.arg(now), sqlc.arg(now)
    FROM entry
), secret AS (
    INSERT INTO reply_window_secrets (reply_window_id, key_generation, nonce, ciphertext, updated_at)
    SELECT entry.reply_window_id, sqlc.arg(secret_key_generation)::integer, sqlc.arg(secret_nonce)::bytea,
           sqlc.arg(secret_ciphertext)::bytea, sqlc.arg(now)
    FROM entry WHERE entry.message_key = sqlc.arg(open_message_key)::text
)
SELECT entry.message_key::text AS source_message_key, entry.reply_window_id FROM entry;

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

-- name: LockInboundMessage :batchone
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
-- The conversation's messages no agent answered, oldest first (unanswered_messages,
-- migration 00008): should the page supersede the open window, its handed-out message
-- whose answer could no longer be sent goes with the next delivery instead of being lost
-- or falsely handled. Index lookups only: the conversation's history is never scanned.
SELECT message_key, inbox_seq, payload, status FROM unanswered_messages
WHERE account_key = sqlc.arg(account_key) AND peer_id = sqlc.arg(peer_id)
ORDER BY inbox_seq;

-- name: SetMessageStatus :batchmany
-- A batch query: a transaction that decides the status under its locks queues it with
-- its other writes. It returns the message it moved (none if its status was not one of
-- from_statuses).
UPDATE inbound_messages
SET status = sqlc.arg(status)::text, failure_reason = sqlc.arg(failure_reason), updated_at = sqlc.arg(now)
WHERE message_key = sqlc.arg(message_key) AND status = ANY(sqlc.arg(from_statuses)::text[])
RETURNING *;

-- name: InsertInboundImages :batchexec
-- The images of one message, by position.
INSERT INTO inbound_images (message_key, position, account_key, peer_id, key_generation, nonce, ciphertext, created_at)
SELECT sqlc.arg(message_key), unnest(sqlc.arg(positions)::integer[]), sqlc.arg(account_key), sqlc.arg(peer_id),
       unnest(sqlc.arg(key_generations)::integer[]), unnest(sqlc.arg(nonces)::bytea[]),
       unnest(sqlc.arg(ciphertexts)::bytea[]), sqlc.arg(now);

-- name: ReceivedBacklogImages :batchmany
-- The images of ReceivedBacklog's messages, newest first (vocab.MediaPositionBase: 500).
SELECT image.message_key, image.position, image.key_generation, image.nonce, image.ciphertext
FROM unanswered_messages AS backlog
JOIN inbound_images AS image ON image.message_key = backlog.message_key
WHERE backlog.account_key = sqlc.arg(account_key) AND backlog.peer_id = sqlc.arg(peer_id)
  AND image.position < 500 -- images only: a file, voice or video locator (500 and up) is never merged
ORDER BY backlog.inbox_seq DESC, image.position;

-- name: DeleteImagesOfMessages :batchexec
DELETE FROM inbound_images WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: GetInboundImage :one
SELECT * FROM inbound_images WHERE message_key = $1 AND position = $2;

-- name: QuarantinePage :exec
-- A page, or messages of a page, the store could not take as it is (migration 00010).
INSERT INTO quarantined_pages (
    quarantine_id, account_key, generation, messages, scope, error_code, error_message, cursor_moved,
    key_generation, nonce, ciphertext, created_at
) VALUES (
    sqlc.arg(quarantine_id), sqlc.arg(account_key), sqlc.arg(generation), sqlc.arg(messages), sqlc.arg(scope),
    sqlc.arg(error_code), sqlc.arg(error_message), sqlc.arg(cursor_moved), sqlc.arg(key_generation),
    sqlc.arg(nonce), sqlc.arg(ciphertext), sqlc.arg(now)
);

-- name: ListQuarantinedPages :many
SELECT quarantine_id, account_key, generation, messages, scope, error_code, error_message, cursor_moved, created_at
FROM quarantined_pages
WHERE (sqlc.arg(account_key)::text = '' OR account_key = sqlc.arg(account_key)::text)
ORDER BY created_at, quarantine_id;

-- name: GetQuarantinedPage :one
SELECT * FROM quarantined_pages WHERE quarantine_id = $1;

-- name: SettleUnansweredMessages :many
-- The one rule for the message a window leaves without a verdict when it expires or is
-- cancelled (a superseded window's message is the page commit's: it is absorbed into the
-- next delivery): a message handed to an agent (processing) whose reply iLink accepted is
-- handled (it was answered), one without is failed with the reason. A message never handed
-- out (received) stays the conversation's backlog, merged into the next delivery. One
-- whose answer is partly held is held until those replies are settled.
UPDATE inbound_messages AS m
SET status = CASE WHEN answered.held THEN 'held' WHEN answered.yes THEN 'handled' ELSE 'failed' END,
    failure_reason = CASE WHEN answered.held OR answered.yes THEN '' ELSE sqlc.arg(reason)::text END,
    updated_at = sqlc.arg(now)
FROM reply_windows AS w
CROSS JOIN LATERAL (
    SELECT EXISTS (SELECT 1 FROM send_attempts AS s
                   WHERE s.source_message_key = w.source_message_key AND s.status = 'sent') AS yes,
           EXISTS (SELECT 1 FROM held_replies AS h
                   WHERE h.source_message_key = w.source_message_key AND h.status IN ('held', 'sending')) AS held
) AS answered
WHERE w.reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[])
  AND m.message_key = w.source_message_key AND m.status = 'processing'
RETURNING m.message_key, m.status;
