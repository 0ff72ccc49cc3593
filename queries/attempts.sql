-- name: InsertSendAttempt :batchone
-- Records an attempt. A pending or sending one is recorded only when its window's next
-- send index has just moved past it (the reservation before it in the transaction took
-- effect), so that a reservation that did not happen never leaves an attempt behind, even
-- when COMMIT travels in the same round trip; a refused (failed) one needs no reservation.
-- Values for the rule domains' columns are cast to the base type (migration 00007 says why).
INSERT INTO send_attempts (
    attempt_id, client_message_id, source_message_key, account_key, peer_id, reply_window_id,
    send_index, window_send_index, source, content_type, payload, metadata, fingerprint, status,
    error_code, error_message, fail_type, request_id, created_at, updated_at
)
SELECT
    sqlc.arg(attempt_id)::text, sqlc.arg(client_message_id), sqlc.arg(source_message_key), sqlc.arg(account_key),
    sqlc.arg(peer_id), sqlc.arg(reply_window_id), sqlc.arg(send_index)::integer, sqlc.arg(window_send_index)::integer,
    sqlc.arg(source)::text, sqlc.arg(content_type)::text, sqlc.arg(payload), sqlc.arg(metadata), sqlc.arg(fingerprint)::text,
    sqlc.arg(status)::text, sqlc.arg(error_code), sqlc.arg(error_message), sqlc.arg(fail_type)::text, sqlc.narg(request_id)::text,
    sqlc.arg(now), sqlc.arg(now)
WHERE (sqlc.arg(status)::text = 'failed'
       OR EXISTS (SELECT 1 FROM reply_windows AS reserved_window
                  WHERE reserved_window.reply_window_id = sqlc.arg(reply_window_id)
                    AND reserved_window.next_send_index = sqlc.arg(window_send_index)::integer + 1))
RETURNING *;

-- name: GetSendAttempt :one
SELECT * FROM send_attempts WHERE attempt_id = $1;

-- name: LockSendAttempt :batchone
SELECT * FROM send_attempts WHERE attempt_id = $1 FOR NO KEY UPDATE;

-- name: SetAttemptStatus :batchone
UPDATE send_attempts
SET status = sqlc.arg(status)::text, provider_message_id = sqlc.arg(provider_message_id),
    error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type)::text, updated_at = sqlc.arg(now)
WHERE attempt_id = sqlc.arg(attempt_id) AND status = sqlc.arg(from_status)
RETURNING *;

-- name: CompleteSendingAttempt :batchone
-- SetAttemptStatus for a sending attempt that moves on (store.CompleteSend), returning its
-- window too, so that a completion is one statement (a transaction of its own, unless a
-- transport failure gives the send back to the quota with it). Nothing when the attempt is
-- not sending.
UPDATE send_attempts AS attempt
SET status = sqlc.arg(status)::text, provider_message_id = sqlc.arg(provider_message_id),
    error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type)::text, updated_at = sqlc.arg(now)
FROM reply_windows AS w
WHERE attempt.attempt_id = sqlc.arg(attempt_id) AND attempt.status = 'sending'
  AND w.reply_window_id = attempt.reply_window_id
  -- The window by its key, so that it is one probe whatever the planner thinks of the
  -- table's size (joined, a small table was hashed for every completion).
  AND w.reply_window_id = (SELECT completed.reply_window_id FROM send_attempts AS completed WHERE completed.attempt_id = sqlc.arg(attempt_id))
RETURNING sqlc.embed(attempt), sqlc.embed(w);

-- name: FailPendingAttemptsOfWindow :execrows
UPDATE send_attempts
SET status = 'failed', error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type)::text, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND status = 'pending';

-- name: PendingAttemptCounts :many
SELECT reply_window_id, count(*)::integer AS pending, min(created_at)::timestamptz AS oldest
FROM send_attempts WHERE status = 'pending'
GROUP BY reply_window_id ORDER BY reply_window_id;

-- name: AttemptByRequest :batchone
SELECT * FROM send_attempts WHERE source_message_key = $1 AND request_id = $2;

-- name: AttemptByRequestOfWindow :batchone
-- AttemptByRequest for the message of a reply window, so that it travels in the round trip
-- that reads the window.
SELECT send_attempts.* FROM send_attempts
WHERE send_attempts.source_message_key = (
    SELECT reply_windows.source_message_key FROM reply_windows WHERE reply_windows.reply_window_id = sqlc.arg(reply_window_id))
  AND send_attempts.request_id = sqlc.arg(request_id);

-- name: SendContext :batchone
-- What reserving and starting a window's send reads besides its locks, in one statement
-- keyed by the window alone (its message, account and peer come from its row): the source
-- message's next send index, whether another send to the peer is in flight, the window's
-- sealed context token and the account's sealed bot token (NULL when absent).
SELECT
    (SELECT COALESCE(MAX(attempt.send_index) + 1, 0) FROM send_attempts AS attempt
     WHERE attempt.source_message_key = w.source_message_key)::integer AS next_index,
    EXISTS (SELECT 1 FROM send_attempts AS sending
            WHERE sending.account_key = w.account_key AND sending.peer_id = w.peer_id
              AND sending.status = 'sending') AS peer_sending,
    window_secret.key_generation AS window_key_generation, window_secret.nonce AS window_nonce,
    window_secret.ciphertext AS window_ciphertext,
    account_secret.account_generation AS account_generation, account_secret.key_generation AS account_key_generation,
    account_secret.nonce AS account_nonce, account_secret.ciphertext AS account_ciphertext
FROM reply_windows AS w
LEFT JOIN reply_window_secrets AS window_secret ON window_secret.reply_window_id = w.reply_window_id
LEFT JOIN account_secrets AS account_secret ON account_secret.account_key = w.account_key
WHERE w.reply_window_id = sqlc.arg(reply_window_id);

