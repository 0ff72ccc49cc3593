-- +goose Up
-- The web front end's state, kept in the database so that a login and an owner's link
-- survive a worker restart and work on every worker. Only the SHA-256 of a session id or
-- an owner link's token is stored: each is 256 random bits, so a fast hash suffices.

-- An operator's login: the session's CSRF token and the one-shot message the next page
-- shows (flash_kind ok or error).
CREATE TABLE webui_sessions (
    id_hash     bytea       PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    csrf        text        NOT NULL CHECK (octet_length(csrf) BETWEEN 32 AND 128),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at),
    flash       text        NOT NULL DEFAULT '' CHECK (octet_length(flash) <= 2000),
    flash_kind  text        NOT NULL DEFAULT '' CHECK (flash_kind IN ('', 'ok', 'error'))
);
CREATE INDEX webui_sessions_expiry ON webui_sessions (expires_at);

-- A link an operator hands a bot's owner: it opens one enrollment's QR code and code form,
-- nothing else, until the enrollment's own expiry.
CREATE TABLE webui_owner_links (
    id_hash     bytea       PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    offer_id    text        NOT NULL CHECK (offer_id ~ '^qo_[A-Za-z0-9_-]{1,128}$'),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX webui_owner_links_expiry ON webui_owner_links (expires_at);

-- +goose Down
DROP TABLE webui_owner_links;
DROP TABLE webui_sessions;
