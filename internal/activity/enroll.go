package activity

import (
	"context"
	"sort"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// maxLocalTokens is how many bot tokens get_bot_qrcode's local_token_list carries.
const maxLocalTokens = 10

// CreateOffer records a QR login offer (idempotent).
func (a *Activities) CreateOffer(ctx context.Context, in activities.OfferInput) error {
	_, err := a.Store.CreateLoginOffer(ctx, nowOr(in.Now), in.OfferID, in.RequestedBy, in.ExpiresAt)
	return storeErr("create login offer", err)
}

// CloseOffer deletes an offer that expired or was cancelled (idempotent).
func (a *Activities) CloseOffer(ctx context.Context, in activities.CloseOfferInput) error {
	_, err := a.Store.CloseLoginOffer(ctx, nowOr(in.Now), in.OfferID)
	return storeErr("close login offer", err)
}

// FetchQRCode asks iLink for a QR code, listing the tokens of our live bots so that iLink
// can answer binded_redirect. An account whose token the sealing keys cannot open is left
// out of the list (logged once per worker process, counted in ilinkflow_accounts_unreadable):
// it never holds up an enrollment.
func (a *Activities) FetchQRCode(ctx context.Context, offerID string) (activities.QRCodeOutput, error) {
	accts, unreadable, err := a.Store.ListActiveAccountsWithSecrets(ctx)
	if err != nil {
		return activities.QRCodeOutput{}, storeErr("list account tokens", err)
	}
	a.noteActiveUnreadable(unreadable)
	sort.SliceStable(accts, func(i, j int) bool { return accts[i].CreatedAt.After(accts[j].CreatedAt) })
	tokens := make([]ilink.Secret, 0, maxLocalTokens)
	for _, acct := range accts {
		if len(tokens) == maxLocalTokens {
			break
		}
		tokens = append(tokens, ilink.Secret(acct.BotToken.Reveal()))
	}
	cl, err := a.client("", "")
	if err != nil {
		return activities.QRCodeOutput{}, upstreamErr("ilink client", err)
	}
	qr, err := cl.GetBotQRCode(ctx, tokens)
	if err != nil {
		a.log().Warn("get_bot_qrcode failed", "offer", offerID, "error", err)
		return activities.QRCodeOutput{}, upstreamErr("get bot qrcode", err)
	}
	return activities.QRCodeOutput{QRCode: qr.QRCode, QRContent: qr.ImageContent}, nil
}

// PollQRStatus polls the QR status once; on "scaned" it marks the offer scanned, on
// "confirmed" it runs the confirm transaction.
//
// The bot token iLink returns on confirmation is sealed into the store inside this
// activity and never appears in its result. A retry after a confirmation that was
// committed (iLink repeats "confirmed") finds the stored outcome.
func (a *Activities) PollQRStatus(ctx context.Context, in activities.QRPollInput) (activities.QRPollOutput, error) {
	cl, err := a.client("", "")
	if err != nil {
		return activities.QRPollOutput{}, upstreamErr("ilink client", err)
	}
	st, err := cl.GetQRCodeStatus(ctx, ilink.QRStatusRequest{QRCode: in.QRCode, VerifyCode: in.VerifyCode, Host: in.Host})
	if err != nil {
		return activities.QRPollOutput{}, upstreamErr("get qrcode status", err)
	}
	out := activities.QRPollOutput{Status: string(st.Status), RedirectHost: st.RedirectHost}
	t := nowOr(in.Now)
	switch st.Status {
	case ilink.QRScanned:
		if err := a.Store.MarkOfferScanned(ctx, t, in.OfferID); err != nil {
			return activities.QRPollOutput{}, storeErr("mark offer scanned", err)
		}
	case ilink.QRConfirmed:
		c, err := a.confirm(ctx, t, in.OfferID, st)
		if err != nil {
			return activities.QRPollOutput{}, err
		}
		out.Confirmed = c
	}
	return out, nil
}

// confirm runs the confirm transaction for a confirmed QR login: generation = the
// account's current generation + 1 (1 for a new bot), the returned base URL (or the
// configured one), the returned bot token sealed by the store.
func (a *Activities) confirm(ctx context.Context, t time.Time, offerID string, st *ilink.QRCodeStatus) (*activities.Confirmed, error) {
	key := store.AccountKey(st.ILinkBotID)
	var current int32
	switch acct, err := a.Store.GetAccount(ctx, key); {
	case err == nil:
		current = acct.Generation
	case store.CodeOf(err) != vocab.CodeAccountNotFound:
		return nil, storeErr("read account", err)
	}
	baseURL := st.BaseURL
	if baseURL == "" {
		baseURL = a.Config.Client.BaseURL
	}
	if baseURL == "" {
		baseURL = ilink.DefaultBaseURL
	}
	in := store.ConfirmInput{
		OfferID: offerID, AccountGeneration: current + 1, MaxAccounts: a.cfg().MaxAccounts,
		ProviderAccountID: st.ILinkBotID, OwnerPeerID: st.ILinkUserID, BaseURL: baseURL,
		BotToken: sealing.NewSecret(st.BotToken.Reveal()),
	}
	res, err := a.Store.ConfirmEnrollment(ctx, t, in)
	if err != nil && current > 0 && store.CodeOf(err) == vocab.CodeInvalidInput {
		// A retry after a committed confirmation: the account is already at the
		// generation this offer confirmed, and the audit row says so. Asking for that
		// generation writes nothing unless the audit matches (then it returns the stored
		// outcome).
		in.AccountGeneration = current
		if again, aerr := a.Store.ConfirmEnrollment(ctx, t, in); aerr == nil && again.AlreadyConfirmed {
			res, err = again, nil
		}
	}
	if err != nil {
		return nil, storeErr("confirm enrollment", err)
	}
	return &activities.Confirmed{
		AccountKey: res.Account.AccountKey, Generation: res.Account.Generation, Registered: res.Registered,
		ReplacedAccountKeys: res.ReplacedAccountKeys, CancelledWindowIDs: res.CancelledWindowIDs,
	}, nil
}
