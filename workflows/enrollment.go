package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Final statuses of an enrollment (besides iLink's own while it runs).
const (
	EnrollmentConfirmed    = "confirmed"
	EnrollmentExpired      = "expired"
	EnrollmentCancelled    = "cancelled"
	EnrollmentBlocked      = "verify_code_blocked"
	EnrollmentAlreadyBound = "already_bound"
)

type enrollment struct {
	in       wfapi.EnrollmentInput
	st       wfapi.EnrollmentState
	qrcode   string
	deadline time.Time
	verify   workflow.ReceiveChannel
	cancel   workflow.ReceiveChannel
}

// Enrollment drives one QR login (design.md §4): it records the offer, fetches the QR
// code, exposes its state through a query, polls the QR status, follows redirects, waits
// for a verification-code signal when iLink asks for one, accepts cancel, expires on a
// timer, and on confirmation runs the confirm transaction (inside the activity: the bot
// token never enters history), starts or rotates the account's poller and stops the
// pollers of the accounts the new binding replaced.
func Enrollment(ctx workflow.Context, in wfapi.EnrollmentInput) (wfapi.EnrollmentState, error) {
	if in.Lifetime <= 0 {
		in.Lifetime = wfapi.Duration(5 * time.Minute)
	}
	if in.PollGap <= 0 {
		in.PollGap = wfapi.Duration(time.Second)
	}
	e := &enrollment{
		in:       in,
		st:       wfapi.EnrollmentState{OfferID: in.OfferID, Status: "starting"},
		deadline: workflow.Now(ctx).Add(in.Lifetime.D()),
		verify:   workflow.GetSignalChannel(ctx, wfapi.SignalVerifyCode),
		cancel:   workflow.GetSignalChannel(ctx, wfapi.SignalCancel),
	}
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryEnrollmentState, func() (wfapi.EnrollmentState, error) {
		return e.st, nil
	}); err != nil {
		return e.st, err
	}
	if err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), acts.CreateOffer, activities.OfferInput{
		OfferID: in.OfferID, RequestedBy: in.RequestedBy, ExpiresAt: e.deadline, Now: workflow.Now(ctx),
	}).Get(ctx, nil); err != nil {
		return e.finish(ctx, "failed", err.Error())
	}
	var qr activities.QRCodeOutput
	if err := workflow.ExecuteActivity(withOptions(ctx, upstreamOptions), acts.FetchQRCode, in.OfferID).Get(ctx, &qr); err != nil {
		return e.finish(ctx, "failed", err.Error())
	}
	e.qrcode, e.st.QRContent, e.st.Status = qr.QRCode, qr.QRContent, "wait"

	code := ""
	for {
		if e.cancel.ReceiveAsync(nil) {
			return e.finish(ctx, EnrollmentCancelled, "")
		}
		if !workflow.Now(ctx).Before(e.deadline) {
			return e.finish(ctx, EnrollmentExpired, "")
		}
		var res activities.QRPollOutput
		err := workflow.ExecuteActivity(withOptions(ctx, upstreamOptions), acts.PollQRStatus, activities.QRPollInput{
			OfferID: in.OfferID, QRCode: e.qrcode, Host: e.st.Host, VerifyCode: code, Now: workflow.Now(ctx),
		}).Get(ctx, &res)
		sent := code != ""
		code = ""
		if err != nil {
			return e.finish(ctx, "failed", err.Error())
		}
		if sent && (res.Status == "need_verifycode" || res.Status == "verify_code_blocked") {
			e.st.WrongCodes++ // iLink refused the code (state only: no command changes)
		}
		e.st.Status = res.Status
		switch res.Status {
		case "need_verifycode":
			e.st.NeedsCode = true
			var sig wfapi.VerifyCodeSignal
			if !e.waitFor(ctx, e.deadline.Sub(workflow.Now(ctx)), e.verify) {
				continue // cancelled or expired: evaluated at the top of the loop
			}
			e.verify.Receive(ctx, &sig)
			code, e.st.NeedsCode = sig.Code, false
		case "verify_code_blocked":
			return e.finish(ctx, EnrollmentBlocked, "too many wrong verification codes")
		case "expired":
			return e.finish(ctx, EnrollmentExpired, "")
		case "scaned_but_redirect":
			if res.RedirectHost != "" {
				e.st.Host = res.RedirectHost
			}
		case "binded_redirect":
			return e.finish(ctx, EnrollmentAlreadyBound, "")
		case "confirmed":
			return e.confirmed(ctx, res.Confirmed)
		default: // wait, scaned, and anything new: poll again after the gap
			e.waitFor(ctx, in.PollGap.D(), nil)
		}
	}
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
		return e.finish(ctx, "failed", "confirmation without an account")
	}
	e.st.AccountKey, e.st.Generation, e.st.Replaced = c.AccountKey, c.Generation, c.ReplacedAccountKeys
	e.carryAccount(ctx, c.AccountKey)
	sctx := withOptions(ctx, storeOptions)
	if len(c.ReplacedAccountKeys) > 0 {
		if err := workflow.ExecuteActivity(sctx, acts.StopPollers, c.ReplacedAccountKeys).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("stopping replaced pollers failed", "error", err)
		}
	}
	if len(c.CancelledWindowIDs) > 0 {
		if err := workflow.ExecuteActivity(sctx, acts.SyncWindows, activities.WindowsInput{Retired: c.CancelledWindowIDs}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("retiring cancelled windows failed", "error", err)
		}
	}
	if err := workflow.ExecuteActivity(sctx, acts.StartPoller, activities.AccountRef{
		AccountKey: c.AccountKey, Generation: c.Generation,
	}).Get(ctx, nil); err != nil {
		e.st.Status, e.st.Error = EnrollmentConfirmed, "poller not started: "+err.Error()
		return e.st, nil
	}
	e.st.Status = EnrollmentConfirmed
	return e.st, nil
}

// carryAccount gives the enrollment the account it confirmed as its IlinkAccount search
// attribute (unknown when it started), so that the account's workflows list it too.
// Histories recorded before this rule replay without it.
func (e *enrollment) carryAccount(ctx workflow.Context, accountKey string) {
	if workflow.GetVersion(ctx, "enrollment-carries-its-account", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, wfapi.AccountAttribute.ValueSet(accountKey)); err != nil {
		workflow.GetLogger(ctx).Warn("setting the enrollment's account search attribute failed", "account", accountKey, "error", err)
	}
}

// finish ends an unconfirmed enrollment: its offer is closed.
func (e *enrollment) finish(ctx workflow.Context, status, msg string) (wfapi.EnrollmentState, error) {
	e.st.Status, e.st.Error, e.st.NeedsCode = status, msg, false
	err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), acts.CloseOffer,
		activities.CloseOfferInput{OfferID: e.in.OfferID, Now: workflow.Now(ctx)}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("closing the offer failed", "offer", e.in.OfferID, "error", err)
	}
	return e.st, nil
}
