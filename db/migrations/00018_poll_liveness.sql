-- +goose Up
-- Worker liveness (docs/poll-leases.md). A lease ttl is the only way to tell a dead
-- worker from a slow one when nothing else is observed; a worker's own PostgreSQL session
-- is observed: the server ends it within milliseconds of the process's death (its socket
-- closes). Each worker process keeps one session open with a transaction-scoped advisory
-- lock on a random 62-bit key (the liveness key), held for the life of the process, and
-- stamps the key on every lease it takes (poll_leases.holder_key). A lease whose key no
-- session holds in pg_locks belongs to a dead process (or one that lost its session,
-- which drops every lease taken under it): a peer claims it at once instead of after the
-- ttl. A lease without a key (taken while the worker had no liveness session, or by an
-- older release) moves after its ttl, as before.
--
-- task_token is the Temporal task token of the poll activity attempt holding the lease: a
-- peer that claims the lease fails exactly that attempt, so Temporal retries it at once on
-- a live worker (no workflow task, no history event). claimed_at marks a lease a peer
-- freed that way (claimed_from, the holder it was claimed from), until the next take: a
-- claimed lease still free a moment later means the
-- retry went to a worker that cannot take it (a frozen one still holds requests for work
-- open at Temporal), and it is failed again; a free lease that was not claimed was
-- released by its poll activity, and the next one may have died before it took it
-- (poll_workers below).
ALTER TABLE poll_leases ADD COLUMN holder_key bigint CHECK (holder_key > 0),
    ADD COLUMN task_token bytea CHECK (octet_length(task_token) <= 4096),
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN claimed_from text CHECK (octet_length(claimed_from) <= 200);

-- poll_workers: the worker processes that poll, one row each (holder = the lease holder
-- name, which is also the process's Temporal worker identity). A poll activity a worker
-- picked up and had not taken a lease for when it died leaves no lease to claim; the peer
-- that finds the worker's liveness key gone (dead_at, set by exactly one peer) looks for
-- the poll activities Temporal still counts as started by that identity and fails them.
-- Rows of dead workers are deleted once their leases would have expired anyway; a worker
-- deletes its own row when it stops.
CREATE TABLE poll_workers (
    holder        text        PRIMARY KEY CHECK (octet_length(holder) BETWEEN 1 AND 200),
    liveness_key  bigint      NOT NULL CHECK (liveness_key > 0),
    started_at    timestamptz NOT NULL,
    dead_at       timestamptz
);

-- The liveness keys some session of this database holds now: the advisory locks taken with
-- pg_advisory_xact_lock(key), whose high and low 32 bits pg_locks shows as classid and
-- objid (objsubid 1 for a bigint key).
-- +goose StatementBegin
CREATE FUNCTION ilk_live_keys() RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
    SELECT ((k.classid::bigint << 32) | k.objid::bigint)
    FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ilk_live_keys();
DROP TABLE poll_workers;
ALTER TABLE poll_leases DROP COLUMN claimed_from, DROP COLUMN claimed_at, DROP COLUMN task_token, DROP COLUMN holder_key;
