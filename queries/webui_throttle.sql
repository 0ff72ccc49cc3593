-- The web console's login throttle (migration 00019), shared by every worker. Times are
-- the database's clock.

-- name: WebUILoginAttempt :one
-- Decides whether a login attempt from client_address is looked at now and, when it is
-- and its token was wrong, counts that token, in one statement:
--   * a remembered address (it sent a wrong token not long ago: forget_at) is looked at
--     while its own bucket and the ceiling's each hold a token;
--   * any other address is looked at while fewer than max_addresses are remembered or
--     the ceiling holds a token: an address that sent no wrong token is heard.
-- A wrong token that is looked at takes a token from its address's bucket (remembering a
-- clean address unless max_addresses are remembered) and from the ceiling's when that
-- holds one. Each take is made on the row's latest version under its row lock (the
-- address's first, then the ceiling's), so concurrent workers never lose a count, and for
-- a wrong token the answer is what those takes got: both, for a remembered address. Such
-- an attempt also deletes up to `sweep` forgotten addresses, without waiting for a row
-- another statement holds. A right token, and any attempt not looked at, writes nothing.
WITH p AS MATERIALIZED (
    SELECT clock_timestamp() AS now,
           sqlc.arg(client_address)::text AS addr,
           sqlc.arg(wrong)::boolean AS wrong,
           sqlc.arg(burst)::integer AS burst,
           sqlc.arg(every_us)::bigint * interval '1 microsecond' AS every,
           sqlc.arg(all_burst)::integer AS all_burst,
           sqlc.arg(all_every_us)::bigint * interval '1 microsecond' AS all_every
),
-- What the statement's snapshot says: the address's bucket when it is remembered (NULL:
-- a clean address), whether the ceiling holds a token, and, only when it decides
-- something, whether fewer than max_addresses are remembered.
s AS MATERIALIZED (
    SELECT p.*, a.full_at AS addr_full_at,
           (g.full_at IS NULL OR g.full_at <= p.now + (p.all_burst - 1) * p.all_every) AS all_ok
    FROM p
    LEFT JOIN webui_login_throttle a ON a.scope = 'address' AND a.client_address = p.addr AND a.forget_at > p.now
    LEFT JOIN webui_login_throttle g ON g.scope = 'all' AND g.client_address = ''
),
d AS MATERIALIZED (
    SELECT s.*,
        CASE WHEN s.addr_full_at IS NULL AND (s.wrong OR NOT s.all_ok) THEN
            (SELECT count(*) FROM (SELECT 1 FROM webui_login_throttle r
                WHERE r.scope = 'address' AND r.forget_at > s.now
                LIMIT sqlc.arg(max_addresses)::integer) n) < sqlc.arg(max_addresses)::integer
        END AS room
    FROM s
),
e AS MATERIALIZED (
    SELECT d.*,
        CASE WHEN d.addr_full_at IS NOT NULL THEN d.addr_full_at <= d.now + (d.burst - 1) * d.every AND d.all_ok
             ELSE d.all_ok OR d.room
        END AS allowed
    FROM d
),
-- The address's take: a new row, a forgotten row started afresh (its full_at is past), or
-- one more token of a remembered one while it has one.
addr_w AS (
    INSERT INTO webui_login_throttle AS t (scope, client_address, full_at, forget_at)
    SELECT 'address', e.addr, e.now + e.every, e.now + e.burst * e.every
    FROM e WHERE e.wrong AND e.allowed AND (e.addr_full_at IS NOT NULL OR e.room)
    ON CONFLICT (scope, client_address) DO UPDATE
    SET full_at = GREATEST(t.full_at + (SELECT every FROM p), excluded.full_at),
        forget_at = GREATEST(excluded.forget_at, t.full_at + (SELECT every FROM p))
    WHERE t.full_at <= (SELECT now + (burst - 1) * every FROM p)
    RETURNING t.full_at
),
-- The ceiling's take, after the address's: for a remembered or new address only when
-- that got its token, for an address not remembered (max_addresses reached) alone.
all_w AS (
    INSERT INTO webui_login_throttle AS t (scope, client_address, full_at)
    SELECT 'all', '', e.now + e.all_every
    FROM e WHERE e.wrong AND e.allowed
        AND (EXISTS (SELECT 1 FROM addr_w) OR (e.addr_full_at IS NULL AND NOT e.room))
    ON CONFLICT (scope, client_address) DO UPDATE
    SET full_at = GREATEST(t.full_at + (SELECT all_every FROM p), excluded.full_at)
    WHERE t.full_at <= (SELECT now + (all_burst - 1) * all_every FROM p)
    RETURNING t.full_at
),
-- Forgotten addresses, oldest first, a few per statement, after both takes (so that the
-- statement waits for no lock while it holds one of these).
sweep AS (
    DELETE FROM webui_login_throttle t
    USING (SELECT x.scope, x.client_address FROM webui_login_throttle x, e
           WHERE e.wrong AND e.allowed AND (SELECT count(*) FROM all_w) >= 0
             AND x.scope = 'address' AND x.forget_at <= e.now AND x.client_address <> e.addr
           ORDER BY x.forget_at
           LIMIT sqlc.arg(sweep)::integer
           FOR UPDATE OF x SKIP LOCKED) f
    WHERE t.scope = f.scope AND t.client_address = f.client_address
      AND t.forget_at <= (SELECT now FROM p)
    RETURNING 1
)
SELECT (CASE WHEN NOT (e.wrong AND e.allowed) THEN e.allowed
             WHEN e.addr_full_at IS NOT NULL THEN EXISTS (SELECT 1 FROM addr_w) AND EXISTS (SELECT 1 FROM all_w)
             WHEN e.room THEN EXISTS (SELECT 1 FROM addr_w)
             ELSE EXISTS (SELECT 1 FROM all_w)
        END)::boolean AS allowed,
       (SELECT count(*) FROM sweep)::bigint AS forgotten
FROM e;
