-- name: GetInstallation :one
-- The installation's one row (db/migrations/00005_installation.sql).
SELECT installation_id, legacy_windows_through, legacy_pollers FROM installation;
