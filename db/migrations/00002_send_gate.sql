-- +goose Up
-- Per-bot send gate: sends of one bot are paced (last_send_at) and a throttle circuit
-- breaker stops them until sends_blocked_until (docs/architecture.md#rejected-sends).
ALTER TABLE accounts ADD COLUMN last_send_at timestamptz;
ALTER TABLE accounts ADD COLUMN sends_blocked_until timestamptz;

-- +goose Down
ALTER TABLE accounts DROP COLUMN sends_blocked_until;
ALTER TABLE accounts DROP COLUMN last_send_at;
