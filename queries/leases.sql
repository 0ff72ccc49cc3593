-- Poll leases (db/migrations/00004_poll_leases.sql). Times are the database's clock.

-- name: TakePollLease :one
-- Takes the bot's lease for (holder, epoch, attempt) when it is free or expired, stamped
-- with the holder's liveness key (NULL: none, the lease then moves only on expiry), the
-- poll activity attempt's task token and what it polls (generation, probe: so that a
-- survivor can adopt the poll should the holder die). No row: a live holder has it.
INSERT INTO poll_leases AS l (account_key, holder, epoch, attempt, expires_at, taken_at, holder_key, task_token,
                              generation, probe)
VALUES (sqlc.arg(account_key), sqlc.arg(holder)::text, sqlc.arg(epoch), sqlc.arg(attempt),
        clock_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond', clock_timestamp(),
        sqlc.narg(holder_key)::bigint, sqlc.narg(task_token)::bytea,
        sqlc.narg(generation)::integer, sqlc.arg(probe)::boolean)
ON CONFLICT (account_key) DO UPDATE
SET holder = excluded.holder, epoch = excluded.epoch, attempt = excluded.attempt,
    expires_at = excluded.expires_at, taken_at = excluded.taken_at,
    wanted_epoch = NULL, wanted_attempt = NULL,
    holder_key = excluded.holder_key, task_token = excluded.task_token, claimed_at = NULL, claimed_from = NULL,
    generation = excluded.generation, probe = excluded.probe
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
-- Frees the lease, free since now (claimed_at) with no worker to blame (claimed_from NULL):
-- should the bot's next poll go to a worker that does not take it up (a frozen one still
-- holds requests for work open at Temporal), RecheckClaimedPollLeases finds it.
UPDATE poll_leases SET holder = NULL, wanted_epoch = NULL, wanted_attempt = NULL, expires_at = clock_timestamp(),
    holder_key = NULL, task_token = NULL, claimed_at = clock_timestamp(), claimed_from = NULL
WHERE account_key = sqlc.arg(account_key) AND holder = sqlc.arg(holder)::text
  AND epoch = sqlc.arg(epoch) AND attempt = sqlc.arg(attempt);

-- name: AdoptDeadPollLeases :many
-- Adopts (for one worker among those running this at once) the leases of active accounts
-- whose holder died (no session holds its liveness key) or that expired more than grace_ms
-- ago (the holder is frozen or cut off: its process, should it come back, finds its lease
-- gone and leaves its attempt to the adopter), and whose poll can be adopted: the
-- lease names its activity attempt (task token) and what it polls (generation), no newer
-- poll asked for it, and the attempt's poll session (session_ms from when the lease was
-- taken, which is when the attempt started) has not ended more than overrun_ms ago (the
-- time a poll may run past its session, well within its start-to-close). The adopter
-- holds each lease from now on, under the same activity attempt, with its own liveness
-- key, and goes on polling the bot; remaining_ms is what is left of the session on the
-- database's clock (negative: the session is over, the poll ends after one long poll).
-- The live keys are one array tested against the row itself: a row another worker adopted
-- or claimed after this statement began is locked in its new version and its conditions
-- evaluated again on it (READ COMMITTED), which a NOT EXISTS anti-join is not (its new
-- holder's key would pass as dead: two workers adopted the same bots in a chaos run).
WITH live AS MATERIALIZED (SELECT coalesce(array_agg(k::bigint), '{}')::bigint[] AS keys FROM ilk_live_keys() AS k)
UPDATE poll_leases AS l SET holder = sqlc.arg(adopter)::text, holder_key = sqlc.narg(adopter_key)::bigint,
    expires_at = clock_timestamp() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond',
    claimed_at = NULL, claimed_from = NULL
FROM (
    SELECT pl.account_key, pl.holder AS dead_holder
    FROM poll_leases pl JOIN accounts a ON a.account_key = pl.account_key CROSS JOIN live
    WHERE pl.holder IS NOT NULL AND pl.holder <> sqlc.arg(adopter)::text
      AND a.status = 'active'
      AND ((pl.holder_key IS NOT NULL AND NOT (pl.holder_key = ANY (live.keys)))
           OR pl.expires_at < clock_timestamp() - sqlc.arg(grace_ms)::bigint * interval '1 millisecond')
      AND pl.task_token IS NOT NULL AND pl.generation IS NOT NULL AND pl.wanted_epoch IS NULL
      AND pl.taken_at + (sqlc.arg(session_ms)::bigint + sqlc.arg(overrun_ms)::bigint) * interval '1 millisecond' > clock_timestamp()
    ORDER BY pl.expires_at
    LIMIT sqlc.arg(max_leases)
    FOR UPDATE OF pl SKIP LOCKED
) AS dead
WHERE l.account_key = dead.account_key
RETURNING l.account_key, l.epoch, l.attempt, l.generation::integer AS generation, l.probe, l.task_token,
    dead.dead_holder::text AS dead_holder,
    (extract(epoch FROM l.taken_at + sqlc.arg(session_ms)::bigint * interval '1 millisecond' - clock_timestamp()) * 1000)::bigint AS remaining_ms;

-- name: ClaimDeadPollLeases :many
-- Claims (for one supervisor among the workers) the leases of active accounts whose
-- holder died: its liveness key is held by no session (holder_died), or the lease expired
-- more than grace ago (a holder frozen or cut off, or one without a liveness session). The
-- claimed leases are freed, and the caller has each dead poll activity replaced. A
-- supervisor never claims a lease of its own worker (claimer): that poll activity is
-- alive, and may hold a page it fetched before an outage and has not committed yet; a
-- replacement would fetch past that page. The live keys are an array, as for
-- AdoptDeadPollLeases. With a positive session_ms the claimer can adopt, and the leases
-- AdoptDeadPollLeases would take (with that session and overrun_ms) are left to adoption:
-- a death that lands between a supervisor's adoption and its claim is then adopted at the
-- next scan instead of turned into Temporal retries, which for a large worker take
-- seconds to dispatch.
WITH live AS MATERIALIZED (SELECT coalesce(array_agg(k::bigint), '{}')::bigint[] AS keys FROM ilk_live_keys() AS k)
UPDATE poll_leases AS l SET holder = NULL, wanted_epoch = NULL, wanted_attempt = NULL,
    holder_key = NULL, task_token = NULL, claimed_at = clock_timestamp(), claimed_from = dead.dead_holder
FROM (
    SELECT pl.account_key, pl.holder AS dead_holder, pl.task_token AS dead_token,
        (pl.holder_key IS NOT NULL AND NOT (pl.holder_key = ANY (live.keys)))::boolean AS holder_died
    FROM poll_leases pl JOIN accounts a ON a.account_key = pl.account_key CROSS JOIN live
    WHERE pl.holder IS NOT NULL AND pl.holder <> sqlc.arg(claimer)::text
      AND a.status = 'active'
      AND (pl.expires_at < clock_timestamp() - sqlc.arg(grace_ms)::bigint * interval '1 millisecond'
           OR (pl.holder_key IS NOT NULL AND NOT (pl.holder_key = ANY (live.keys))))
      AND NOT (sqlc.arg(session_ms)::bigint > 0
               AND pl.task_token IS NOT NULL AND pl.generation IS NOT NULL AND pl.wanted_epoch IS NULL
               AND pl.taken_at + (sqlc.arg(session_ms)::bigint + sqlc.arg(overrun_ms)::bigint) * interval '1 millisecond' > clock_timestamp())
    ORDER BY pl.expires_at
    LIMIT sqlc.arg(max_leases)
    FOR UPDATE OF pl SKIP LOCKED
) AS dead
WHERE l.account_key = dead.account_key
RETURNING l.account_key, l.epoch, l.attempt, dead.dead_holder::text AS holder, dead.dead_token AS task_token,
    dead.holder_died::boolean AS holder_died;

-- name: RecheckClaimedPollLeases :many
-- Leases of active accounts still free a while after their claim, hand-on or release (or
-- their last recheck): the retried or next poll went to a worker that did not take the
-- lease. A lease
-- claimed from a worker that still lives (a frozen one, which may be handed the retry of
-- its own poll) is due after after_ms; one claimed from a dead worker only after
-- after_dead_ms, since no dead worker is handed a retry and only a second death (of the
-- worker that picked the retry up) leaves it free: after a crash the whole burst of
-- retries takes seconds to start, and rechecking each of them every second would load
-- Temporal with a lookup per bot just then. Each is returned to one caller among the
-- workers running this at once, and not again for as long.
WITH live AS MATERIALIZED (SELECT k::bigint AS key FROM ilk_live_keys() AS k)
UPDATE poll_leases AS l SET claimed_at = clock_timestamp()
FROM (
    SELECT pl.account_key FROM poll_leases pl JOIN accounts a ON a.account_key = pl.account_key
    WHERE pl.holder IS NULL AND a.status = 'active'
      AND pl.claimed_at < clock_timestamp() - (CASE WHEN EXISTS (
              SELECT 1 FROM poll_workers w JOIN live ON live.key = w.liveness_key
              WHERE w.holder = pl.claimed_from)
          THEN sqlc.arg(after_ms)::bigint ELSE sqlc.arg(after_dead_ms)::bigint END) * interval '1 millisecond'
    ORDER BY pl.claimed_at
    LIMIT sqlc.arg(max_leases)
    FOR UPDATE OF pl SKIP LOCKED
) AS stuck
WHERE l.account_key = stuck.account_key
RETURNING l.account_key, l.claimed_from;

-- name: RegisterPollWorker :exec
-- Registers this worker process under its holder name with the liveness key its session
-- holds now (after a lost session: the new key, and alive again).
INSERT INTO poll_workers (holder, liveness_key, started_at)
VALUES (sqlc.arg(holder)::text, sqlc.arg(liveness_key)::bigint, clock_timestamp())
ON CONFLICT (holder) DO UPDATE SET liveness_key = excluded.liveness_key, dead_at = NULL;

-- name: MarkDeadPollWorkers :many
-- Marks dead the workers (other than claimer) whose liveness key no session holds; each is
-- returned to exactly one caller among the workers running this at once.
WITH live AS MATERIALIZED (SELECT k::bigint AS key FROM ilk_live_keys() AS k)
UPDATE poll_workers AS w SET dead_at = clock_timestamp()
WHERE w.dead_at IS NULL AND w.holder <> sqlc.arg(claimer)::text
  AND NOT EXISTS (SELECT 1 FROM live WHERE live.key = w.liveness_key)
RETURNING w.holder, w.dead_at;

-- name: ForgetDeadPollWorkers :execrows
-- Deletes the rows of workers dead for longer than keep_ms (their leases expired by then).
DELETE FROM poll_workers WHERE dead_at < clock_timestamp() - sqlc.arg(keep_ms)::bigint * interval '1 millisecond';

-- name: ListUnleasedAccounts :many
-- Active accounts whose poll lease is free (or was never taken): between two poll
-- activities, claimed or handed on and waiting for the retry to take it, or picked up by a
-- worker that died (or stopped) before it took the lease.
SELECT a.account_key FROM accounts a LEFT JOIN poll_leases l ON l.account_key = a.account_key
WHERE a.status = 'active' AND (l.account_key IS NULL OR l.holder IS NULL)
ORDER BY a.account_key
LIMIT sqlc.arg(max_accounts);

-- name: PollLoad :one
-- The polling load to share: the workers at work now (registered, their liveness key held
-- by a session, their supervisor seen within seen_ms: not a frozen one), the active
-- accounts, each of which one of them polls, and the leases a supervisor claimed that no
-- poll took yet (bots moving after a worker's death).
WITH live AS MATERIALIZED (SELECT k::bigint AS key FROM ilk_live_keys() AS k)
SELECT (SELECT count(*) FROM poll_workers AS w
        WHERE w.dead_at IS NULL AND EXISTS (SELECT 1 FROM live WHERE live.key = w.liveness_key)
          AND w.seen_at > clock_timestamp() - sqlc.arg(seen_ms)::bigint * interval '1 millisecond')::bigint AS workers,
       (SELECT count(*) FROM accounts AS a WHERE a.status = 'active')::bigint AS accounts,
       (SELECT count(*) FROM poll_leases AS l
        WHERE l.holder IS NULL AND l.claimed_at IS NOT NULL AND l.claimed_from IS NOT NULL)::bigint AS moving;

-- name: WorkersAtWork :many
-- The workers at work now: registered, their liveness key held by a session, their
-- supervisor seen within seen_ms (not a frozen one).
WITH live AS MATERIALIZED (SELECT k::bigint AS key FROM ilk_live_keys() AS k)
SELECT w.holder FROM poll_workers AS w
WHERE w.dead_at IS NULL AND EXISTS (SELECT 1 FROM live WHERE live.key = w.liveness_key)
  AND w.seen_at > clock_timestamp() - sqlc.arg(seen_ms)::bigint * interval '1 millisecond';

-- name: TouchPollWorker :exec
-- Records that this worker's supervisor ran now.
UPDATE poll_workers SET seen_at = clock_timestamp() WHERE holder = sqlc.arg(holder)::text;

-- name: HandOnPollLease :execrows
-- Frees a lease its poll hands on to even out the workers' load, marked as free since now
-- (claimed_at) with no worker to blame (claimed_from NULL): should the retry go to a worker
-- that does not take it up (a frozen one), the supervisors' recheck of claimed leases finds it.
UPDATE poll_leases SET holder = NULL, wanted_epoch = NULL, wanted_attempt = NULL, expires_at = clock_timestamp(),
    holder_key = NULL, task_token = NULL, claimed_at = clock_timestamp(), claimed_from = NULL
WHERE account_key = sqlc.arg(account_key) AND holder = sqlc.arg(holder)::text
  AND epoch = sqlc.arg(epoch) AND attempt = sqlc.arg(attempt);

-- name: AnyDeadPollWorker :one
-- Whether a registered worker (other than asker) is not marked dead yet although no session
-- holds its liveness key: a cheap look, between two scans, for a death to act on at once.
WITH live AS MATERIALIZED (SELECT k::bigint AS key FROM ilk_live_keys() AS k)
SELECT EXISTS (
    SELECT 1 FROM poll_workers AS w
    WHERE w.dead_at IS NULL AND w.holder <> sqlc.arg(asker)::text
      AND NOT EXISTS (SELECT 1 FROM live WHERE live.key = w.liveness_key))::boolean AS dead;

-- name: PollAttemptAdopted :one
-- Whether another worker than asker holds the bot's lease under the poll activity attempt
-- (epoch, attempt): it adopted the attempt, and ends it when its poll ends.
SELECT EXISTS (
    SELECT 1 FROM poll_leases
    WHERE account_key = sqlc.arg(account_key) AND holder IS NOT NULL AND holder <> sqlc.arg(asker)::text
      AND epoch = sqlc.arg(epoch) AND attempt = sqlc.arg(attempt) AND task_token IS NOT NULL)::boolean AS adopted;
