-- name: GetInstallationID :one
-- The installation's id (db/migrations/00005_installation.sql): its one row never changes.
SELECT installation_id FROM installation;
