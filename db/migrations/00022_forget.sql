-- +goose NO TRANSACTION
-- +goose Up
-- Erasing a WeChat user's content on request (`starter forget`, docs/operations.md): the
-- rows stay, their content goes. An inbound message keeps its key, account, peer, iLink
-- message id, status and times (the inbox deduplicates on them, so a message iLink hands out
-- again is still recognised, and the counters still count it) and loses its payload; a send
-- attempt keeps its status, ids and counters and loses its payload (JSON null), metadata,
-- error message and fingerprint (all zeros: a SHA-256 of a short text is guessable).
-- erased_at says when (NULL: the content is there).
--
-- inbound_messages and send_attempts grow with traffic, so nothing here holds their
-- tables' exclusive lock for longer than a catalog change: the columns are added without a
-- default (no rewrite), and the payload rule is replaced NOT VALID (no scan under the
-- lock), then validated (a scan that lets writes go on). It runs without a transaction
-- (NO TRANSACTION), each statement with the run's lock and statement timeouts; after a
-- failure the migration is applied again from its first statement, which IF NOT EXISTS
-- and IF EXISTS make safe.
ALTER TABLE inbound_messages ADD COLUMN IF NOT EXISTS erased_at timestamptz;
ALTER TABLE send_attempts ADD COLUMN IF NOT EXISTS erased_at timestamptz;

-- A message has no payload when it was absorbed into a later one (which holds its text) or
-- when its content was erased. The rule of 00001 it replaces had no name of its own.
ALTER TABLE inbound_messages
    DROP CONSTRAINT IF EXISTS inbound_messages_check,
    DROP CONSTRAINT IF EXISTS inbound_messages_payload,
    ADD CONSTRAINT inbound_messages_payload
        CHECK ((payload IS NULL) = (status = 'absorbed' OR erased_at IS NOT NULL)) NOT VALID;
ALTER TABLE inbound_messages VALIDATE CONSTRAINT inbound_messages_payload;

-- One row per erasure that ran (a dry run writes none): who asked, when it started and
-- ended, the account it was limited to (NULL: every account) and what it erased, as
-- counts. It holds nothing about the person: no peer id, no hash of one, no text.
CREATE TABLE IF NOT EXISTS forget_audit (
    audit_id      bigint          GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    requested_at  timestamptz     NOT NULL,
    completed_at  timestamptz     NOT NULL,
    requested_by  text            NOT NULL CHECK (octet_length(requested_by) BETWEEN 1 AND 200),
    account_key   ilk_account_key REFERENCES accounts (account_key),
    counts        jsonb           NOT NULL CHECK (jsonb_typeof(counts) = 'object'),
    CHECK (completed_at >= requested_at)
);

-- +goose Down
DROP TABLE IF EXISTS forget_audit;
-- The rule of 00001 again: an erased message (not absorbed) gets an empty summary back.
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_payload;
UPDATE inbound_messages SET payload = '{"summary":""}'
WHERE payload IS NULL AND status <> 'absorbed';
ALTER TABLE inbound_messages DROP CONSTRAINT IF EXISTS inbound_messages_check,
    ADD CONSTRAINT inbound_messages_check CHECK ((status = 'absorbed') = (payload IS NULL));
ALTER TABLE send_attempts DROP COLUMN IF EXISTS erased_at;
ALTER TABLE inbound_messages DROP COLUMN IF EXISTS erased_at;
