-- +goose Up
-- Held replies: a reply the window could no longer carry (its quota used up, the slots
-- kept for the final answer reached, or the window expired) is kept, sealed, in order per
-- conversation, and sent first when the user's next message opens a new window.
--
-- A held reply moves held -> sending (a send attempt of a new window carries it) -> sent,
-- unknown or failed; an attempt that surely never left (released, retired, refused,
-- throttled, transport) gives it back to held, to go with the next window. One past its
-- age limit, or dropped by an operator, becomes dropped (the row stays as the audit
-- record). Its sealed content is deleted once it is settled.

-- A message whose agent answered while its answer is held is held until that answer is
-- sent (then handled) or dropped (then failed): handled means answered.
ALTER DOMAIN ilk_message_status DROP CONSTRAINT ilk_message_status_check;
ALTER DOMAIN ilk_message_status ADD CONSTRAINT ilk_message_status_check
    CHECK (VALUE IN ('received', 'processing', 'handled', 'failed', 'absorbed', 'held'));

-- A send attempt that carries a held reply.
ALTER DOMAIN ilk_send_source DROP CONSTRAINT ilk_send_source_check;
ALTER DOMAIN ilk_send_source ADD CONSTRAINT ilk_send_source_check
    CHECK (VALUE IN ('agent', 'system', 'held'));

-- A reminder before a window closes (per bot, off by default): when the conversation
-- has held replies, the gateway sends reminder_text reminder_before_seconds before the
-- window ends, inviting the user to write again. While it is on, the window keeps its
-- last send for it.
ALTER TABLE accounts ADD COLUMN reminder_before_seconds integer CHECK (reminder_before_seconds > 0);
ALTER TABLE accounts ADD COLUMN reminder_text text CHECK (octet_length(reminder_text) BETWEEN 1 AND 2048);
ALTER TABLE accounts ADD CONSTRAINT accounts_reminder CHECK ((reminder_before_seconds IS NULL) = (reminder_text IS NULL));
-- An agent may ask for the reminder of its window (POST /v1/remind), held replies or not.
ALTER TABLE reply_windows ADD COLUMN reminder_requested boolean NOT NULL DEFAULT false;

CREATE TABLE held_replies (
    held_id             text            PRIMARY KEY CHECK (held_id ~ '^hr_[0-9a-f]{32}$'),
    -- The order of the conversation's held replies.
    held_seq            bigint          NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    account_key         ilk_account_key NOT NULL REFERENCES accounts (account_key),
    peer_id             text            NOT NULL,
    -- The message the agent answered and the window that could not carry the reply.
    source_message_key  ilk_message_key NOT NULL REFERENCES inbound_messages (message_key),
    reply_window_id     bigint          NOT NULL REFERENCES reply_windows (reply_window_id),
    request_id          text            NOT NULL CHECK (octet_length(request_id) BETWEEN 1 AND 300),
    content_type        ilk_content_type NOT NULL,
    final               boolean         NOT NULL,
    fingerprint         ilk_sha256      NOT NULL,
    size_bytes          integer         NOT NULL CHECK (size_bytes >= 0),
    reason              text            NOT NULL CHECK (reason IN ('reply_quota_exhausted', 'reply_slots_reserved', 'reply_window_expired')),
    status              text            NOT NULL CHECK (status IN ('held', 'sending', 'sent', 'unknown', 'failed', 'dropped')),
    attempt_id          ilk_attempt_id  REFERENCES send_attempts (attempt_id),
    key_generation      integer         CHECK (key_generation >= 1),
    nonce               bytea           CHECK (octet_length(nonce) = 12),
    ciphertext          bytea           CHECK (octet_length(ciphertext) > 16),
    drop_reason         text            NOT NULL DEFAULT '' CHECK (octet_length(drop_reason) <= 200),
    dropped_by          text            NOT NULL DEFAULT '' CHECK (octet_length(dropped_by) <= 200),
    created_at          timestamptz     NOT NULL,
    expires_at          timestamptz     NOT NULL,
    updated_at          timestamptz     NOT NULL,
    UNIQUE (source_message_key, request_id),
    CHECK (expires_at > created_at),
    -- The content is kept while the reply may still be sent.
    CHECK ((status IN ('held', 'sending')) = (ciphertext IS NOT NULL)),
    CHECK ((ciphertext IS NULL) = (nonce IS NULL) AND (ciphertext IS NULL) = (key_generation IS NULL)),
    -- An attempt carries it from sending on; a dropped one never had a live attempt.
    CHECK (status NOT IN ('sending', 'sent', 'unknown', 'failed') OR attempt_id IS NOT NULL),
    CHECK (status <> 'held' OR attempt_id IS NULL),
    CHECK ((status = 'dropped') = (drop_reason <> ''))
);

-- The conversation's replies still to send, in order.
CREATE INDEX held_replies_waiting ON held_replies (account_key, peer_id, held_seq)
    WHERE status IN ('held', 'sending');
CREATE INDEX held_replies_by_attempt ON held_replies (attempt_id) WHERE attempt_id IS NOT NULL;

-- +goose StatementBegin
-- The one place where a held reply follows the attempt that carries it, whichever
-- statement moved the attempt (completion, release, retirement, crash recovery): sent or
-- unknown settles it (an unknown outcome is never sent again), a rejection or a dead bot
-- token fails it, and an attempt that surely never left gives it back to held.
CREATE FUNCTION ilk_follow_held_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('sent', 'unknown') OR (NEW.status = 'failed' AND NEW.fail_type IN ('rejected', 'stale_token')) THEN
        UPDATE held_replies SET status = NEW.status, key_generation = NULL, nonce = NULL, ciphertext = NULL,
            updated_at = NEW.updated_at
        WHERE attempt_id = NEW.attempt_id AND status = 'sending';
    ELSIF NEW.status = 'failed' THEN
        UPDATE held_replies SET status = 'held', attempt_id = NULL, updated_at = NEW.updated_at
        WHERE attempt_id = NEW.attempt_id AND status = 'sending';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER send_attempts_follow_held AFTER UPDATE OF status ON send_attempts
    FOR EACH ROW WHEN (NEW.source = 'held' AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION ilk_follow_held_attempt();

-- +goose StatementBegin
-- The one place where a message whose answer was held is settled: when the last of its
-- held replies is settled (sent, unknown, failed or dropped), a message whose status is
-- held becomes handled if any of them went out (or may have: unknown) or another reply to
-- it was sent, else failed.
CREATE FUNCTION ilk_settle_held_message() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    answered boolean;
BEGIN
    IF EXISTS (SELECT 1 FROM held_replies h
               WHERE h.source_message_key = NEW.source_message_key AND h.status IN ('held', 'sending')) THEN
        RETURN NEW;
    END IF;
    answered := EXISTS (SELECT 1 FROM held_replies h
                        WHERE h.source_message_key = NEW.source_message_key AND h.status IN ('sent', 'unknown'))
             OR EXISTS (SELECT 1 FROM send_attempts s
                        WHERE s.source_message_key = NEW.source_message_key AND s.status = 'sent');
    UPDATE inbound_messages
    SET status = CASE WHEN answered THEN 'handled' ELSE 'failed' END,
        failure_reason = CASE WHEN answered THEN '' ELSE 'none of the held replies of its answer was sent' END,
        updated_at = NEW.updated_at
    WHERE message_key = NEW.source_message_key AND status = 'held';
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER held_replies_settle_message AFTER UPDATE OF status ON held_replies
    FOR EACH ROW WHEN (OLD.status IN ('held', 'sending') AND NEW.status NOT IN ('held', 'sending'))
    EXECUTE FUNCTION ilk_settle_held_message();

-- +goose Down
DROP TRIGGER held_replies_settle_message ON held_replies;
DROP FUNCTION ilk_settle_held_message();
DROP TRIGGER send_attempts_follow_held ON send_attempts;
DROP FUNCTION ilk_follow_held_attempt();
DROP TABLE held_replies;
ALTER TABLE reply_windows DROP COLUMN reminder_requested;
ALTER TABLE accounts DROP CONSTRAINT accounts_reminder;
ALTER TABLE accounts DROP COLUMN reminder_text;
ALTER TABLE accounts DROP COLUMN reminder_before_seconds;
UPDATE send_attempts SET source = 'system' WHERE source = 'held';
ALTER DOMAIN ilk_send_source DROP CONSTRAINT ilk_send_source_check;
ALTER DOMAIN ilk_send_source ADD CONSTRAINT ilk_send_source_check CHECK (VALUE IN ('agent', 'system'));
UPDATE inbound_messages SET status = 'failed', failure_reason = 'held replies removed by a schema downgrade' WHERE status = 'held';
ALTER DOMAIN ilk_message_status DROP CONSTRAINT ilk_message_status_check;
ALTER DOMAIN ilk_message_status ADD CONSTRAINT ilk_message_status_check
    CHECK (VALUE IN ('received', 'processing', 'handled', 'failed', 'absorbed'));
