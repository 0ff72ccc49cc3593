-- name: GetReplyWindow :batchone
SELECT * FROM reply_windows WHERE reply_window_id = $1;

-- name: LockReplyWindow :batchone
SELECT * FROM reply_windows WHERE reply_window_id = $1 FOR NO KEY UPDATE;

-- name: LockOpenWindow :batchone
SELECT * FROM reply_windows
WHERE account_key = $1 AND peer_id = $2 AND state = 'open'
FOR NO KEY UPDATE;

-- name: OpenWindowIDsOfAccount :many
SELECT reply_window_id FROM reply_windows
WHERE account_key = $1 AND state = 'open'
ORDER BY reply_window_id
FOR NO KEY UPDATE;

-- name: ListReplyWindows :many
SELECT * FROM reply_windows
WHERE (sqlc.narg(account_key)::text IS NULL OR account_key = sqlc.narg(account_key))
  AND (sqlc.narg(state)::text IS NULL OR state = sqlc.narg(state))
ORDER BY reply_window_id DESC
LIMIT sqlc.arg(max_rows);

-- name: RetireWindows :batchmany
-- The one statement that takes windows out of the open state: their pending attempts
-- fail, their agent sessions close, their reservations drop to zero and their sealed
-- context tokens are deleted. Windows already retired are left alone. The ids go through
-- ARRAY(SELECT unnest(...)) for the reason PageKnownMessages' keys do. It returns the ids
-- of the windows it retired (a page commit, the hot caller, needs no more). The windows
-- are updated first and the rest follows the ids that update returned: selecting them
-- first, then updating them by a join with that selection, cost a hash aggregate and a
-- join per page.
WITH retired AS (
    UPDATE reply_windows
    SET state = sqlc.arg(state)::text, retired_reason = sqlc.arg(reason), reserved = 0, updated_at = sqlc.arg(now)
    WHERE reply_window_id = ANY(ARRAY(SELECT unnest(sqlc.arg(reply_window_ids)::bigint[]))) AND state = 'open'
    RETURNING reply_window_id
), failed AS (
    UPDATE send_attempts
    SET status = 'failed', error_code = sqlc.arg(reason), error_message = 'reply window retired before transmission',
        fail_type = 'retired', updated_at = sqlc.arg(now)
    WHERE reply_window_id IN (SELECT reply_window_id FROM retired) AND status = 'pending'
), closed AS (
    UPDATE agent_sessions SET closed_at = sqlc.arg(now)::timestamptz
    WHERE reply_window_id IN (SELECT reply_window_id FROM retired) AND closed_at IS NULL
), secret AS (
    DELETE FROM reply_window_secrets WHERE reply_window_id IN (SELECT reply_window_id FROM retired)
)
SELECT reply_window_id FROM retired;

-- name: ReserveWindowSend :batchone
UPDATE reply_windows
SET next_send_index = next_send_index + 1, reserved = reserved + 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open'
  AND next_send_index = sqlc.arg(expected_index)
  AND reserved + transmitted < max_sends
RETURNING *;

-- name: ReserveStartedWindowSend :batchone
-- Reserves a send of the window that starts at once: the window's counters move and its
-- bot's last send is recorded (its pacing), in one statement. It returns the window and
-- the account as the statement left them (the account as read, whose only change is its
-- last send, returned apart).
WITH owner AS (
    SELECT window_of.account_key FROM reply_windows AS window_of WHERE window_of.reply_window_id = sqlc.arg(reply_window_id)
), touched AS (
    UPDATE accounts SET last_send_at = sqlc.arg(now)::timestamptz
    WHERE accounts.account_key = (SELECT owner.account_key FROM owner)
    RETURNING accounts.account_key, accounts.last_send_at
)
UPDATE reply_windows AS w
SET next_send_index = w.next_send_index + 1, transmitted = w.transmitted + 1, updated_at = sqlc.arg(now)
FROM accounts, touched
WHERE w.reply_window_id = sqlc.arg(reply_window_id) AND w.state = 'open'
  AND w.next_send_index = sqlc.arg(expected_index)
  AND w.reserved + w.transmitted < w.max_sends
  AND accounts.account_key = w.account_key AND touched.account_key = w.account_key
  -- The account by its key, so that it is one probe whatever the planner thinks of the
  -- table's size (joined, the small accounts table was hashed for every send).
  AND accounts.account_key = (SELECT owner.account_key FROM owner)
RETURNING sqlc.embed(w), sqlc.embed(accounts), touched.last_send_at AS touched_last_send_at;

-- name: StartWindowSend :batchone
UPDATE reply_windows
SET reserved = reserved - 1, transmitted = transmitted + 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND state = 'open' AND reserved > 0
RETURNING *;

-- name: ReleaseWindowReservations :batchone
UPDATE reply_windows
SET reserved = reserved - sqlc.arg(released)::integer, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND reserved >= sqlc.arg(released)::integer
RETURNING *;

-- name: UnstartWindowSend :batchone
UPDATE reply_windows
SET transmitted = transmitted - 1, updated_at = sqlc.arg(now)
WHERE reply_window_id = sqlc.arg(reply_window_id) AND transmitted > 0
RETURNING *;

-- name: WindowOfAttempt :batchone
SELECT reply_windows.* FROM reply_windows
JOIN send_attempts USING (reply_window_id)
WHERE send_attempts.attempt_id = $1;

-- name: ListOpenWindows :many
-- The open windows with what a ReplyWindow workflow needs (with the bot's reminder and
-- the conversation's held replies still to send), newest first; of one account and opened
-- since a time when those are given.
SELECT reply_windows.reply_window_id, reply_windows.account_key, reply_windows.source_message_key,
       reply_windows.peer_id, reply_windows.expires_at, reply_windows.max_sends,
       (reply_windows.reserved + reply_windows.transmitted)::integer AS sends_used,
       inbound.deferred, inbound.status AS message_status, accounts.reminder_before_seconds,
       (SELECT count(*) FROM held_replies AS held
        WHERE held.account_key = reply_windows.account_key AND held.peer_id = reply_windows.peer_id
          AND held.status IN ('held', 'sending'))::integer AS held_waiting
FROM reply_windows
JOIN inbound_messages AS inbound ON inbound.message_key = reply_windows.source_message_key
JOIN accounts ON accounts.account_key = reply_windows.account_key
WHERE reply_windows.state = 'open'
  AND (sqlc.narg(account_key)::text IS NULL OR reply_windows.account_key = sqlc.narg(account_key))
  AND (sqlc.narg(created_since)::timestamptz IS NULL OR reply_windows.created_at >= sqlc.narg(created_since))
ORDER BY reply_windows.reply_window_id DESC
LIMIT sqlc.arg(max_rows);

-- name: SentCountsOfWindows :many
-- How many sends of each window iLink accepted (attempts sent); windows with none are absent.
SELECT reply_windows.reply_window_id, count(send_attempts.attempt_id)::integer AS sent
FROM reply_windows
JOIN send_attempts ON send_attempts.source_message_key = reply_windows.source_message_key
  AND send_attempts.reply_window_id = reply_windows.reply_window_id
  AND send_attempts.status = 'sent'
WHERE reply_windows.reply_window_id = ANY(sqlc.arg(window_ids)::bigint[])
GROUP BY reply_windows.reply_window_id;
