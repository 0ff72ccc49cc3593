// Package storetest registers the accounts tests need through the store's enrollment
// path, the one production takes: a login offer, its scan, its confirmation. The store
// has no other way in for an account, so a test account is one a user could have enrolled.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// Enroll runs one enrollment at now: it offers a login (in.OfferID, or a fresh one when
// empty), marks it scanned and confirms it with in (ConfirmEnrollment). An AccountGeneration
// of 0 means 1 (a new bot), a MaxAccounts of 0 no bound worth mentioning.
func Enroll(ctx context.Context, st *store.Store, now time.Time, in store.ConfirmInput) (store.ConfirmResult, error) {
	if in.OfferID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return store.ConfirmResult{}, err
		}
		in.OfferID = "qo_test_" + hex.EncodeToString(b[:])
	}
	if in.AccountGeneration == 0 {
		in.AccountGeneration = 1
	}
	if in.MaxAccounts == 0 {
		in.MaxAccounts = math.MaxInt32
	}
	if _, err := st.CreateLoginOffer(ctx, now, in.OfferID, "storetest", now.Add(time.Hour)); err != nil {
		return store.ConfirmResult{}, err
	}
	if err := st.MarkOfferScanned(ctx, now, in.OfferID); err != nil {
		return store.ConfirmResult{}, err
	}
	return st.ConfirmEnrollment(ctx, now, in)
}

// RegisterAccount enrolls a new bot (generation 1) and returns its account.
func RegisterAccount(ctx context.Context, st *store.Store, now time.Time, in store.ConfirmInput) (store.Account, error) {
	res, err := Enroll(ctx, st, now, in)
	return res.Account, err
}
