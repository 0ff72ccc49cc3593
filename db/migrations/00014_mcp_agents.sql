-- +goose Up
-- MCP agents: an agent that connects to the gateway's MCP server with a bearer token and
-- answers the bots routed to it (route kind mcp). Only the SHA-256 of a token is stored; a
-- token is 256 random bits, so a fast hash suffices. A revoked agent's token is refused;
-- issuing a new token replaces the old one.
CREATE TABLE mcp_agents (
    agent_name       text        PRIMARY KEY CHECK (agent_name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    token_hash       bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at       timestamptz NOT NULL,
    created_by       text        NOT NULL CHECK (octet_length(created_by) BETWEEN 1 AND 200),
    token_issued_at  timestamptz NOT NULL,
    revoked_at       timestamptz,
    revoked_by       text        CHECK (octet_length(revoked_by) BETWEEN 1 AND 200),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

-- A route of kind mcp names its agent, and no other kind does.
ALTER TABLE account_routes ADD COLUMN mcp_agent text REFERENCES mcp_agents (agent_name);
ALTER TABLE account_routes DROP CONSTRAINT account_routes_kind;
ALTER TABLE account_routes ADD CONSTRAINT account_routes_kind CHECK (kind IN ('webhook', 'workflow', 'echo', 'mcp'));
ALTER TABLE account_routes ADD CONSTRAINT account_routes_mcp CHECK ((mcp_agent IS NOT NULL) = (kind = 'mcp'));

-- The MCP inbox: a message handed to an MCP agent, with the session its tools reply under
-- (the token sealed, purpose mcp_session, bound to the message key). A wait of one of the
-- agent's MCP sessions claims the oldest unclaimed offer; the claim holds while the
-- session lives (the gateway renews lease_until) and is released when the session ends,
-- so an offer a client took and dropped is offered again. A re-offer of the message
-- replaces the session and keeps a live claim.
CREATE TABLE mcp_offers (
    message_key      ilk_message_key PRIMARY KEY REFERENCES inbound_messages (message_key),
    account_key      ilk_account_key NOT NULL REFERENCES accounts (account_key),
    agent_name       text        NOT NULL REFERENCES mcp_agents (agent_name),
    reply_window_id  bigint      NOT NULL REFERENCES reply_windows (reply_window_id),
    session_id       uuid        NOT NULL REFERENCES agent_sessions (session_id),
    key_generation   integer     NOT NULL CHECK (key_generation >= 1),
    nonce            bytea       NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext       bytea       NOT NULL CHECK (octet_length(ciphertext) > 16),
    offered_at       timestamptz NOT NULL,
    offers           integer     NOT NULL CHECK (offers >= 1),
    -- How many times a session took it: more than one when a session dropped it.
    taken            integer     NOT NULL DEFAULT 0 CHECK (taken >= 0),
    claimed_by       text        CHECK (octet_length(claimed_by) BETWEEN 1 AND 200),
    lease_until      timestamptz,
    CHECK ((claimed_by IS NULL) = (lease_until IS NULL))
);

CREATE INDEX mcp_offers_by_agent ON mcp_offers (agent_name, offered_at);
CREATE INDEX mcp_offers_by_claim ON mcp_offers (claimed_by) WHERE claimed_by IS NOT NULL;

-- +goose Down
DROP TABLE mcp_offers;
ALTER TABLE account_routes DROP CONSTRAINT account_routes_mcp;
ALTER TABLE account_routes DROP CONSTRAINT account_routes_kind;
DELETE FROM account_routes WHERE kind = 'mcp';
ALTER TABLE account_routes ADD CONSTRAINT account_routes_kind CHECK (kind IN ('webhook', 'workflow', 'echo'));
ALTER TABLE account_routes DROP COLUMN mcp_agent;
DROP TABLE mcp_agents;
