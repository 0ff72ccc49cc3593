-- +goose Up
-- Any text iLink can deliver is stored as it came, and a page that cannot be committed
-- as it is goes to a quarantine instead of stalling its bot.
--
-- An inbound message's payload (its summary, a voice transcript, a file's name) is a user's
-- text: it may hold U+0000, which jsonb refuses (SQLSTATE 22P05: PostgreSQL text cannot
-- hold it). json keeps the text as written, \u0000 escapes included, and the store decodes
-- it in Go; nothing in SQL reads inside a payload.
DROP VIEW unanswered_messages;
ALTER TABLE inbound_messages ALTER COLUMN payload TYPE json USING payload::json;
CREATE VIEW unanswered_messages AS
SELECT received.account_key::text AS account_key, received.peer_id::text AS peer_id,
       received.message_key::text AS message_key, received.inbox_seq, received.payload,
       received.status::text AS status
FROM inbound_messages AS received
WHERE received.status = 'received'
UNION ALL
SELECT unanswered.account_key::text, unanswered.peer_id::text, handed.message_key::text, handed.inbox_seq,
       handed.payload, handed.status::text
FROM reply_windows AS unanswered
CROSS JOIN LATERAL (
    SELECT message.message_key, message.inbox_seq, message.payload, message.status
    FROM inbound_messages AS message
    WHERE message.message_key = unanswered.source_message_key AND message.status = 'processing'
    OFFSET 0
) AS handed
WHERE unanswered.state = 'open' AND unanswered.transmitted = 0;

-- A page (or some messages of a page) the store could not take as it is, for a reason that
-- retrying will not fix: its messages as iLink handed them out, sealed (they carry context
-- tokens and media keys), with the error. The page's cursor moved on in the same
-- transaction, so the bot goes on at once; nothing here is retried or dropped.
CREATE TABLE quarantined_pages (
    quarantine_id   text        PRIMARY KEY CHECK (quarantine_id ~ '^qp_[0-9a-f]{32}$'),
    account_key     text        NOT NULL REFERENCES accounts (account_key),
    generation      integer     NOT NULL CHECK (generation >= 1),
    messages        integer     NOT NULL CHECK (messages >= 0),
    -- whole: the page was not committed; messages: these messages were left out of a page
    -- that was.
    scope           text        NOT NULL CHECK (scope IN ('page', 'messages')),
    error_code      text        NOT NULL CHECK (octet_length(error_code) BETWEEN 1 AND 64),
    error_message   text        NOT NULL CHECK (octet_length(error_message) <= 2048),
    cursor_moved    boolean     NOT NULL,
    key_generation  integer     NOT NULL,
    nonce           bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext      bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    created_at      timestamptz NOT NULL
);

CREATE INDEX quarantined_pages_by_account ON quarantined_pages (account_key, created_at);

-- +goose Down
DROP TABLE quarantined_pages;
DROP VIEW unanswered_messages;
ALTER TABLE inbound_messages ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
CREATE VIEW unanswered_messages AS
SELECT received.account_key::text AS account_key, received.peer_id::text AS peer_id,
       received.message_key::text AS message_key, received.inbox_seq, received.payload,
       received.status::text AS status
FROM inbound_messages AS received
WHERE received.status = 'received'
UNION ALL
SELECT unanswered.account_key::text, unanswered.peer_id::text, handed.message_key::text, handed.inbox_seq,
       handed.payload, handed.status::text
FROM reply_windows AS unanswered
CROSS JOIN LATERAL (
    SELECT message.message_key, message.inbox_seq, message.payload, message.status
    FROM inbound_messages AS message
    WHERE message.message_key = unanswered.source_message_key AND message.status = 'processing'
    OFFSET 0
) AS handed
WHERE unanswered.state = 'open' AND unanswered.transmitted = 0;
