-- Poll leases (db/migrations/00004_poll_leases.sql). Times are the database's clock.

-- name: TakePollLease :one
-- Takes the bot's lease for (holder, epoch, attempt) when it is free or expired. No row: a
-- live holder has it.
INSERT INTO poll_leases AS l (account_key, holder, epoch, attempt, expires_at, taken_at)
VALUES (sqlc.arg(account_key), sqlc.arg(holder)::text, sqlc.arg(epoch), sqlc.arg(attempt),
        clock_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', clock_timestamp())
ON CONFLICT (account_key) DO UPDATE
SET holder = excluded.holder, epoch = excluded.epoch, attempt = excluded.attempt,
    expires_at = excluded.expires_at, taken_at = excluded.taken_at,
    wanted_epoch = NULL, wanted_attempt = NULL
WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp()
RETURNING l.account_key, l.expires_at;

-- name: WantPollLease :execrows
-- Asks a live holder of an older activity to let the lease go.
UPDATE poll_leases
SET wanted_epoch = sqlc.arg(epoch)::bigint, wanted_attempt = sqlc.arg(attempt)::integer
WHERE account_key = sqlc.arg(account_key) AND holder IS NOT NULL
  AND (epoch, attempt) < (sqlc.arg(epoch)::bigint, sqlc.arg(attempt)::integer)
  AND (wanted_epoch IS NULL OR (wanted_epoch, wanted_attempt) < (sqlc.arg(epoch)::bigint, sqlc.arg(attempt)::integer));

-- name: RenewPollLeases :many
-- Renews every lease the holder still has among account_keys; wanted reports that a newer
-- activity asked for it.
UPDATE poll_leases
SET expires_at = clock_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
WHERE holder = sqlc.arg(holder)::text AND account_key = ANY(sqlc.arg(account_keys)::text[])
RETURNING account_key, epoch, attempt, expires_at,
    (wanted_epoch IS NOT NULL AND (wanted_epoch, wanted_attempt) > (epoch, attempt))::boolean AS wanted;

-- name: ReleasePollLease :execrows
UPDATE poll_leases SET holder = NULL, wanted_epoch = NULL, wanted_attempt = NULL, expires_at = clock_timestamp()
WHERE account_key = sqlc.arg(account_key) AND holder = sqlc.arg(holder)::text
  AND epoch = sqlc.arg(epoch) AND attempt = sqlc.arg(attempt);

-- name: ClaimExpiredPollLeases :many
-- Claims (for one supervisor among the workers) the expired leases of active accounts:
-- their holder died or was cut off. The claimed leases are freed, and the caller tells each
-- bot's poller to start a new poll activity. A supervisor never claims a lease of its own
-- worker (claimer): that poll activity is alive, and may hold a page it fetched before an
-- outage and has not committed yet; a replacement would fetch past that page.
UPDATE poll_leases AS l SET holder = NULL, wanted_epoch = NULL, wanted_attempt = NULL
FROM (
    SELECT pl.account_key FROM poll_leases pl JOIN accounts a ON a.account_key = pl.account_key
    WHERE pl.holder IS NOT NULL AND pl.expires_at < clock_timestamp() - sqlc.arg(grace_ms)::bigint * interval '1 millisecond'
      AND pl.holder <> sqlc.arg(claimer)::text
      AND a.status = 'active'
    ORDER BY pl.expires_at
    LIMIT sqlc.arg(max_leases)
    FOR UPDATE OF pl SKIP LOCKED
) AS dead
WHERE l.account_key = dead.account_key
RETURNING l.account_key, l.epoch, l.attempt;

-- name: CountPollLeases :one
-- Leases held (by anyone, live) and expired-but-held: for metrics and tests.
SELECT count(*) FILTER (WHERE holder IS NOT NULL AND expires_at > clock_timestamp())::bigint AS live,
       count(*) FILTER (WHERE holder IS NOT NULL AND expires_at <= clock_timestamp())::bigint AS expired
FROM poll_leases;
