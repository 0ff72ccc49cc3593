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
WHERE ilk_send_writes() -- nothing when a predicted send did not hold (migration 00009)
  AND (sqlc.arg(status)::text = 'failed'
       OR EXISTS (SELECT 1 FROM reply_windows AS reserved_window
                  WHERE reserved_window.reply_window_id = sqlc.arg(reply_window_id)
                    AND reserved_window.next_send_index = sqlc.arg(window_send_index)::integer + 1))
RETURNING *;

-- name: GetSendAttempt :one
SELECT * FROM send_attempts WHERE attempt_id = $1;

-- name: LockSendAttempt :batchone
SELECT * FROM send_attempts WHERE attempt_id = $1 FOR NO KEY UPDATE;

-- name: ListAttemptsOfMessage :many
SELECT * FROM send_attempts WHERE source_message_key = $1 ORDER BY send_index;

-- name: SetAttemptStatus :batchone
UPDATE send_attempts
SET status = sqlc.arg(status)::text, provider_message_id = sqlc.arg(provider_message_id),
    error_code = sqlc.arg(error_code), error_message = sqlc.arg(error_message),
    fail_type = sqlc.arg(fail_type)::text, updated_at = sqlc.arg(now)
WHERE attempt_id = sqlc.arg(attempt_id) AND status = sqlc.arg(from_status)
RETURNING *;

-- name: CompleteSendingAttempt :batchone
-- SetAttemptStatus for a sending attempt that moves on (store.CompleteSend), returning its
-- window too, so that a completion is one statement. Nothing when the attempt is not
-- sending.
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

-- name: CountAttemptsByStatus :many
SELECT status, count(*)::integer AS attempts FROM send_attempts
WHERE reply_window_id = $1 GROUP BY status ORDER BY status;

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

-- name: SendState :batchone
-- The state a send through a window and one of its sessions is decided on (store.ReserveAndStart,
-- migration 00009). Its version is the row versions (xmin) of the window, its account, the
-- session, the session's message and the two sealed secrets. Returned (version) is the
-- version the reservation under way leaves: the window (which every reservation writes)
-- and, when the send starts at once (touches_account), the account are the transaction's
-- own; read after the writes, that is the version they left. With expected set, read once
-- the account and the window are locked and before the writes, it also checks the state the
-- reservation was decided on: the version before the writes is the expected one, the
-- message's next send index is the expected one, no send to the peer is in flight and the
-- request id made no attempt yet; the verdict is recorded for ilk_send_writes() in the
-- transaction and returned (holds). Without expected, holds is true. Always one row: a
-- missing window has no version.
SELECT COALESCE(format('%s/%s/%s', tx.own, CASE WHEN sqlc.arg(touches_account)::boolean THEN tx.own::text
                                                   ELSE state.account_version END, state.others), '')::text AS version,
       set_config('ilinkflow.send_writes', CASE
           WHEN sqlc.narg(expected)::text IS NULL THEN 'predicted'
           WHEN format('%s/%s/%s', state.window_version, state.account_version, state.others) = sqlc.narg(expected)::text
                AND state.next_index = sqlc.arg(expected_next_index)::integer
                AND NOT state.peer_sending AND NOT state.requested THEN 'predicted'
           ELSE 'mispredicted' END, true) = 'predicted' AS holds
FROM (SELECT xid(pg_current_xact_id_if_assigned()) AS own) AS tx
LEFT JOIN LATERAL (
    SELECT w.xmin::text AS window_version,
           (SELECT account.xmin FROM accounts AS account WHERE account.account_key = w.account_key)::text AS account_version,
           format('%s/%s/%s/%s',
               (SELECT session.xmin FROM agent_sessions AS session
                WHERE session.session_id = sqlc.arg(session_id) AND session.reply_window_id = w.reply_window_id),
               (SELECT message.xmin FROM inbound_messages AS message WHERE message.message_key = w.source_message_key),
               (SELECT window_secret.xmin FROM reply_window_secrets AS window_secret
                WHERE window_secret.reply_window_id = w.reply_window_id),
               (SELECT account_secret.xmin FROM account_secrets AS account_secret
                WHERE account_secret.account_key = w.account_key)) AS others,
           (SELECT COALESCE(MAX(attempt.send_index) + 1, 0) FROM send_attempts AS attempt
            WHERE attempt.source_message_key = w.source_message_key) AS next_index,
           EXISTS (SELECT 1 FROM send_attempts AS sending
                   WHERE sending.account_key = w.account_key AND sending.peer_id = w.peer_id
                     AND sending.status = 'sending') AS peer_sending,
           EXISTS (SELECT 1 FROM send_attempts AS earlier
                   WHERE earlier.source_message_key = w.source_message_key
                     AND earlier.request_id = sqlc.narg(request_id)::text) AS requested
    FROM reply_windows AS w
    WHERE w.reply_window_id = sqlc.arg(reply_window_id) AND tx.own IS NOT NULL
) AS state ON true;
