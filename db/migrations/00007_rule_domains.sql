-- +goose Up
-- Single-column rules as domains.
--
-- PostgreSQL reads every CHECK constraint of a table back from its stored text, plans it
-- and compiles it again for each statement that inserts into or updates the table,
-- whichever columns the statement sets: moving a window's counter re-checked the format of
-- the account key and every status list of the row, and re-parsing those rules was the
-- largest avoidable part of a send's CPU in PostgreSQL (docs/store-performance.md). A
-- domain's rule is parsed once per connection and checked only where a value is assigned
-- to a column of the domain, which is exactly when a single-column rule can break. The
-- rules are unchanged, and a violation is still SQLSTATE 23514 (the store reports it as
-- invalid input). Rules that tie columns together stay CHECK constraints of their table.
-- The hot tables are converted: those a page commit or a send writes. The queries cast a
-- value they assign to one of these columns to the base type: a parameter PostgreSQL infers
-- as a domain is parsed by the domain's input function, which looks the domain up again on
-- every call.
CREATE DOMAIN ilk_account_key AS text CHECK (VALUE ~ '^ilk_[0-9a-f]{32}$');
CREATE DOMAIN ilk_message_key AS text CHECK (VALUE ~ '^im_[0-9a-f]{32}$');
CREATE DOMAIN ilk_attempt_id AS text CHECK (VALUE ~ '^sa_[0-9a-f]{29}$');
CREATE DOMAIN ilk_sha256 AS text CHECK (VALUE ~ '^[0-9a-f]{64}$');
-- An identity iLink hands out (account, peer, message) or a caller's request id.
CREATE DOMAIN ilk_provider_text AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 256);
CREATE DOMAIN ilk_base_url AS text CHECK (VALUE ~ '^https?://');
CREATE DOMAIN ilk_cursor AS text CHECK (octet_length(VALUE) <= 262144);
CREATE DOMAIN ilk_generation AS integer CHECK (VALUE >= 1);
CREATE DOMAIN ilk_count AS integer CHECK (VALUE >= 0);
CREATE DOMAIN ilk_sequence AS bigint CHECK (VALUE >= 0);
CREATE DOMAIN ilk_max_sends AS integer CHECK (VALUE BETWEEN 1 AND 1000);
CREATE DOMAIN ilk_send_index AS integer CHECK (VALUE >= 0 AND VALUE < 1000);
CREATE DOMAIN ilk_account_status AS text
    CHECK (VALUE IN ('active', 'paused', 'needs_relogin', 'replaced', 'disabled'));
CREATE DOMAIN ilk_message_status AS text
    CHECK (VALUE IN ('received', 'processing', 'handled', 'failed', 'absorbed'));
CREATE DOMAIN ilk_window_state AS text CHECK (VALUE IN ('open', 'superseded', 'cancelled', 'expired'));
CREATE DOMAIN ilk_attempt_status AS text CHECK (VALUE IN ('pending', 'sending', 'sent', 'failed', 'unknown'));
CREATE DOMAIN ilk_fail_type AS text
    CHECK (VALUE IN ('', 'refused', 'released', 'retired', 'rejected', 'throttled', 'stale_token', 'transport'));
CREATE DOMAIN ilk_send_source AS text CHECK (VALUE IN ('agent', 'system'));
CREATE DOMAIN ilk_content_type AS text CHECK (VALUE IN ('text', 'image', 'file', 'video'));

ALTER TABLE accounts
    DROP CONSTRAINT accounts_account_key_check,
    DROP CONSTRAINT accounts_provider_account_id_check,
    DROP CONSTRAINT accounts_owner_peer_id_check,
    DROP CONSTRAINT accounts_base_url_check,
    DROP CONSTRAINT accounts_generation_check,
    DROP CONSTRAINT accounts_status_check,
    DROP CONSTRAINT accounts_cursor_check,
    ALTER COLUMN account_key TYPE ilk_account_key,
    ALTER COLUMN provider_account_id TYPE ilk_provider_text,
    ALTER COLUMN owner_peer_id TYPE ilk_provider_text,
    ALTER COLUMN base_url TYPE ilk_base_url,
    ALTER COLUMN generation TYPE ilk_generation,
    ALTER COLUMN status TYPE ilk_account_status,
    ALTER COLUMN cursor TYPE ilk_cursor;

ALTER TABLE inbound_messages
    DROP CONSTRAINT inbound_messages_message_key_check,
    DROP CONSTRAINT inbound_messages_provider_message_id_check,
    DROP CONSTRAINT inbound_messages_status_check,
    ALTER COLUMN message_key TYPE ilk_message_key,
    ALTER COLUMN provider_message_id TYPE ilk_provider_text,
    ALTER COLUMN status TYPE ilk_message_status;

ALTER TABLE reply_windows
    DROP CONSTRAINT reply_windows_account_generation_check,
    DROP CONSTRAINT reply_windows_provider_seq_check,
    DROP CONSTRAINT reply_windows_max_sends_check,
    DROP CONSTRAINT reply_windows_next_send_index_check,
    DROP CONSTRAINT reply_windows_reserved_check,
    DROP CONSTRAINT reply_windows_transmitted_check,
    DROP CONSTRAINT reply_windows_state_check,
    ALTER COLUMN account_generation TYPE ilk_generation,
    ALTER COLUMN provider_seq TYPE ilk_sequence,
    ALTER COLUMN max_sends TYPE ilk_max_sends,
    ALTER COLUMN next_send_index TYPE ilk_count,
    ALTER COLUMN reserved TYPE ilk_count,
    ALTER COLUMN transmitted TYPE ilk_count,
    ALTER COLUMN state TYPE ilk_window_state;

ALTER TABLE reply_window_secrets
    DROP CONSTRAINT reply_window_secrets_key_generation_check,
    ALTER COLUMN key_generation TYPE ilk_generation;

ALTER TABLE send_attempts
    DROP CONSTRAINT send_attempts_attempt_id_check,
    DROP CONSTRAINT send_attempts_send_index_check,
    DROP CONSTRAINT send_attempts_window_send_index_check,
    DROP CONSTRAINT send_attempts_source_check,
    DROP CONSTRAINT send_attempts_content_type_check,
    DROP CONSTRAINT send_attempts_fingerprint_check,
    DROP CONSTRAINT send_attempts_status_check,
    DROP CONSTRAINT send_attempts_fail_type_check,
    DROP CONSTRAINT send_attempts_request_id_check,
    ALTER COLUMN attempt_id TYPE ilk_attempt_id,
    ALTER COLUMN send_index TYPE ilk_send_index,
    ALTER COLUMN window_send_index TYPE ilk_count,
    ALTER COLUMN source TYPE ilk_send_source,
    ALTER COLUMN content_type TYPE ilk_content_type,
    ALTER COLUMN fingerprint TYPE ilk_sha256,
    ALTER COLUMN status TYPE ilk_attempt_status,
    ALTER COLUMN fail_type TYPE ilk_fail_type,
    ALTER COLUMN request_id TYPE ilk_provider_text;

-- +goose Down
ALTER TABLE send_attempts
    ALTER COLUMN attempt_id TYPE text,
    ALTER COLUMN send_index TYPE integer,
    ALTER COLUMN window_send_index TYPE integer,
    ALTER COLUMN source TYPE text,
    ALTER COLUMN content_type TYPE text,
    ALTER COLUMN fingerprint TYPE text,
    ALTER COLUMN status TYPE text,
    ALTER COLUMN fail_type TYPE text,
    ALTER COLUMN request_id TYPE text,
    ADD CONSTRAINT send_attempts_attempt_id_check CHECK (attempt_id ~ '^sa_[0-9a-f]{29}$'),
    ADD CONSTRAINT send_attempts_send_index_check CHECK (send_index >= 0 AND send_index < 1000),
    ADD CONSTRAINT send_attempts_window_send_index_check CHECK (window_send_index >= 0),
    ADD CONSTRAINT send_attempts_source_check CHECK (source IN ('agent', 'system')),
    ADD CONSTRAINT send_attempts_content_type_check CHECK (content_type IN ('text', 'image', 'file', 'video')),
    ADD CONSTRAINT send_attempts_fingerprint_check CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT send_attempts_status_check CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'unknown')),
    ADD CONSTRAINT send_attempts_fail_type_check
        CHECK (fail_type IN ('', 'refused', 'released', 'retired', 'rejected', 'throttled', 'stale_token', 'transport')),
    ADD CONSTRAINT send_attempts_request_id_check CHECK (octet_length(request_id) BETWEEN 1 AND 256);

ALTER TABLE reply_window_secrets
    ALTER COLUMN key_generation TYPE integer,
    ADD CONSTRAINT reply_window_secrets_key_generation_check CHECK (key_generation >= 1);

ALTER TABLE reply_windows
    ALTER COLUMN account_generation TYPE integer,
    ALTER COLUMN provider_seq TYPE bigint,
    ALTER COLUMN max_sends TYPE integer,
    ALTER COLUMN next_send_index TYPE integer,
    ALTER COLUMN reserved TYPE integer,
    ALTER COLUMN transmitted TYPE integer,
    ALTER COLUMN state TYPE text,
    ADD CONSTRAINT reply_windows_account_generation_check CHECK (account_generation >= 1),
    ADD CONSTRAINT reply_windows_provider_seq_check CHECK (provider_seq >= 0),
    ADD CONSTRAINT reply_windows_max_sends_check CHECK (max_sends BETWEEN 1 AND 1000),
    ADD CONSTRAINT reply_windows_next_send_index_check CHECK (next_send_index >= 0),
    ADD CONSTRAINT reply_windows_reserved_check CHECK (reserved >= 0),
    ADD CONSTRAINT reply_windows_transmitted_check CHECK (transmitted >= 0),
    ADD CONSTRAINT reply_windows_state_check CHECK (state IN ('open', 'superseded', 'cancelled', 'expired'));

ALTER TABLE inbound_messages
    ALTER COLUMN message_key TYPE text,
    ALTER COLUMN provider_message_id TYPE text,
    ALTER COLUMN status TYPE text,
    ADD CONSTRAINT inbound_messages_message_key_check CHECK (message_key ~ '^im_[0-9a-f]{32}$'),
    ADD CONSTRAINT inbound_messages_provider_message_id_check CHECK (octet_length(provider_message_id) BETWEEN 1 AND 256),
    ADD CONSTRAINT inbound_messages_status_check
        CHECK (status IN ('received', 'processing', 'handled', 'failed', 'absorbed'));

ALTER TABLE accounts
    ALTER COLUMN account_key TYPE text,
    ALTER COLUMN provider_account_id TYPE text,
    ALTER COLUMN owner_peer_id TYPE text,
    ALTER COLUMN base_url TYPE text,
    ALTER COLUMN generation TYPE integer,
    ALTER COLUMN status TYPE text,
    ALTER COLUMN cursor TYPE text,
    ADD CONSTRAINT accounts_account_key_check CHECK (account_key ~ '^ilk_[0-9a-f]{32}$'),
    ADD CONSTRAINT accounts_provider_account_id_check CHECK (octet_length(provider_account_id) BETWEEN 1 AND 256),
    ADD CONSTRAINT accounts_owner_peer_id_check CHECK (octet_length(owner_peer_id) BETWEEN 1 AND 256),
    ADD CONSTRAINT accounts_base_url_check CHECK (base_url ~ '^https?://'),
    ADD CONSTRAINT accounts_generation_check CHECK (generation >= 1),
    ADD CONSTRAINT accounts_status_check
        CHECK (status IN ('active', 'paused', 'needs_relogin', 'replaced', 'disabled')),
    ADD CONSTRAINT accounts_cursor_check CHECK (octet_length(cursor) <= 262144);

DROP DOMAIN ilk_account_key, ilk_message_key, ilk_attempt_id, ilk_sha256, ilk_provider_text, ilk_base_url,
    ilk_cursor, ilk_generation, ilk_count, ilk_sequence, ilk_max_sends, ilk_send_index, ilk_account_status,
    ilk_message_status, ilk_window_state, ilk_attempt_status, ilk_fail_type, ilk_send_source, ilk_content_type;
