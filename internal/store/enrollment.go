package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Login offer statuses.
const (
	OfferWaiting = "waiting"
	OfferScanned = "scanned"
)

// Offer is a QR login offer.
type Offer struct {
	OfferID     string
	Status      string
	RequestedBy string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

func offerFrom(r dbq.LoginOffer) Offer {
	return Offer{OfferID: r.OfferID, Status: r.Status, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
}

// CreateLoginOffer records a new QR login offer that lives until expiresAt. Creating the
// same offer again (a retried activity) returns the stored offer.
func (s *Store) CreateLoginOffer(ctx context.Context, now time.Time, offerID, requestedBy string, expiresAt time.Time) (Offer, error) {
	if err := validNow(now); err != nil {
		return Offer{}, err
	}
	if err := validOfferID(offerID); err != nil {
		return Offer{}, err
	}
	if !expiresAt.After(now) || expiresAt.Sub(now) > 24*time.Hour {
		return Offer{}, fail(vocab.CodeInvalidInput, "offer expiry must be within 24 hours in the future")
	}
	if len(requestedBy) > 256 {
		return Offer{}, fail(vocab.CodeInvalidInput, "requested-by is too long")
	}
	var out Offer
	err := s.inTx(ctx, "create login offer", func(q *dbq.Queries) error {
		if cur, err := q.GetLoginOffer(ctx, offerID); err == nil {
			out = offerFrom(cur)
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := q.GetEnrollmentAudit(ctx, offerID); err == nil {
			return fail(vocab.CodeInvalidInput, "login offer was already confirmed")
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := q.InsertLoginOffer(ctx, dbq.InsertLoginOfferParams{
			OfferID: offerID, RequestedBy: requestedBy, CreatedAt: now, ExpiresAt: expiresAt,
		}); err != nil {
			return err
		}
		row, err := q.GetLoginOffer(ctx, offerID)
		out = offerFrom(row)
		return err
	})
	return out, err
}

// MarkOfferScanned records that the QR code of a live offer was scanned.
func (s *Store) MarkOfferScanned(ctx context.Context, now time.Time, offerID string) error {
	if err := validNow(now); err != nil {
		return err
	}
	if err := validOfferID(offerID); err != nil {
		return err
	}
	return s.inTx(ctx, "mark offer scanned", func(q *dbq.Queries) error {
		n, err := q.MarkLoginOfferScanned(ctx, now, offerID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(vocab.CodeInvalidInput, "unknown or inactive login offer")
		}
		return nil
	})
}

// CloseLoginOffer deletes an offer that expired or was cancelled. It reports whether an
// offer was deleted (false when it was already gone).
func (s *Store) CloseLoginOffer(ctx context.Context, now time.Time, offerID string) (bool, error) {
	if err := validNow(now); err != nil {
		return false, err
	}
	if err := validOfferID(offerID); err != nil {
		return false, err
	}
	var closed bool
	err := s.inTx(ctx, "close login offer", func(q *dbq.Queries) error {
		n, err := q.DeleteLoginOffer(ctx, offerID)
		closed = n == 1
		return err
	})
	return closed, err
}

// ConfirmInput confirms an enrollment with the credentials iLink returned.
type ConfirmInput struct {
	OfferID string
	// AccountGeneration must be the account's current generation + 1 (1 for a new bot).
	AccountGeneration int32
	// MaxAccounts bounds the number of active accounts.
	MaxAccounts       int
	ProviderAccountID string
	OwnerPeerID       string
	BaseURL           string
	BotToken          sealing.Secret
}

// ConfirmResult is the outcome of a confirmed enrollment.
type ConfirmResult struct {
	Account Account
	// Registered is true for a new account, false for a rotation of an existing one.
	Registered bool
	// ReplacedAccountKeys are the owner's previous live accounts, now replaced.
	ReplacedAccountKeys []string
	// CancelledWindowIDs are the windows retired by the replacement or the rotation.
	CancelledWindowIDs []int64
	// AlreadyConfirmed is true when this offer had been confirmed before (a retry): the
	// result describes the stored outcome and nothing was written.
	AlreadyConfirmed bool
}

// ConfirmEnrollment confirms a live offer in one transaction: it retires the owner's
// other live accounts as replaced (iLink kills them on a fresh binding), respects the
// maximum number of active accounts, expects generation = current + 1, registers or
// rotates the account, writes the audit row and deletes the offer. A retry after success
// finds the audit row and returns the stored outcome.
func (s *Store) ConfirmEnrollment(ctx context.Context, now time.Time, in ConfirmInput) (ConfirmResult, error) {
	if err := validNow(now); err != nil {
		return ConfirmResult{}, err
	}
	if err := validOfferID(in.OfferID); err != nil {
		return ConfirmResult{}, err
	}
	if in.AccountGeneration < 1 || in.MaxAccounts < 1 {
		return ConfirmResult{}, fail(vocab.CodeInvalidInput, "account generation and max accounts must be positive")
	}
	a, err := validateAccountInput(in.ProviderAccountID, in.OwnerPeerID, in.BaseURL, in.BotToken)
	if err != nil {
		return ConfirmResult{}, err
	}
	var out ConfirmResult
	err = s.inTx(ctx, "confirm enrollment", func(q *dbq.Queries) error {
		if audit, err := q.GetEnrollmentAudit(ctx, in.OfferID); err == nil {
			if audit.AccountKey != a.key || audit.AccountGeneration != in.AccountGeneration {
				return fail(vocab.CodeInvalidInput, "login offer was confirmed for another account")
			}
			row, err := q.GetAccount(ctx, a.key)
			out = ConfirmResult{Account: accountFrom(row), Registered: audit.Result == "registered",
				ReplacedAccountKeys: audit.ReplacedAccountKeys, AlreadyConfirmed: true}
			return err
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		offer, err := q.LockLiveLoginOffer(ctx, in.OfferID, now)
		if err != nil {
			return notFound(err, vocab.CodeInvalidInput, "unknown, expired or inactive login offer")
		}
		existing, err := lockAccount(ctx, q, a.key)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var current int32
		if exists {
			current = existing.Generation
		}
		if in.AccountGeneration != current+1 {
			return fail(vocab.CodeGenerationConflict, "enrollment generation changed")
		}
		// Retire the owner's other live bots: iLink killed them with this binding.
		live, err := q.LiveAccountsOfOwner(ctx, a.owner)
		if err != nil {
			return err
		}
		for _, old := range live {
			if old.AccountKey == a.key {
				continue
			}
			ids, err := s.cancelOpenWindows(ctx, q, now, old.AccountKey, "account_replaced")
			if err != nil {
				return err
			}
			if _, err := q.SetAccountStatus(ctx, dbq.SetAccountStatusParams{
				AccountKey: old.AccountKey, Generation: old.Generation, Status: vocab.AccountReplaced,
				Reason: "replaced by a new binding of the owner", ReplacedBy: &a.key, Now: now,
			}); err != nil {
				return err
			}
			out.ReplacedAccountKeys = append(out.ReplacedAccountKeys, old.AccountKey)
			out.CancelledWindowIDs = append(out.CancelledWindowIDs, ids...)
		}
		if !exists || existing.Status != vocab.AccountActive {
			active, err := q.CountActiveAccounts(ctx)
			if err != nil {
				return err
			}
			if active >= int64(in.MaxAccounts) {
				return fail(vocab.CodeAccountLimitReached, "the maximum of %d active accounts is reached", in.MaxAccounts)
			}
		}
		result := "registered"
		if exists {
			r, err := s.rotate(ctx, q, now, a, current)
			if err != nil {
				return err
			}
			out.Account = r.Account
			out.CancelledWindowIDs = append(out.CancelledWindowIDs, r.CancelledWindowIDs...)
			result = "rotated"
		} else {
			if out.Account, err = s.register(ctx, q, now, a); err != nil {
				return err
			}
			out.Registered = true
		}
		replaced := out.ReplacedAccountKeys
		if replaced == nil {
			replaced = []string{}
		}
		if err := q.InsertEnrollmentAudit(ctx, dbq.InsertEnrollmentAuditParams{
			OfferID: in.OfferID, AccountKey: a.key, AccountGeneration: in.AccountGeneration, Result: result,
			ReplacedAccountKeys: replaced, RequestedBy: offer.RequestedBy, OfferedAt: offer.CreatedAt, CompletedAt: now,
		}); err != nil {
			return err
		}
		n, err := q.DeleteLoginOffer(ctx, in.OfferID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(vocab.CodeAttemptConflict, "login offer changed during confirmation")
		}
		return nil
	})
	return out, err
}
