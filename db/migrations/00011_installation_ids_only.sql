-- +goose Up
-- Every workflow id names the installation (docs/workflow-ids.md). The legacy_* columns of
-- 00005 recorded the windows and accounts of a database older than installation ids, whose
-- workflows would have kept ids without it; no release ever ran such workflows, and
-- nothing reads the columns any more.
ALTER TABLE installation DROP COLUMN legacy_windows_through, DROP COLUMN legacy_pollers;

-- +goose Down
ALTER TABLE installation
    ADD COLUMN legacy_windows_through bigint  NOT NULL DEFAULT 0 CHECK (legacy_windows_through >= 0),
    ADD COLUMN legacy_pollers         boolean NOT NULL DEFAULT false;
