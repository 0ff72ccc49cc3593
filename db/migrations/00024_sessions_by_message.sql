-- +goose NO TRANSACTION
-- +goose Up
-- The agent sessions of a message, found by the message: the verdict closes them
-- (CloseMessageSessions, on every answered message), and every inbound message the
-- retention purge or a forget deletes has its foreign key checked against them. Without
-- this index both scan the whole table, a cost that grows with the months of data kept.
-- Built concurrently, outside a transaction, as migration 00023's indexes are (writes go
-- on; a failed build leaves no invalid index and the next run builds it again).
CREATE INDEX CONCURRENTLY IF NOT EXISTS agent_sessions_by_message ON agent_sessions (source_message_key);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS agent_sessions_by_message;
