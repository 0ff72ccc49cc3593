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
-- Built in the migration's transaction: writes to the two tables wait while the indexes
-- are built (a few seconds per million rows); the migration's lock_timeout bounds the wait
-- for the lock.
CREATE INDEX inbound_messages_by_account_time ON inbound_messages (account_key, created_at);
CREATE INDEX send_attempts_by_account_time ON send_attempts (account_key, created_at);

-- +goose Down
DROP INDEX send_attempts_by_account_time;
DROP INDEX inbound_messages_by_account_time;
