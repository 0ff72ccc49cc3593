-- +goose NO TRANSACTION
-- +goose Up
-- The caller's idempotency key of a send (e.g. the Temporal update id): a retried
-- reservation with the same key finds its attempt instead of reserving twice.
--
-- send_attempts grows with every reply, so its unique index is built concurrently, outside
-- a transaction (NO TRANSACTION): sends go on while it is built. Each statement has the
-- run's lock and statement timeouts; after a failure the migration is applied again from
-- its first statement, which IF NOT EXISTS makes safe (the run drops an invalid index a
-- failed build left).
ALTER TABLE send_attempts ADD COLUMN IF NOT EXISTS request_id text CHECK (octet_length(request_id) BETWEEN 1 AND 256);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS send_attempts_request ON send_attempts (source_message_key, request_id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS send_attempts_request;
ALTER TABLE send_attempts DROP COLUMN IF EXISTS request_id;
