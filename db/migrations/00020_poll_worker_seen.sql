-- +goose Up
-- When each worker's lease supervisor last ran (every second): a frozen worker keeps its
-- liveness session, so only this tells that it does no work, and the workers do not count
-- it when they share the bots between them.
ALTER TABLE poll_workers ADD COLUMN seen_at timestamptz;

-- +goose Down
ALTER TABLE poll_workers DROP COLUMN seen_at;
