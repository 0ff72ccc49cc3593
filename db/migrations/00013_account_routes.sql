-- +goose Up
-- Every bot its own agent: a bot's route says which agent its messages are handed to. No
-- row is the worker's default route (its --handler flags). A webhook route's signing
-- secret is sealed with the store's keyring (purpose route_secret, bound to the account
-- key); no other column holds a secret. A route's version comes from a sequence, so a
-- route set, cleared and set again never repeats a version (workers cache the handler of a
-- route by account and version).
CREATE SEQUENCE account_route_versions;

CREATE TABLE account_routes (
    account_key        ilk_account_key PRIMARY KEY REFERENCES accounts (account_key),
    -- The kinds are an open set: a later migration adds one by widening this CHECK.
    kind               text        NOT NULL CONSTRAINT account_routes_kind CHECK (kind IN ('webhook', 'workflow', 'echo')),
    webhook_url        text        CHECK (octet_length(webhook_url) BETWEEN 1 AND 4096 AND webhook_url ~ '^https?://'),
    webhook_timeout_ms integer     CHECK (webhook_timeout_ms BETWEEN 0 AND 90000),
    key_generation     integer,
    nonce              bytea       CHECK (octet_length(nonce) = 12),
    ciphertext         bytea       CHECK (octet_length(ciphertext) > 16),
    workflow_type      text        CHECK (octet_length(workflow_type) BETWEEN 1 AND 1000),
    task_queue         text        CHECK (octet_length(task_queue) BETWEEN 1 AND 1000),
    version            bigint      NOT NULL CHECK (version >= 1),
    updated_at         timestamptz NOT NULL,
    updated_by         text        NOT NULL CHECK (octet_length(updated_by) BETWEEN 1 AND 200),
    -- Each kind has its settings and no other kind's.
    CONSTRAINT account_routes_settings CHECK (
        (webhook_url IS NOT NULL AND key_generation IS NOT NULL AND nonce IS NOT NULL AND ciphertext IS NOT NULL) = (kind = 'webhook')
        AND (kind = 'webhook' OR (webhook_url IS NULL AND webhook_timeout_ms IS NULL AND key_generation IS NULL
                                  AND nonce IS NULL AND ciphertext IS NULL))
        AND (workflow_type IS NOT NULL AND task_queue IS NOT NULL) = (kind = 'workflow')
        AND (kind = 'workflow' OR (workflow_type IS NULL AND task_queue IS NULL)))
);

-- Every change of a route: who, when, from which kind to which (NULL: the default route)
-- and what the new route names (a webhook's host, a workflow type and task queue), never
-- a secret or a webhook's full URL (its path or query may hold a key).
CREATE TABLE route_audit (
    audit_id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_key  ilk_account_key NOT NULL REFERENCES accounts (account_key),
    changed_at   timestamptz NOT NULL,
    changed_by   text        NOT NULL CHECK (octet_length(changed_by) BETWEEN 1 AND 200),
    old_kind     text,
    new_kind     text,
    detail       text        NOT NULL CHECK (octet_length(detail) <= 2048),
    new_version  bigint
);

CREATE INDEX route_audit_by_account ON route_audit (account_key, audit_id);

-- +goose Down
DROP TABLE route_audit;
DROP TABLE account_routes;
DROP SEQUENCE account_route_versions;
