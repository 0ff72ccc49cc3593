package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

type enrollment struct {
	in       wfapi.EnrollmentInput
	st       wfapi.EnrollmentState
	qrcode   string
	deadline time.Time
	verify   workflow.ReceiveChannel
	cancel   workflow.ReceiveChannel
}

// Enrollment drives one QR login: it records the offer, fetches the QR
// code, exposes its state through a query, polls the QR status, replaces a QR code iLink
// reports expired (up to MaxQRRefreshes times, while its own lifetime lasts), follows
// redirects, waits for a verification-code signal when iLink asks for one, accepts
// cancel, expires on a timer, and on confirmation runs the confirm transaction (inside
// the activity: the bot token never enters history), starts or rotates the account's
// poller and stops the pollers of the accounts the new binding replaced.
func Enrollment(ctx workflow.Context, in wfapi.EnrollmentInput) (wfapi.EnrollmentState, error) {
	if in.Lifetime <= 0 {
		in.Lifetime = wfapi.Duration(5 * time.Minute)
	}
	if in.PollGap <= 0 {
		in.PollGap = wfapi.Duration(time.Second)
	}
	if in.QRLifetime <= 0 {
		in.QRLifetime = wfapi.Duration(vocab.DefaultQRLifetime)
	}
	switch {
	case in.MaxQRRefreshes == 0:
		in.MaxQRRefreshes = vocab.DefaultQRRefreshes
	case in.MaxQRRefreshes < 0:
		in.MaxQRRefreshes = 0
	}
	deadline := workflow.Now(ctx).Add(in.Lifetime.D())
	e := &enrollment{
		in: in,
		st: wfapi.EnrollmentState{OfferID: in.OfferID, Status: vocab.EnrollmentStarting, ExpiresAt: deadline,
			QRRefreshesLeft: in.MaxQRRefreshes, CodeAttemptsLeft: vocab.MaxVerifyCodeAttempts},
		deadline: deadline,
		verify:   workflow.GetSignalChannel(ctx, wfapi.SignalVerifyCode),
		cancel:   workflow.GetSignalChannel(ctx, wfapi.SignalCancel),
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryEnrollmentState, func() (wfapi.EnrollmentState, error) {
		return e.st, nil
	}); err != nil {
		return e.st, err
	}
	if err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.CreateOffer, activities.OfferInput{
		OfferID: in.OfferID, RequestedBy: in.RequestedBy, ExpiresAt: e.deadline, Now: workflow.Now(ctx),
	}).Get(ctx, nil); err != nil {
		return e.finish(ctx, vocab.EnrollmentFailed, err.Error())
	}
	if err := e.fetchQR(ctx); err != nil {
		return e.finish(ctx, vocab.EnrollmentFailed, err.Error())
	}

	code := ""
	for {
		if e.cancel.ReceiveAsync(nil) {
			return e.finish(ctx, vocab.EnrollmentCancelled, "")
		}
		if !workflow.Now(ctx).Before(e.deadline) {
			return e.finish(ctx, vocab.EnrollmentExpired, "")
		}
		var res activities.QRPollOutput
		err := workflow.ExecuteActivity(withOptions(ctx, upstreamOptions), activities.PollQRStatus, activities.QRPollInput{
			OfferID: in.OfferID, QRCode: e.qrcode, Host: e.st.Host, VerifyCode: code, Now: workflow.Now(ctx),
		}).Get(ctx, &res)
		sent := code != ""
		code = ""
		if err != nil {
			return e.finish(ctx, vocab.EnrollmentFailed, err.Error())
		}
		if sent && (res.Status == vocab.EnrollmentNeedsCode || res.Status == vocab.EnrollmentBlocked) {
			e.st.WrongCodes++ // iLink refused the code (state only: no command changes)
			e.st.CodeAttemptsLeft = max(vocab.MaxVerifyCodeAttempts-e.st.WrongCodes, 0)
		}
		if res.Status == vocab.EnrollmentExpired && e.st.QRRefreshesLeft > 0 && workflow.Now(ctx).Before(e.deadline) {
			// iLink's QR code expired, the enrollment has not: show a new one.
			e.st.QRRefreshesLeft--
			if err := e.fetchQR(ctx); err != nil {
				return e.finish(ctx, vocab.EnrollmentFailed, err.Error())
			}
			continue
		}
		e.st.Status = res.Status
		switch res.Status {
		case vocab.EnrollmentNeedsCode:
			e.st.NeedsCode = true
			var sig wfapi.VerifyCodeSignal
			if !e.waitFor(ctx, e.deadline.Sub(workflow.Now(ctx)), e.verify) {
				continue // cancelled or expired: evaluated at the top of the loop
			}
			e.verify.Receive(ctx, &sig)
			code, e.st.NeedsCode = sig.Code, false
		case vocab.EnrollmentBlocked:
			e.st.CodeAttemptsLeft = 0
			return e.finish(ctx, vocab.EnrollmentBlocked, "too many wrong verification codes")
		case vocab.EnrollmentExpired:
			return e.finish(ctx, vocab.EnrollmentExpired, "")
		case vocab.EnrollmentRedirect:
			if res.RedirectHost != "" {
				e.st.Host = res.RedirectHost
			}
		case vocab.EnrollmentBindedRedirect:
			return e.finish(ctx, vocab.EnrollmentAlreadyBound, "")
		case vocab.EnrollmentConfirmed:
			return e.confirmed(ctx, res.Confirmed)
		default: // wait, scaned, and anything new: poll again after the gap
			e.waitFor(ctx, in.PollGap.D(), nil)
		}
	}
}

// fetchQR asks iLink for a QR code and shows it: the next one in QRSerial, scannable
// until QRExpiresAt, waiting to be scanned, polled at the default host (a redirect
// belonged to the previous code's scan), with no verification code asked or refused yet.
func (e *enrollment) fetchQR(ctx workflow.Context) error {
	var qr activities.QRCodeOutput
	if err := workflow.ExecuteActivity(withOptions(ctx, upstreamOptions), activities.FetchQRCode, e.in.OfferID).Get(ctx, &qr); err != nil {
		return err
	}
	expires := workflow.Now(ctx).Add(e.in.QRLifetime.D())
	if expires.After(e.deadline) {
		expires = e.deadline
	}
	e.qrcode = qr.QRCode
	e.st.QRContent, e.st.QRSerial, e.st.QRExpiresAt = qr.QRContent, e.st.QRSerial+1, expires
	e.st.Status, e.st.Host, e.st.NeedsCode = vocab.EnrollmentWaiting, "", false
	e.st.WrongCodes, e.st.CodeAttemptsLeft = 0, vocab.MaxVerifyCodeAttempts
	return nil
}

// waitFor sleeps d or until ch (when given) or cancel has a message; it reports whether
// ch has one.
func (e *enrollment) waitFor(ctx workflow.Context, d time.Duration, ch workflow.ReceiveChannel) bool {
	chans := []workflow.ReceiveChannel{e.cancel}
	if ch != nil {
		chans = append(chans, ch)
	}
	sleepOrSignal(ctx, d, chans...)
	if ch == nil {
		return false
	}
	var ok bool
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) { ok = true })
	sel.AddDefault(func() {})
	sel.Select(ctx)
	return ok
}

func (e *enrollment) confirmed(ctx workflow.Context, c *activities.Confirmed) (wfapi.EnrollmentState, error) {
	if c == nil {
		return e.finish(ctx, vocab.EnrollmentFailed, "confirmation without an account")
	}
	e.st.AccountKey, e.st.Generation, e.st.Replaced = c.AccountKey, c.Generation, c.ReplacedAccountKeys
	e.carryAccount(ctx, c.AccountKey)
	sctx := withOptions(ctx, storeOptions)
	if len(c.ReplacedAccountKeys) > 0 {
		if err := workflow.ExecuteActivity(sctx, activities.StopPollers, c.ReplacedAccountKeys).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("stopping replaced pollers failed", "error", err)
		}
	}
	if len(c.CancelledWindowIDs) > 0 {
		if err := workflow.ExecuteActivity(sctx, activities.SyncWindows, activities.WindowsInput{Retired: c.CancelledWindowIDs}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("retiring cancelled windows failed", "error", err)
		}
	}
	if err := workflow.ExecuteActivity(sctx, activities.StartPoller, activities.AccountRef{
		AccountKey: c.AccountKey, Generation: c.Generation,
	}).Get(ctx, nil); err != nil {
		e.st.Status, e.st.Error = vocab.EnrollmentConfirmed, "poller not started: "+err.Error()
		return e.st, nil
	}
	e.st.Status = vocab.EnrollmentConfirmed
	return e.st, nil
}

// carryAccount gives the enrollment the account it confirmed as its IlinkAccount search
// attribute (unknown when it started), so that the account's workflows list it too.
func (e *enrollment) carryAccount(ctx workflow.Context, accountKey string) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, wfapi.AccountAttribute.ValueSet(accountKey)); err != nil {
		workflow.GetLogger(ctx).Warn("setting the enrollment's account search attribute failed", "account", accountKey, "error", err)
	}
}

// finish ends an unconfirmed enrollment: its offer is closed.
func (e *enrollment) finish(ctx workflow.Context, status, msg string) (wfapi.EnrollmentState, error) {
	e.st.Status, e.st.Error, e.st.NeedsCode = status, msg, false
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), activities.CloseOffer,
		activities.CloseOfferInput{OfferID: e.in.OfferID, Now: workflow.Now(ctx)}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("closing the offer failed", "offer", e.in.OfferID, "error", err)
	}
	return e.st, nil
}
