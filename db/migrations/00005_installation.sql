-- +goose Up
-- The installation: the one row that names this database's ilinkflow installation. Its id
-- is part of the workflow ids the installation starts (docs/workflow-ids.md), so that two
-- installations (two databases) can share one Temporal namespace. The legacy_* columns
-- record what was there before installation ids, whose workflows keep their old ids:
-- reply windows with ids up to legacy_windows_through (the identity's last value at this
-- migration, so ids handed out to transactions still in flight count too), and whether
-- accounts existed, whose pollers may still run under their old ids. The row never changes.
CREATE TABLE installation (
    installation_id        text        PRIMARY KEY CHECK (installation_id ~ '^[0-9a-f]{12}$')
                                       DEFAULT left(replace(gen_random_uuid()::text, '-', ''), 12),
    legacy_windows_through bigint      NOT NULL DEFAULT 0 CHECK (legacy_windows_through >= 0),
    legacy_pollers         boolean     NOT NULL DEFAULT false,
    created_at             timestamptz NOT NULL DEFAULT now()
);

-- One row only.
CREATE UNIQUE INDEX installation_one_row ON installation ((true));

INSERT INTO installation (legacy_windows_through, legacy_pollers)
SELECT greatest(
           coalesce((SELECT max(reply_window_id) FROM reply_windows), 0),
           coalesce(pg_sequence_last_value(pg_get_serial_sequence('reply_windows', 'reply_window_id')::regclass), 0)),
       EXISTS (SELECT 1 FROM accounts);

-- +goose Down
DROP TABLE installation;
