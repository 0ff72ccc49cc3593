-- +goose Up
-- What a poll lease's activity was asked to poll (the account generation and whether it is
-- a one-round-trip probe), beside its task token: when the holder dies, a surviving worker
-- adopts the poll and goes on polling the bot under that same activity attempt, at once,
-- instead of failing it and waiting for Temporal to retry it (docs/poll-leases.md). A
-- lease taken by an older release carries none and is replaced as before.
ALTER TABLE poll_leases ADD COLUMN generation ilk_generation, ADD COLUMN probe boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE poll_leases DROP COLUMN probe, DROP COLUMN generation;
