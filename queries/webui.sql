-- The web front end's sessions and owner links (migration 00016). Times are the caller's.

-- name: InsertWebUISession :exec
INSERT INTO webui_sessions (id_hash, csrf, created_at, expires_at)
VALUES (sqlc.arg(id_hash), sqlc.arg(csrf), sqlc.arg(now), sqlc.arg(expires_at));

-- name: GetWebUISession :one
-- A live session's CSRF token, and whether it holds a message for its next page.
SELECT csrf, expires_at, (flash <> '')::boolean AS has_flash FROM webui_sessions
WHERE id_hash = sqlc.arg(id_hash) AND expires_at > sqlc.arg(now);

-- name: DeleteWebUISession :execrows
DELETE FROM webui_sessions WHERE id_hash = sqlc.arg(id_hash);

-- name: DeleteExpiredWebUIState :one
-- Forgets the sessions and owner links that expired before now.
WITH s AS (DELETE FROM webui_sessions WHERE webui_sessions.expires_at <= sqlc.arg(now) RETURNING 1),
     o AS (DELETE FROM webui_owner_links WHERE webui_owner_links.expires_at <= sqlc.arg(now) RETURNING 1)
SELECT ((SELECT count(*) FROM s) + (SELECT count(*) FROM o))::bigint AS forgotten;

-- name: SetWebUIFlash :execrows
UPDATE webui_sessions SET flash = sqlc.arg(flash), flash_kind = sqlc.arg(flash_kind)
WHERE id_hash = sqlc.arg(id_hash);

-- name: TakeWebUIFlash :one
-- Returns the session's message and clears it (both empty when there is none).
UPDATE webui_sessions AS w SET flash = '', flash_kind = ''
FROM (SELECT s.id_hash AS old_id, s.flash, s.flash_kind FROM webui_sessions s WHERE s.id_hash = sqlc.arg(id_hash) FOR UPDATE) AS old
WHERE w.id_hash = old.old_id
RETURNING old.flash, old.flash_kind;

-- name: InsertWebUIOwnerLink :exec
INSERT INTO webui_owner_links (id_hash, offer_id, created_at, expires_at)
VALUES (sqlc.arg(id_hash), sqlc.arg(offer_id), sqlc.arg(now), sqlc.arg(expires_at));

-- name: GetWebUIOwnerLink :one
-- The enrollment a live owner link opens.
SELECT offer_id, expires_at FROM webui_owner_links
WHERE id_hash = sqlc.arg(id_hash) AND expires_at > sqlc.arg(now);
