-- +goose NO TRANSACTION
-- +goose Up
-- The operator's console (the web UI's accounts table and a bot's conversations page)
-- reads, per bot, the messages received and the replies sent in the last 24 hours and a
-- bot's latest messages and send attempts, newest first. The store never deletes inbound
-- messages or send attempts, so without these indexes each of those reads scans the two
-- largest tables, and the accounts table reads them again at every refresh. With them a
-- bot's last day is one range of an index: the accounts table counts each bot's range
-- (a few hundred bots, a few hundred short scans) and the conversations page reads the
-- newest rows of one. created_at is never updated, so the indexes keep updates of a
-- message's or an attempt's status HOT.
--
-- Built concurrently, outside a transaction (NO TRANSACTION): writes to the two tables go
-- on while the indexes are built. A build waits for older transactions to end (those
-- writing to its table, then those with an older snapshot); the run's lock timeout bounds
-- each such wait and its statement timeout each build. A build that fails leaves no
-- invalid index (the run drops it) and the next run applies the migration again from its
-- first statement, where IF NOT EXISTS keeps an index already built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbound_messages_by_account_time ON inbound_messages (account_key, created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS send_attempts_by_account_time ON send_attempts (account_key, created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS send_attempts_by_account_time;
DROP INDEX CONCURRENTLY IF EXISTS inbound_messages_by_account_time;
