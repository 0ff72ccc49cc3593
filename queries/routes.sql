-- name: LockAccountForRoute :one
-- The account whose route changes, locked so that its route changes one at a time (FOR
-- NO KEY UPDATE: inserts that reference the account are not held up).
SELECT account_key FROM accounts WHERE account_key = $1 FOR NO KEY UPDATE;

-- name: GetRoute :one
SELECT * FROM account_routes WHERE account_key = $1;

-- name: UpsertRoute :one
INSERT INTO account_routes (
    account_key, kind, webhook_url, webhook_timeout_ms, key_generation, nonce, ciphertext,
    workflow_type, task_queue, mcp_agent, ilink_client, version, updated_at, updated_by
) VALUES (
    sqlc.arg(account_key), sqlc.arg(kind), sqlc.narg(webhook_url), sqlc.narg(webhook_timeout_ms),
    sqlc.narg(key_generation), sqlc.narg(nonce), sqlc.narg(ciphertext), sqlc.narg(workflow_type),
    sqlc.narg(task_queue), sqlc.narg(mcp_agent), sqlc.narg(ilink_client), nextval('account_route_versions'), sqlc.arg(now),
    sqlc.arg(updated_by)
)
ON CONFLICT (account_key) DO UPDATE SET
    kind = EXCLUDED.kind, webhook_url = EXCLUDED.webhook_url, webhook_timeout_ms = EXCLUDED.webhook_timeout_ms,
    key_generation = EXCLUDED.key_generation, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
    workflow_type = EXCLUDED.workflow_type, task_queue = EXCLUDED.task_queue, mcp_agent = EXCLUDED.mcp_agent,
    ilink_client = EXCLUDED.ilink_client,
    version = EXCLUDED.version,
    updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by
RETURNING version;

-- name: DeleteRoute :exec
DELETE FROM account_routes WHERE account_key = $1;

-- name: ListRoutes :many
-- Every route, without its sealed secret.
SELECT account_key, kind, webhook_url, webhook_timeout_ms, workflow_type, task_queue, mcp_agent, ilink_client, version, updated_at,
       updated_by
FROM account_routes
ORDER BY account_key;

-- name: InsertRouteAudit :exec
INSERT INTO route_audit (account_key, changed_at, changed_by, old_kind, new_kind, detail, new_version)
VALUES (sqlc.arg(account_key), sqlc.arg(changed_at), sqlc.arg(changed_by), sqlc.narg(old_kind),
        sqlc.narg(new_kind), sqlc.arg(detail), sqlc.narg(new_version));

-- name: ListRouteAudit :many
SELECT * FROM route_audit
WHERE sqlc.arg(account_key)::text = '' OR account_key = sqlc.arg(account_key)::text
ORDER BY audit_id;
