-- +goose Up
-- The caller's idempotency key of a send (e.g. the Temporal update id): a retried
-- reservation with the same key finds its attempt instead of reserving twice.
ALTER TABLE send_attempts ADD COLUMN request_id text CHECK (octet_length(request_id) BETWEEN 1 AND 256);
CREATE UNIQUE INDEX send_attempts_request ON send_attempts (source_message_key, request_id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX send_attempts_request;
ALTER TABLE send_attempts DROP COLUMN request_id;
