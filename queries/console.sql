-- name: ConsoleAccountActivity :many
-- The console's queries (the web UI's accounts table and a bot's conversations page) only
-- read, and none reads a message's or a reply's text but ConsoleMessageText, which runs
-- when the operator asks to reveal one message.
-- Per account: the inbound messages it received and the replies it sent (attempts sent)
-- since a time, its open windows, and its last error since then: the newest send that
-- failed for a reason other than its window's lifecycle (rejected, throttled, stale token,
-- transport) or whose outcome is unknown, or the newest page quarantined. Each count is a
-- range of one account's index (migration 00017), so the cost follows the last day's
-- traffic, not the tables' size.
SELECT accounts.account_key::text AS account_key,
    (SELECT count(*) FROM inbound_messages AS received
     WHERE received.account_key = accounts.account_key
       AND received.created_at >= sqlc.arg(since)::timestamptz)::integer AS messages,
    (SELECT count(*) FROM send_attempts AS sent
     WHERE sent.account_key = accounts.account_key
       AND sent.created_at >= sqlc.arg(since)::timestamptz AND sent.status = 'sent')::integer AS replies,
    (SELECT count(*) FROM reply_windows AS open_window
     WHERE open_window.account_key = accounts.account_key AND open_window.state = 'open')::integer AS open_windows,
    coalesce(last_error.error_kind, '')::text AS error_kind,
    coalesce(last_error.error_code, '')::text AS error_code,
    -- error_kind '' (no error): error_at is the epoch.
    coalesce(last_error.error_at, 'epoch'::timestamptz)::timestamptz AS error_at
FROM accounts
LEFT JOIN LATERAL (
    SELECT errors.error_kind, errors.error_code, errors.error_at
    FROM (
        (SELECT CASE WHEN failed.status = 'unknown' THEN 'unknown' ELSE failed.fail_type::text END AS error_kind,
                failed.error_code::text AS error_code, failed.updated_at AS error_at
         FROM send_attempts AS failed
         WHERE failed.account_key = accounts.account_key
           AND failed.created_at >= sqlc.arg(since)::timestamptz
           AND (failed.status = 'unknown'
                OR (failed.status = 'failed' AND failed.fail_type IN ('rejected', 'throttled', 'stale_token', 'transport')))
         ORDER BY failed.created_at DESC
         LIMIT 1)
        UNION ALL
        (SELECT 'quarantined', quarantined.error_code::text, quarantined.created_at
         FROM quarantined_pages AS quarantined
         WHERE quarantined.account_key = accounts.account_key
           AND quarantined.created_at >= sqlc.arg(since)::timestamptz
         ORDER BY quarantined.created_at DESC
         LIMIT 1)
    ) AS errors
    ORDER BY errors.error_at DESC
    LIMIT 1
) AS last_error ON true
ORDER BY accounts.account_key;

-- name: ConsoleMessages :many
-- A bot's latest inbound messages, newest first, without their payload (their text).
SELECT message_key::text AS message_key, inbox_seq, peer_id, provider_message_id::text AS provider_message_id,
       sent_at, status::text AS status, deferred, failure_reason, created_at, updated_at
FROM inbound_messages
WHERE account_key = sqlc.arg(account_key)::text
ORDER BY created_at DESC, inbox_seq DESC
LIMIT sqlc.arg(max_rows);

-- name: ConsoleWindows :many
-- A bot's open windows and the windows of the given messages of it, newest first.
SELECT * FROM reply_windows
WHERE account_key = sqlc.arg(account_key)::text AND state = 'open'
UNION
SELECT * FROM reply_windows
WHERE account_key = sqlc.arg(account_key)::text AND source_message_key = ANY(sqlc.arg(message_keys)::text[])
ORDER BY reply_window_id DESC;

-- name: ConsoleAttempts :many
-- A bot's latest send attempts, newest first, without their content (their text).
SELECT attempt_id::text AS attempt_id, source_message_key::text AS source_message_key, peer_id, reply_window_id,
       send_index::integer AS send_index, source::text AS source, content_type::text AS content_type,
       status::text AS status, error_code, fail_type::text AS fail_type, created_at, updated_at
FROM send_attempts
WHERE account_key = sqlc.arg(account_key)::text
ORDER BY created_at DESC, attempt_id
LIMIT sqlc.arg(max_rows);

-- name: ConsoleMessageText :one
-- One message's payload (its text), when the message is the bot's: the console's one read
-- of a message's text, on the operator's request (audited by the caller). NULL: the
-- message was absorbed into a later one, which holds its text, or its content was erased
-- (erased_at set).
SELECT payload, erased_at FROM inbound_messages
WHERE account_key = sqlc.arg(account_key)::text AND message_key = sqlc.arg(message_key)::text;
