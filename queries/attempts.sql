-- name: InsertSendAttempt :batchone
INSERT INTO send_attempts (
    attempt_id, client_message_id, source_message_key, account_key, peer_id, reply_window_id,
    send_index, window_send_index, source, content_type, payload, metadata, fingerprint, status,
    error_code, error_message, fail_type, request_id, created_at, updated_at
) VALUES (
    sqlc.arg(attempt_id), sqlc.arg(client_message_id), sqlc.arg(source_message_key), sqlc.arg(account_key),
    sqlc.arg(peer_id), sqlc.arg(reply_window_id), sqlc.arg(send_index), sqlc.arg(window_send_index),
    sqlc.arg(source), sqlc.arg(content_type), sqlc.arg(payload), sqlc.arg(metadata), sqlc.arg(fingerprint),
    sqlc.arg(status), sqlc.arg(error_code), sqlc.arg(error_message), sqlc.arg(fail_type), sqlc.narg(request_id),
    sqlc.arg(now), sqlc.arg(now)
)
RETURNING *;

-- name: GetSendAttempt :one
SELECT * FROM send_attempts WHERE attempt_id = $1;

-- name: LockSendAttempt :batchone
SELECT * FROM send_attempts WHERE attempt_id = $1 FOR NO KEY UPDATE;

-- name: ListAttemptsOfMessage :many
SELECT * FROM send_attempts WHERE source_message_key = $1 ORDER BY send_index;

-- name: SetAttemptStatus :batchone
UPDATE send_attempts
SET status = sqlc.arg(status), provider_message_id = sqlc.arg(provider_message_id),
    error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type), updated_at = sqlc.arg(now)
WHERE attempt_id = sqlc.arg(attempt_id) AND status = sqlc.arg(from_status)
RETURNING *;

-- name: FailPendingAttemptsOfWindow :execrows
UPDATE send_attempts
SET status = 'failed', error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type), updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND status = 'pending';

-- name: PendingAttemptCounts :many
SELECT reply_window_id, count(*)::integer AS pending, min(created_at)::timestamptz AS oldest
FROM send_attempts WHERE status = 'pending'
GROUP BY reply_window_id ORDER BY reply_window_id;

-- name: CountAttemptsByStatus :many
SELECT status, count(*)::integer AS attempts FROM send_attempts
WHERE reply_window_id = $1 GROUP BY status ORDER BY status;

-- name: AttemptByRequest :batchone
SELECT * FROM send_attempts WHERE source_message_key = $1 AND request_id = $2;

-- name: SendContext :batchone
-- What reserving and starting a send reads besides its locks, in one statement: the
-- source message's next send index, whether another send to the peer is in flight, the
-- window's sealed context token and the account's sealed bot token (NULL when absent).
SELECT
    (SELECT COALESCE(MAX(attempt.send_index) + 1, 0) FROM send_attempts AS attempt
     WHERE attempt.source_message_key = sqlc.arg(source_message_key))::integer AS next_index,
    EXISTS (SELECT 1 FROM send_attempts AS sending
            WHERE sending.account_key = sqlc.arg(account_key) AND sending.peer_id = sqlc.arg(peer_id)
              AND sending.status = 'sending') AS peer_sending,
    window_secret.key_generation AS window_key_generation, window_secret.nonce AS window_nonce,
    window_secret.ciphertext AS window_ciphertext,
    account_secret.account_generation AS account_generation, account_secret.key_generation AS account_key_generation,
    account_secret.nonce AS account_nonce, account_secret.ciphertext AS account_ciphertext
FROM (SELECT 1) AS one
LEFT JOIN reply_window_secrets AS window_secret ON window_secret.reply_window_id = sqlc.arg(reply_window_id)
LEFT JOIN account_secrets AS account_secret ON account_secret.account_key = sqlc.arg(account_key);

-- name: ReserveSend :batchone
-- Reserves one send of a window and records its attempt, in one statement; with start
-- the send is started at once (transmitted instead of reserved, the attempt sending, the
-- bot's last send moved). The window's counters move only while it is open, at the
-- expected send index and within its quota; otherwise nothing is written and no row
-- comes back. The window's counters after the statement come back with the attempt.
WITH counted AS (
    UPDATE reply_windows
    SET next_send_index = next_send_index + 1,
        reserved = reserved + CASE WHEN sqlc.arg(start)::boolean THEN 0 ELSE 1 END,
        transmitted = transmitted + CASE WHEN sqlc.arg(start)::boolean THEN 1 ELSE 0 END,
        updated_at = sqlc.arg(now)
    WHERE reply_windows.reply_window_id = sqlc.arg(reply_window_id) AND reply_windows.state = 'open'
      AND reply_windows.next_send_index = sqlc.arg(window_send_index)
      AND reply_windows.reserved + reply_windows.transmitted < reply_windows.max_sends
    RETURNING reply_windows.reply_window_id, reply_windows.next_send_index, reply_windows.reserved,
              reply_windows.transmitted
), touched AS (
    UPDATE accounts SET last_send_at = sqlc.arg(now)::timestamptz
    WHERE accounts.account_key = sqlc.arg(account_key) AND sqlc.arg(start)::boolean AND EXISTS (SELECT 1 FROM counted)
), inserted AS (
    INSERT INTO send_attempts (
        attempt_id, client_message_id, source_message_key, account_key, peer_id, reply_window_id,
        send_index, window_send_index, source, content_type, payload, metadata, fingerprint, status,
        request_id, created_at, updated_at
    )
    SELECT sqlc.arg(attempt_id), sqlc.arg(client_message_id), sqlc.arg(source_message_key), sqlc.arg(account_key),
           sqlc.arg(peer_id), counted.reply_window_id, sqlc.arg(send_index), sqlc.arg(window_send_index),
           sqlc.arg(source), sqlc.arg(content_type), sqlc.arg(payload), sqlc.arg(metadata), sqlc.arg(fingerprint),
           CASE WHEN sqlc.arg(start)::boolean THEN 'sending' ELSE 'pending' END, sqlc.narg(request_id),
           sqlc.arg(now), sqlc.arg(now)
    FROM counted
    RETURNING *
)
SELECT inserted.*, counted.next_send_index AS window_next_send_index, counted.reserved AS window_reserved,
       counted.transmitted AS window_transmitted
FROM inserted, counted;

-- name: StartAttempt :batchone
-- Starts a pending attempt: sending, its reservation transmitted, the bot's last send
-- moved, in one statement. No row: the attempt was not pending or the window held no
-- reservation (nothing is written).
WITH counted AS (
    UPDATE reply_windows
    SET reserved = reserved - 1, transmitted = transmitted + 1, updated_at = sqlc.arg(now)
    WHERE reply_windows.reply_window_id = sqlc.arg(reply_window_id) AND reply_windows.state = 'open'
      AND reply_windows.reserved > 0
      AND EXISTS (SELECT 1 FROM send_attempts AS pending
                  WHERE pending.attempt_id = sqlc.arg(attempt_id) AND pending.status = 'pending'
                    AND pending.reply_window_id = sqlc.arg(reply_window_id))
    RETURNING reply_windows.reply_window_id, reply_windows.reserved, reply_windows.transmitted
), touched AS (
    UPDATE accounts SET last_send_at = sqlc.arg(now)::timestamptz
    WHERE accounts.account_key = sqlc.arg(account_key) AND EXISTS (SELECT 1 FROM counted)
), started AS (
    UPDATE send_attempts SET status = 'sending', updated_at = sqlc.arg(now)
    WHERE send_attempts.attempt_id = sqlc.arg(attempt_id) AND send_attempts.status = 'pending'
      AND EXISTS (SELECT 1 FROM counted)
    RETURNING *
)
SELECT started.*, counted.reserved AS window_reserved, counted.transmitted AS window_transmitted
FROM started, counted;

-- name: CompleteAttempt :batchone
-- Completes a sending attempt (sent, failed or unknown) in one statement; give_back
-- returns its send to the window's quota (a request that surely never left). It comes
-- back with the window's quota as the completion left it; no row when the attempt was
-- not sending.
WITH done AS (
    UPDATE send_attempts
    SET status = sqlc.arg(status), provider_message_id = sqlc.arg(provider_message_id),
        error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
        fail_type = sqlc.arg(fail_type), updated_at = sqlc.arg(now)
    WHERE send_attempts.attempt_id = sqlc.arg(attempt_id) AND send_attempts.status = 'sending'
    RETURNING *
), given_back AS (
    UPDATE reply_windows SET transmitted = transmitted - 1, updated_at = sqlc.arg(now)
    WHERE reply_windows.reply_window_id = (SELECT done.reply_window_id FROM done)
      AND sqlc.arg(give_back)::boolean AND reply_windows.transmitted > 0
    RETURNING reply_windows.reply_window_id, reply_windows.transmitted
)
SELECT done.*, win.state AS window_state, win.max_sends AS window_max_sends, win.reserved AS window_reserved,
       COALESCE(given_back.transmitted, win.transmitted)::integer AS window_transmitted
FROM done
JOIN reply_windows AS win ON win.reply_window_id = done.reply_window_id
LEFT JOIN given_back ON given_back.reply_window_id = done.reply_window_id;
