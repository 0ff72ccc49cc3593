-- name: InsertLoginOffer :exec
INSERT INTO login_offers (offer_id, status, requested_by, created_at, expires_at, updated_at)
VALUES ($1, 'waiting', $2, $3, $4, $3);

-- name: GetLoginOffer :one
SELECT * FROM login_offers WHERE offer_id = $1;

-- name: LockLiveLoginOffer :one
SELECT * FROM login_offers
WHERE offer_id = sqlc.arg(offer_id) AND status IN ('waiting', 'scanned') AND expires_at > sqlc.arg(now)
FOR NO KEY UPDATE;

-- name: MarkLoginOfferScanned :execrows
UPDATE login_offers SET status = 'scanned', updated_at = sqlc.arg(now)
WHERE offer_id = sqlc.arg(offer_id) AND status IN ('waiting', 'scanned') AND expires_at > sqlc.arg(now);

-- name: DeleteLoginOffer :execrows
DELETE FROM login_offers WHERE offer_id = $1;

-- name: InsertEnrollmentAudit :exec
INSERT INTO enrollment_audit (
    offer_id, account_key, account_generation, result, replaced_account_keys, requested_by,
    offered_at, completed_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: GetEnrollmentAudit :one
SELECT * FROM enrollment_audit WHERE offer_id = $1;
