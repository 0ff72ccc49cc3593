-- +goose NO TRANSACTION
-- +goose Up
-- Two unique indexes said twice what a primary key already says. A message's key is the
-- SHA-256 of its account and iLink message id (store.MessageKey), so the primary key on
-- message_key is the uniqueness of (account_key, provider_message_id); an attempt's
-- client_message_id is the SHA-256 of its message and send index (store.ClientMessageID),
-- unique with (source_message_key, send_index). Each index cost an entry on every insert
-- and every update that is not HOT (a message's status changes about twice), and the
-- message pair's was the inbox's second largest index (79 MB at 400,000 stored messages
-- in the soak). What they guarded, that nothing but the derivation writes these keys, is
-- now a CHECK on each row: the same SHA-256 in SQL (no index, nothing to keep up to date).
-- A violation is the dedupe invariant's code (store: constraintCodes).
--
-- The derivations are functions of their own (ilk_message_key, ilk_client_message_id: the
-- Go functions in SQL, byte for byte), for the rules and for whoever writes rows by hand.
-- The rules are added NOT VALID and then validated (a scan that lets writes go on), the
-- indexes dropped after; every statement is a catalog change under the run's lock and
-- statement timeouts, run outside a transaction (NO TRANSACTION) and safe to run again
-- from its first statement (OR REPLACE, IF EXISTS, and a rule dropped before it is added).
CREATE OR REPLACE FUNCTION ilk_message_key(account_key text, provider_message_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'im_' || left(encode(sha256(convert_to('ilinkflow/message', 'UTF8') || '\x00'::bytea
    || convert_to(account_key, 'UTF8') || '\x00'::bytea || convert_to(provider_message_id, 'UTF8')), 'hex'), 32);
CREATE OR REPLACE FUNCTION ilk_client_message_id(message_key text, send_index integer) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN 'ilinkflow:' || left(encode(sha256(convert_to('ilinkflow/client-message', 'UTF8') || '\x00'::bytea
    || convert_to(message_key, 'UTF8') || '\x00'::bytea || convert_to(send_index::text, 'UTF8')), 'hex'), 32);
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_key_derived,
    ADD CONSTRAINT inbound_messages_key_derived
        CHECK (message_key = ilk_message_key(account_key, provider_message_id)) NOT VALID;
ALTER TABLE inbound_messages VALIDATE CONSTRAINT inbound_messages_key_derived;
ALTER TABLE send_attempts DROP CONSTRAINT IF EXISTS send_attempts_client_id_derived,
    ADD CONSTRAINT send_attempts_client_id_derived
        CHECK (client_message_id = ilk_client_message_id(source_message_key, send_index)) NOT VALID;
ALTER TABLE send_attempts VALIDATE CONSTRAINT send_attempts_client_id_derived;
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_account_key_provider_message_id_key;
ALTER TABLE send_attempts DROP CONSTRAINT IF EXISTS send_attempts_client_message_id_key;

-- +goose Down
ALTER TABLE send_attempts DROP CONSTRAINT IF EXISTS send_attempts_client_message_id_key,
    ADD CONSTRAINT send_attempts_client_message_id_key UNIQUE (client_message_id);
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_account_key_provider_message_id_key,
    ADD CONSTRAINT inbound_messages_account_key_provider_message_id_key UNIQUE (account_key, provider_message_id);
ALTER TABLE send_attempts DROP CONSTRAINT IF EXISTS send_attempts_client_id_derived;
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_key_derived;
DROP FUNCTION IF EXISTS ilk_client_message_id(text, integer);
DROP FUNCTION IF EXISTS ilk_message_key(text, text);
