-- Retention (migration 00023, store.PurgeBatch): what the schedule deletes once its
-- horizon has passed. Every statement takes at most max_rows rows, oldest first, and
-- selects only what is still due, so a batch run again after a failure, or after a
-- complete pass, finds only what is left. A message's age is counted from when its
-- reply window closed (a window still open is never due, however old), or, for a message
-- without a window, from its last change.

-- name: RetentionContentDue :many
-- Messages whose content is still stored and due for erasure (the partial index
-- inbound_messages_content_kept holds only them, oldest first): the window closed, or
-- the message without a window last changed, before the cutoff. created_at before the
-- cutoff is implied (a window closes after its message arrives) and lets the index bound
-- the scan.
SELECT m.message_key::text AS message_key, m.account_key::text AS account_key, m.status::text AS status
FROM inbound_messages AS m
LEFT JOIN reply_windows AS w ON w.source_message_key = m.message_key
WHERE m.erased_at IS NULL AND m.created_at < sqlc.arg(cutoff)::timestamptz
  AND CASE WHEN w.reply_window_id IS NULL THEN m.updated_at < sqlc.arg(cutoff)::timestamptz
           ELSE w.state <> 'open' AND w.updated_at < sqlc.arg(cutoff)::timestamptz END
ORDER BY m.created_at, m.message_key
LIMIT sqlc.arg(max_rows)::integer;

-- name: RetentionRowsDue :many
-- Messages whose content is erased (by retention or by starter forget) and whose rows are
-- due for deletion, by the same clock as RetentionContentDue (index
-- inbound_messages_erased). A row is deleted only after its content was erased.
SELECT m.message_key::text AS message_key
FROM inbound_messages AS m
LEFT JOIN reply_windows AS w ON w.source_message_key = m.message_key
WHERE m.erased_at IS NOT NULL AND m.created_at < sqlc.arg(cutoff)::timestamptz
  AND CASE WHEN w.reply_window_id IS NULL THEN m.updated_at < sqlc.arg(cutoff)::timestamptz
           ELSE w.state <> 'open' AND w.updated_at < sqlc.arg(cutoff)::timestamptz END
ORDER BY m.created_at, m.message_key
LIMIT sqlc.arg(max_rows)::integer;

-- name: RetentionAttemptsOfWindows :many
-- The send attempts of the windows (index send_attempts_by_window).
SELECT attempt_id::text AS attempt_id FROM send_attempts
WHERE reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[]);

-- name: RetentionDeleteHeldReplies :execrows
-- Held replies written in the windows, or carried by one of their attempts.
DELETE FROM held_replies
WHERE reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[])
   OR attempt_id = ANY(sqlc.arg(attempt_ids)::text[]);

-- name: RetentionDeleteMCPOffers :execrows
DELETE FROM mcp_offers WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: RetentionDeleteAttempts :execrows
DELETE FROM send_attempts WHERE reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[]);

-- name: RetentionDeleteSessions :execrows
-- The windows' agent sessions (their staged media go with them: ON DELETE CASCADE).
DELETE FROM agent_sessions WHERE reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[]);

-- name: RetentionDeleteImages :execrows
DELETE FROM inbound_images WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: RetentionDeleteWindows :execrows
-- The windows (their sealed context tokens and staged media go with them: ON DELETE CASCADE).
DELETE FROM reply_windows WHERE reply_window_id = ANY(sqlc.arg(reply_window_ids)::bigint[]);

-- name: RetentionDeleteMessages :execrows
DELETE FROM inbound_messages WHERE message_key = ANY(sqlc.arg(message_keys)::text[]);

-- name: RetentionDeleteQuarantinedPages :execrows
DELETE FROM quarantined_pages
WHERE quarantine_id IN (SELECT q.quarantine_id FROM quarantined_pages AS q
                        WHERE q.created_at < sqlc.arg(cutoff)::timestamptz
                        ORDER BY q.created_at LIMIT sqlc.arg(max_rows)::integer);

-- name: RetentionDeleteEnrollmentAudit :execrows
DELETE FROM enrollment_audit
WHERE audit_id IN (SELECT a.audit_id FROM enrollment_audit AS a
                   WHERE a.completed_at < sqlc.arg(cutoff)::timestamptz
                   ORDER BY a.completed_at LIMIT sqlc.arg(max_rows)::integer);

-- name: RetentionDeleteRouteAudit :execrows
DELETE FROM route_audit
WHERE audit_id IN (SELECT a.audit_id FROM route_audit AS a
                   WHERE a.changed_at < sqlc.arg(cutoff)::timestamptz
                   ORDER BY a.changed_at LIMIT sqlc.arg(max_rows)::integer);

-- name: RetentionDeleteForgetAudit :execrows
DELETE FROM forget_audit
WHERE audit_id IN (SELECT a.audit_id FROM forget_audit AS a
                   WHERE a.completed_at < sqlc.arg(cutoff)::timestamptz
                   ORDER BY a.completed_at LIMIT sqlc.arg(max_rows)::integer);

-- name: RetentionDeleteWebUISessions :execrows
DELETE FROM webui_sessions
WHERE id_hash IN (SELECT s.id_hash FROM webui_sessions AS s
                  WHERE s.expires_at <= sqlc.arg(now)::timestamptz
                  ORDER BY s.expires_at LIMIT sqlc.arg(max_rows)::integer);

-- name: RetentionDeleteWebUIOwnerLinks :execrows
DELETE FROM webui_owner_links
WHERE id_hash IN (SELECT o.id_hash FROM webui_owner_links AS o
                  WHERE o.expires_at <= sqlc.arg(now)::timestamptz
                  ORDER BY o.expires_at LIMIT sqlc.arg(max_rows)::integer);

-- name: CommitAsynchronously :exec
-- The transaction commits without waiting for its WAL to reach disk (synchronous_commit
-- off for it alone): a purge batch, which the next run repeats if a crash of PostgreSQL
-- loses it.
SELECT set_config('synchronous_commit', 'off', true);
