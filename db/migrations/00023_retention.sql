-- +goose NO TRANSACTION
-- +goose Up
-- Retention (the worker's Retention schedule, store.PurgeBatch, docs/operations.md): the
-- purge erases the content of old messages and later deletes their rows, a short batch at
-- a time, oldest first. Without these indexes each batch would scan the largest tables.
--
-- - inbound_messages_content_kept: the messages whose content is still stored, by age. A
--   batch reads the oldest of them, and erasing a message takes it out of the index, so
--   the scan starts at what is still due (the few messages of windows still open are the
--   only ones it steps over).
-- - inbound_messages_erased: the messages whose content is erased, by age: those whose
--   rows are deleted at the rows horizon.
-- - send_attempts_by_window, agent_sessions_by_window, held_replies_by_window: the rows
--   that hang off a window, deleted with it (the existing indexes on the window id are
--   partial: pending attempts, open sessions).
--
-- created_at is never updated and erased_at is set once, so status updates stay HOT. Built
-- concurrently, outside a transaction (NO TRANSACTION): writes go on while the indexes are
-- built; each build waits for older transactions within the run's lock timeout, and a
-- build that fails leaves no invalid index (the run drops it) and the next run applies
-- the migration again from its first statement, where IF NOT EXISTS keeps what is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbound_messages_content_kept ON inbound_messages (created_at) WHERE erased_at IS NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbound_messages_erased ON inbound_messages (created_at) WHERE erased_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS send_attempts_by_window ON send_attempts (reply_window_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS agent_sessions_by_window ON agent_sessions (reply_window_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS held_replies_by_window ON held_replies (reply_window_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS held_replies_by_window;
DROP INDEX CONCURRENTLY IF EXISTS agent_sessions_by_window;
DROP INDEX CONCURRENTLY IF EXISTS send_attempts_by_window;
DROP INDEX CONCURRENTLY IF EXISTS inbound_messages_erased;
DROP INDEX CONCURRENTLY IF EXISTS inbound_messages_content_kept;
