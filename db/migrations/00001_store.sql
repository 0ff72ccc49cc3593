-- +goose Up
-- The transactional store of ilinkflow (docs/architecture.md#data-model). Every CHECK and partial unique index
-- below makes one impossible state unrepresentable; the store's Go code enforces the same
-- rules first and reports them with typed errors, the database is the last line.

CREATE TABLE accounts (
    account_key          text        PRIMARY KEY CHECK (account_key ~ '^ilk_[0-9a-f]{32}$'),
    provider_account_id  text        NOT NULL UNIQUE CHECK (octet_length(provider_account_id) BETWEEN 1 AND 256),
    owner_peer_id        text        NOT NULL CHECK (octet_length(owner_peer_id) BETWEEN 1 AND 256),
    base_url             text        NOT NULL CHECK (base_url ~ '^https?://'),
    generation           integer     NOT NULL CHECK (generation >= 1),
    status               text        NOT NULL CHECK (status IN ('active', 'paused', 'needs_relogin', 'replaced', 'disabled')),
    status_reason        text        NOT NULL DEFAULT '',
    pause_until          timestamptz,
    last_poll_at         timestamptz,
    cursor               text        NOT NULL DEFAULT '' CHECK (octet_length(cursor) <= 262144),
    cursor_updated_at    timestamptz,
    replaced_by          text        REFERENCES accounts (account_key) DEFERRABLE INITIALLY DEFERRED,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    CHECK ((status = 'paused') = (pause_until IS NOT NULL)),
    CHECK (status <> 'replaced' OR replaced_by IS NOT NULL)
);

-- An owner (the WeChat user who scanned the QR code) has at most one live bot.
CREATE UNIQUE INDEX accounts_one_live_per_owner ON accounts (owner_peer_id)
    WHERE status IN ('active', 'paused');

CREATE TABLE account_secrets (
    account_key          text        PRIMARY KEY REFERENCES accounts (account_key) ON DELETE CASCADE,
    account_generation   integer     NOT NULL CHECK (account_generation >= 1),
    key_generation       integer     NOT NULL CHECK (key_generation >= 1),
    nonce                bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext           bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    updated_at           timestamptz NOT NULL
);

CREATE TABLE login_offers (
    offer_id             text        PRIMARY KEY CHECK (offer_id ~ '^qo_[A-Za-z0-9_-]{1,128}$'),
    status               text        NOT NULL CHECK (status IN ('waiting', 'scanned')),
    requested_by         text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);

CREATE TABLE enrollment_audit (
    audit_id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    offer_id             text        NOT NULL UNIQUE,
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    account_generation   integer     NOT NULL CHECK (account_generation >= 1),
    result               text        NOT NULL CHECK (result IN ('registered', 'rotated')),
    replaced_account_keys text[]     NOT NULL DEFAULT '{}',
    requested_by         text        NOT NULL DEFAULT '',
    offered_at           timestamptz NOT NULL,
    completed_at         timestamptz NOT NULL
);

CREATE TABLE inbound_messages (
    message_key          text        PRIMARY KEY CHECK (message_key ~ '^im_[0-9a-f]{32}$'),
    inbox_seq            bigint      NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    peer_id              text        NOT NULL,
    provider_message_id  text        NOT NULL CHECK (octet_length(provider_message_id) BETWEEN 1 AND 256),
    sent_at              timestamptz NOT NULL,
    status               text        NOT NULL CHECK (status IN ('received', 'processing', 'handled', 'failed', 'absorbed')),
    deferred             boolean     NOT NULL DEFAULT false,
    payload              jsonb,
    failure_reason       text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    UNIQUE (account_key, provider_message_id),
    -- An absorbed message has handed its content to the message that absorbed it.
    CHECK ((status = 'absorbed') = (payload IS NULL)),
    CHECK (status <> 'absorbed' OR NOT deferred)
);

CREATE INDEX inbound_messages_by_peer ON inbound_messages (account_key, peer_id, status, inbox_seq);

CREATE TABLE inbound_images (
    message_key          text        NOT NULL REFERENCES inbound_messages (message_key) ON DELETE CASCADE,
    position             integer     NOT NULL CHECK (position >= 0 AND position < 1000),
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    peer_id              text        NOT NULL,
    key_generation       integer     NOT NULL CHECK (key_generation >= 1),
    nonce                bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext           bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (message_key, position)
);

CREATE TABLE reply_windows (
    reply_window_id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    peer_id              text        NOT NULL,
    account_generation   integer     NOT NULL CHECK (account_generation >= 1),
    source_message_key   text        NOT NULL UNIQUE REFERENCES inbound_messages (message_key),
    source_inbox_seq     bigint      NOT NULL,
    provider_message_id  text        NOT NULL,
    provider_seq         bigint      CHECK (provider_seq >= 0),
    issued_at            timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL,
    max_sends            integer     NOT NULL CHECK (max_sends BETWEEN 1 AND 1000),
    next_send_index      integer     NOT NULL DEFAULT 0 CHECK (next_send_index >= 0),
    reserved             integer     NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    transmitted          integer     NOT NULL DEFAULT 0 CHECK (transmitted >= 0),
    state                text        NOT NULL CHECK (state IN ('open', 'superseded', 'cancelled', 'expired')),
    retired_reason       text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    CHECK (expires_at > issued_at),
    CHECK (reserved + transmitted <= max_sends),
    CHECK (reserved + transmitted <= next_send_index),
    -- A retired window holds no reservation.
    CHECK (state = 'open' OR reserved = 0)
);

-- One open window per conversation.
CREATE UNIQUE INDEX reply_windows_one_open ON reply_windows (account_key, peer_id) WHERE state = 'open';

CREATE TABLE reply_window_secrets (
    reply_window_id      bigint      PRIMARY KEY REFERENCES reply_windows (reply_window_id) ON DELETE CASCADE,
    key_generation       integer     NOT NULL CHECK (key_generation >= 1),
    nonce                bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext           bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    updated_at           timestamptz NOT NULL
);

CREATE TABLE send_attempts (
    attempt_id           text        PRIMARY KEY CHECK (attempt_id ~ '^sa_[0-9a-f]{29}$'),
    client_message_id    text        NOT NULL UNIQUE,
    source_message_key   text        NOT NULL REFERENCES inbound_messages (message_key),
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    peer_id              text        NOT NULL,
    reply_window_id      bigint      NOT NULL REFERENCES reply_windows (reply_window_id),
    send_index           integer     NOT NULL CHECK (send_index >= 0 AND send_index < 1000),
    window_send_index    integer     NOT NULL CHECK (window_send_index >= 0),
    source               text        NOT NULL CHECK (source IN ('agent', 'system')),
    content_type         text        NOT NULL CHECK (content_type IN ('text', 'image', 'file', 'video')),
    payload              jsonb       NOT NULL,
    metadata             jsonb       NOT NULL DEFAULT '{}',
    fingerprint          text        NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    status               text        NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'unknown')),
    provider_message_id  text        NOT NULL DEFAULT '',
    error_code           text        NOT NULL DEFAULT '',
    error_message        text        NOT NULL DEFAULT '',
    fail_type            text        NOT NULL DEFAULT '' CHECK (fail_type IN ('', 'refused', 'released', 'retired', 'rejected', 'throttled', 'stale_token', 'transport')),
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    UNIQUE (source_message_key, send_index),
    CHECK ((status = 'failed') = (fail_type <> ''))
);

-- At most one send in flight per conversation.
CREATE UNIQUE INDEX send_attempts_one_sending ON send_attempts (account_key, peer_id) WHERE status = 'sending';
CREATE INDEX send_attempts_pending ON send_attempts (reply_window_id) WHERE status = 'pending';

CREATE TABLE agent_sessions (
    session_id           uuid        PRIMARY KEY,
    token_hash           bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    source_message_key   text        NOT NULL REFERENCES inbound_messages (message_key),
    reply_window_id      bigint      NOT NULL REFERENCES reply_windows (reply_window_id),
    account_key          text        NOT NULL REFERENCES accounts (account_key),
    peer_id              text        NOT NULL,
    created_at           timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL,
    closed_at            timestamptz,
    CHECK (expires_at > created_at)
);

CREATE INDEX agent_sessions_open ON agent_sessions (reply_window_id) WHERE closed_at IS NULL;

-- +goose Down
DROP TABLE agent_sessions;
DROP TABLE send_attempts;
DROP TABLE reply_window_secrets;
DROP TABLE reply_windows;
DROP TABLE inbound_images;
DROP TABLE inbound_messages;
DROP TABLE enrollment_audit;
DROP TABLE login_offers;
DROP TABLE account_secrets;
DROP TABLE accounts;
