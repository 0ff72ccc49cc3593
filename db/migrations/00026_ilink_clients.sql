-- +goose Up
-- iLink clients: programs that speak the iLink bot API (the official OpenClaw plugin,
-- WeClaw, ...) and answer the bots routed to them (route kind ilink) through the
-- gateway's iLink facade. As for MCP agents, only the SHA-256 of a token is stored; a
-- token is 256 random bits. Revoking a client refuses its token and every bot token of
-- its logins at once.
CREATE TABLE ilink_clients (
    client_name      text        PRIMARY KEY CHECK (client_name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    token_hash       bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at       timestamptz NOT NULL,
    created_by       text        NOT NULL CHECK (octet_length(created_by) BETWEEN 1 AND 200),
    token_issued_at  timestamptz NOT NULL,
    revoked_at       timestamptz,
    revoked_by       text        CHECK (octet_length(revoked_by) BETWEEN 1 AND 200),
    -- The client's queue position: each offer takes the next number under this row's lock,
    -- so a client's offers are numbered in the order they commit (a cursor never skips one).
    last_seq         bigint      NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

-- A route of kind ilink names its client, and no other kind does.
ALTER TABLE account_routes ADD COLUMN ilink_client text REFERENCES ilink_clients (client_name);
ALTER TABLE account_routes DROP CONSTRAINT account_routes_kind;
ALTER TABLE account_routes ADD CONSTRAINT account_routes_kind CHECK (kind IN ('webhook', 'workflow', 'echo', 'mcp', 'ilink'));
ALTER TABLE account_routes ADD CONSTRAINT account_routes_ilink CHECK ((ilink_client IS NOT NULL) = (kind = 'ilink'));

-- A QR login of an iLink client (get_bot_qrcode): the poll key's hash, the short code an
-- operator approves it by, and, once approved, the client and bot it binds. The bot
-- token is issued when the client collects the confirmation, and only its hash is kept.
CREATE TABLE ilink_client_logins (
    qrcode_hash      bytea       PRIMARY KEY CHECK (octet_length(qrcode_hash) = 32),
    code             text        NOT NULL UNIQUE CHECK (code ~ '^[A-Z2-9]{8}$'),
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    scanned_at       timestamptz,
    approved_at      timestamptz,
    approved_by      text        CHECK (octet_length(approved_by) BETWEEN 1 AND 200),
    client_name      text        REFERENCES ilink_clients (client_name) ON DELETE CASCADE,
    account_key      ilk_account_key REFERENCES accounts (account_key),
    collected_at     timestamptz,
    CHECK ((approved_at IS NULL) = (client_name IS NULL) AND (client_name IS NULL) = (account_key IS NULL)
           AND (approved_at IS NULL) = (approved_by IS NULL)),
    CHECK (collected_at IS NULL OR approved_at IS NOT NULL)
);
CREATE INDEX ilink_client_logins_by_expiry ON ilink_client_logins (expires_at);

-- A bot of an iLink client: the bot id and token a login gave it (the facade's own, never
-- the account's real ones), bound to one account.
CREATE TABLE ilink_client_bots (
    bot_id           text        PRIMARY KEY CHECK (bot_id ~ '^[0-9a-f]{12}@im\.bot$'),
    client_name      text        NOT NULL REFERENCES ilink_clients (client_name) ON DELETE CASCADE,
    account_key      ilk_account_key NOT NULL REFERENCES accounts (account_key),
    token_hash       bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at       timestamptz NOT NULL,
    revoked_at       timestamptz
);
CREATE INDEX ilink_client_bots_by_client ON ilink_client_bots (client_name, account_key);

-- The queue of an iLink client: a message handed to it, numbered in the client's order,
-- with the hand-off's session (its token sealed, purpose ilink_client_session, bound to
-- the message key) that the facade replies under. A client's poll returns the offers past
-- its cursor; the cursor moves when its next poll shows it got them.
CREATE TABLE ilink_client_offers (
    message_key      ilk_message_key PRIMARY KEY REFERENCES inbound_messages (message_key) ON DELETE CASCADE,
    client_name      text        NOT NULL REFERENCES ilink_clients (client_name) ON DELETE CASCADE,
    seq              bigint      NOT NULL CHECK (seq >= 1),
    account_key      ilk_account_key NOT NULL REFERENCES accounts (account_key),
    reply_window_id  bigint      NOT NULL REFERENCES reply_windows (reply_window_id) ON DELETE CASCADE,
    session_id       uuid        NOT NULL REFERENCES agent_sessions (session_id) ON DELETE CASCADE,
    key_generation   integer     NOT NULL CHECK (key_generation >= 1),
    nonce            bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext       bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    offered_at       timestamptz NOT NULL,
    offers           integer     NOT NULL CHECK (offers >= 1),
    UNIQUE (client_name, seq)
);
CREATE INDEX ilink_client_offers_by_bot ON ilink_client_offers (client_name, account_key, seq);
CREATE INDEX ilink_client_offers_by_peer ON ilink_client_offers (account_key, offered_at);

-- How far each client (bot_id '' : the client's own token, all its bots) has acknowledged
-- its queue: what an empty get_updates_buf resumes from.
CREATE TABLE ilink_client_cursors (
    client_name      text        NOT NULL REFERENCES ilink_clients (client_name) ON DELETE CASCADE,
    bot_id           text        NOT NULL,
    acked_seq        bigint      NOT NULL CHECK (acked_seq >= 0),
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (client_name, bot_id)
);

-- Media an iLink client uploaded to the facade's CDN for a reply (sealed, purpose
-- ilink_client_upload), until its sendmessage uses it or it ages out.
CREATE TABLE ilink_client_uploads (
    upload_id        uuid        PRIMARY KEY,
    client_name      text        NOT NULL REFERENCES ilink_clients (client_name) ON DELETE CASCADE,
    account_key      ilk_account_key NOT NULL REFERENCES accounts (account_key),
    media_type       integer     NOT NULL CHECK (media_type BETWEEN 1 AND 4),
    key_generation   integer     NOT NULL CHECK (key_generation >= 1),
    nonce            bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext       bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    created_at       timestamptz NOT NULL
);
CREATE INDEX ilink_client_uploads_by_age ON ilink_client_uploads (created_at);

-- +goose Down
DROP TABLE ilink_client_uploads;
DROP TABLE ilink_client_cursors;
DROP TABLE ilink_client_offers;
DROP TABLE ilink_client_bots;
DROP TABLE ilink_client_logins;
ALTER TABLE account_routes DROP CONSTRAINT account_routes_ilink;
ALTER TABLE account_routes DROP CONSTRAINT account_routes_kind;
DELETE FROM account_routes WHERE kind = 'ilink';
ALTER TABLE account_routes ADD CONSTRAINT account_routes_kind CHECK (kind IN ('webhook', 'workflow', 'echo', 'mcp'));
ALTER TABLE account_routes DROP COLUMN ilink_client;
DROP TABLE ilink_clients;
