-- +goose Up
-- Poll leases: which worker polls which bot. A lease is a row, not a session-level lock, so
-- polling a bot pins no database connection. The holder renews its leases (one statement
-- per worker) before expires_at; a lease past expires_at belongs to a dead or cut-off
-- worker and may be taken. (epoch, attempt) orders the poll activities of one bot: the
-- AccountPoller workflow gives each activity it schedules a larger epoch, and Temporal
-- numbers its retries. A newer activity that finds the lease held asks for it (wanted_*);
-- the holder sees that at its next renewal and lets go. Expiry is read on the database's
-- clock, the one clock every worker shares.
CREATE TABLE poll_leases (
    account_key     text        PRIMARY KEY REFERENCES accounts (account_key) ON DELETE CASCADE,
    holder          text        CHECK (octet_length(holder) BETWEEN 1 AND 200),
    epoch           bigint      NOT NULL,
    attempt         integer     NOT NULL,
    expires_at      timestamptz NOT NULL,
    wanted_epoch    bigint,
    wanted_attempt  integer,
    taken_at        timestamptz NOT NULL
);
CREATE INDEX poll_leases_holder ON poll_leases (holder) WHERE holder IS NOT NULL;

-- +goose Down
DROP TABLE poll_leases;
