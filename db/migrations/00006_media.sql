-- +goose Up
-- Media for agents.
--
-- Inbound: inbound_images keeps the sealed CDN locator of every downloadable attachment of
-- a message, not only of its images: images at positions 0..499 (as before), a file, voice
-- or video at 500 and above (vocab.MediaPositionBase), so one statement still inserts
-- every locator of a page.
--
-- Outbound: outbound_media stages the bytes of a media reply (sealed) where every worker
-- of a fleet reaches them, until the send activity has uploaded them to the CDN; the
-- upload's result (the CDN reference and its AES key, sealed) is recorded before the
-- message is sent, so a retried send never uploads or sends twice. Rows past expires_at
-- are deleted by the retention sweep.
CREATE TABLE outbound_media (
    media_id              uuid        PRIMARY KEY,
    session_id            uuid        NOT NULL REFERENCES agent_sessions (session_id) ON DELETE CASCADE,
    reply_window_id       bigint      NOT NULL REFERENCES reply_windows (reply_window_id) ON DELETE CASCADE,
    kind                  text        NOT NULL CHECK (kind IN ('image', 'file', 'video')),
    file_name             text        NOT NULL DEFAULT '' CHECK (octet_length(file_name) <= 1024),
    size                  bigint      NOT NULL CHECK (size > 0),
    sha256                text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    key_generation        integer     NOT NULL CHECK (key_generation >= 1),
    nonce                 bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext            bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    upload_key_generation integer     CHECK (upload_key_generation >= 1),
    upload_nonce          bytea       CHECK (octet_length(upload_nonce) = 12),
    upload_ciphertext     bytea       CHECK (octet_length(upload_ciphertext) > 16),
    uploaded_at           timestamptz,
    created_at            timestamptz NOT NULL,
    expires_at            timestamptz NOT NULL,
    CHECK (expires_at > created_at),
    CHECK ((uploaded_at IS NULL) = (upload_ciphertext IS NULL)),
    CHECK ((upload_ciphertext IS NULL) = (upload_nonce IS NULL)),
    CHECK ((upload_ciphertext IS NULL) = (upload_key_generation IS NULL))
);

CREATE INDEX outbound_media_expiry ON outbound_media (expires_at);

-- +goose Down
DROP TABLE outbound_media;
