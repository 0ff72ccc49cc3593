-- name: GetAccount :one
SELECT * FROM accounts WHERE account_key = $1;

-- name: LockAccount :batchone
-- A batch query: the store pipelines it with the statements that follow the lock.
SELECT * FROM accounts WHERE account_key = $1 FOR NO KEY UPDATE;

-- name: LockAccounts :many
-- LockAccount for several accounts in one statement, in the order of their keys (rows
-- are locked as the sorted scan returns them), so that two such batches cannot deadlock.
SELECT account_key FROM accounts
WHERE account_key = ANY(sqlc.arg(account_keys)::text[])
ORDER BY account_key
FOR NO KEY UPDATE;

-- name: ListAccounts :many
SELECT * FROM accounts ORDER BY created_at, account_key;

-- name: ListAccountsByStatus :many
SELECT * FROM accounts WHERE status = $1 ORDER BY created_at, account_key;

-- name: LiveAccountsOfOwner :many
SELECT * FROM accounts
WHERE owner_peer_id = $1 AND status IN ('active', 'paused')
ORDER BY account_key
FOR NO KEY UPDATE;

-- name: CountActiveAccounts :one
SELECT count(*) FROM accounts WHERE status = 'active';

-- name: InsertAccount :exec
INSERT INTO accounts (
    account_key, provider_account_id, owner_peer_id, base_url, generation, status,
    cursor, created_at, updated_at
) VALUES (sqlc.arg(account_key)::text, sqlc.arg(provider_account_id)::text, sqlc.arg(owner_peer_id)::text,
          sqlc.arg(base_url)::text, 1, 'active', '', sqlc.arg(created_at), sqlc.arg(created_at));

-- name: BumpAccountGeneration :execrows
UPDATE accounts
SET base_url = sqlc.arg(base_url)::text, generation = generation + 1, status = 'active', status_reason = '',
    pause_until = NULL, replaced_by = NULL, updated_at = sqlc.arg(now)
WHERE account_key = sqlc.arg(account_key) AND generation = sqlc.arg(generation);

-- name: SetAccountStatus :execrows
UPDATE accounts
SET status = sqlc.arg(status)::text, status_reason = sqlc.arg(reason), pause_until = sqlc.narg(pause_until),
    replaced_by = sqlc.narg(replaced_by), updated_at = sqlc.arg(now)
WHERE account_key = sqlc.arg(account_key) AND generation = sqlc.arg(generation);

-- name: UpsertAccountSecret :exec
INSERT INTO account_secrets (account_key, account_generation, key_generation, nonce, ciphertext, updated_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (account_key) DO UPDATE SET
    account_generation = excluded.account_generation,
    key_generation = excluded.key_generation,
    nonce = excluded.nonce,
    ciphertext = excluded.ciphertext,
    updated_at = excluded.updated_at;

-- name: GetAccountSecret :batchone
SELECT * FROM account_secrets WHERE account_key = $1;

-- name: CompareAndSetCursor :batchone
-- Moves the cursor of a page in flight: the cursor it was fetched with must still hold,
-- whatever the account's status or generation became meanwhile (a pause, a removal or a
-- rotation takes effect after the page is stored; a newer generation's poller that already
-- committed moved the cursor, which refuses the page). The rule is store.checkPollable's.
-- last_poll_at is on the database's clock, the clock ListPollAges reads its age on.
UPDATE accounts
SET cursor = sqlc.arg(next_cursor)::text, cursor_updated_at = sqlc.arg(now)::timestamptz, last_poll_at = clock_timestamp()
WHERE account_key = sqlc.arg(account_key) AND generation >= sqlc.arg(generation)
  AND cursor = sqlc.arg(expected_cursor)
RETURNING *;

-- name: RecordPoll :execrows
-- last_poll_at is on the database's clock, the clock ListPollAges reads its age on.
UPDATE accounts SET last_poll_at = clock_timestamp()
WHERE account_key = sqlc.arg(account_key) AND generation = sqlc.arg(generation) AND status = 'active';

-- name: ListPollAges :many
-- The seconds since each active account's last good poll, or its last change of state
-- (enrollment, rotation, resume) when later, so that an account just made active is not
-- stale at once. One clock: last_poll_at is written on the database's clock, and the age
-- is read on it after the statement's snapshot, so after every poll it sees was recorded.
-- updated_at is written on its caller's clock (a workflow's time, a worker's): it counts as
-- no later than the database's now, so a caller's clock ahead of the database's reads as a
-- fresh account (0), never as a negative age.
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT a.account_key, a.last_poll_at,
    extract(epoch FROM c.now - LEAST(GREATEST(a.last_poll_at, a.updated_at), c.now))::float8 AS seconds_since
FROM accounts a CROSS JOIN c
WHERE a.status = 'active'
ORDER BY a.account_key;

-- name: TouchLastSend :batchone
-- Records the start of a send on its bot (its pacing) and returns the account as the
-- start left it.
UPDATE accounts SET last_send_at = sqlc.arg(now)::timestamptz
WHERE account_key = sqlc.arg(account_key)
RETURNING *;

-- name: BlockSends :execrows
UPDATE accounts SET sends_blocked_until = sqlc.arg(until)::timestamptz, updated_at = sqlc.arg(now)
WHERE account_key = sqlc.arg(account_key);

-- name: LockAccountOfWindow :batchone
-- LockAccount for the account of a reply window, so that it travels in the round trip
-- that locks the window (the account first: the store's lock order).
SELECT accounts.* FROM accounts
WHERE accounts.account_key = (
    SELECT reply_windows.account_key FROM reply_windows WHERE reply_windows.reply_window_id = sqlc.arg(reply_window_id))
FOR NO KEY UPDATE OF accounts;
