package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// script runs steps against the simulator's QR session at the given workflow times.
func (r *rig) script(steps map[time.Duration]func()) {
	for at, step := range steps {
		r.env.RegisterDelayedCallback(step, at)
	}
}

func (r *rig) enroll(offer string, lifetime time.Duration) wfapi.EnrollmentState {
	r.t.Helper()
	r.env.ExecuteWorkflow(workflows.Enrollment, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "test",
		Lifetime: wfapi.Duration(lifetime), PollGap: wfapi.Duration(time.Second)})
	if err := r.env.GetWorkflowError(); err != nil {
		r.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := r.env.GetWorkflowResult(&st); err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *rig) must(err error) {
	if err != nil {
		r.t.Error(err)
	}
}

func TestEnrollmentConfirmedRegistersAccountAndStartsPoller(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	r.script(map[time.Duration]func(){
		2 * time.Second: func() { _, err := r.ctl.ScanQR(r.ctx, "", ""); r.must(err) },
		4 * time.Second: func() { _, err := r.ctl.ConfirmQR(r.ctx, ""); r.must(err) },
	})
	st := r.enroll("qo_confirmed", time.Minute)
	if st.Status != vocab.EnrollmentConfirmed || st.AccountKey == "" || st.Generation != 1 {
		t.Fatalf("enrollment ended %+v", st)
	}
	if len(r.started) != 1 || r.started[0].AccountKey != st.AccountKey {
		t.Fatalf("poller starts %+v", r.started)
	}
	a, err := r.store.GetAccount(r.ctx, st.AccountKey)
	if err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("account %+v %v", a, err)
	}
	if n := countRows(r, "SELECT count(*) FROM login_offers"); n != 0 {
		t.Fatal("a confirmed offer must be deleted")
	}
}

func TestEnrollmentExpiresOnItsTimer(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	start := time.Now()
	r.env.SetStartTime(start)
	st := r.enroll("qo_expired", 30*time.Second)
	if st.Status != vocab.EnrollmentExpired {
		t.Fatalf("status %q, want expired", st.Status)
	}
	if r.env.Now().Sub(start) < 30*time.Second {
		t.Fatal("expired before its lifetime")
	}
	if n := countRows(r, "SELECT count(*) FROM login_offers"); n != 0 {
		t.Fatal("an expired offer must be closed")
	}
}

func TestEnrollmentNeedVerifyCodeIsAnsweredBySignal(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	r.script(map[time.Duration]func(){
		2 * time.Second: func() { _, err := r.ctl.ScanQR(r.ctx, "", ""); r.must(err) },
		3 * time.Second: func() { _, err := r.ctl.RequireVerifyCode(r.ctx, "", "246810"); r.must(err) },
		6 * time.Second: func() {
			if st := r.queryEnrollment(); !st.NeedsCode {
				t.Errorf("state before the code: %+v, want NeedsCode", st)
			}
			r.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: "246810"})
		},
		9 * time.Second: func() { _, err := r.ctl.ConfirmQR(r.ctx, ""); r.must(err) },
	})
	st := r.enroll("qo_verify", time.Minute)
	if st.Status != vocab.EnrollmentConfirmed {
		t.Fatalf("enrollment ended %+v", st)
	}
}

func TestEnrollmentVerifyCodeBlockedEndsIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	steps := map[time.Duration]func(){
		2 * time.Second: func() { _, err := r.ctl.ScanQR(r.ctx, "", ""); r.must(err) },
		3 * time.Second: func() { _, err := r.ctl.RequireVerifyCode(r.ctx, "", "246810"); r.must(err) },
	}
	for i := 0; i < 5; i++ {
		steps[time.Duration(6+3*i)*time.Second] = func() {
			r.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: "000000"})
		}
	}
	r.script(steps)
	st := r.enroll("qo_blocked", time.Minute)
	if st.Status != vocab.EnrollmentBlocked {
		t.Fatalf("enrollment ended %+v, want verify_code_blocked", st)
	}
}

func TestEnrollmentFollowsScanedButRedirect(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	host := strings.TrimPrefix(r.srv.URL, "http://")
	r.script(map[time.Duration]func(){
		2 * time.Second: func() { _, err := r.ctl.RedirectQR(r.ctx, "", host); r.must(err) },
		5 * time.Second: func() { _, err := r.ctl.ConfirmQR(r.ctx, ""); r.must(err) },
	})
	st := r.enroll("qo_redirect", time.Minute)
	if st.Status != vocab.EnrollmentConfirmed || st.Host != host {
		t.Fatalf("enrollment ended %+v, want confirmed at the redirect host %s", st, host)
	}
}

func TestEnrollmentBindedRedirectKeepsExistingBot(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	existing := r.bot()
	r.script(map[time.Duration]func(){
		2 * time.Second: func() { _, err := r.ctl.ScanQR(r.ctx, "", existing.info.Owner); r.must(err) },
	})
	st := r.enroll("qo_binded", time.Minute)
	if st.Status != vocab.EnrollmentAlreadyBound {
		t.Fatalf("enrollment ended %+v, want already_bound", st)
	}
	if n := countRows(r, "SELECT count(*) FROM accounts"); n != 1 {
		t.Fatalf("%d accounts: binded_redirect must not register a bot", n)
	}
}

func TestEnrollmentCancelClosesTheOffer(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	r.script(map[time.Duration]func(){
		3 * time.Second: func() { r.env.SignalWorkflow(wfapi.SignalCancel, nil) },
	})
	st := r.enroll("qo_cancel", time.Minute)
	if st.Status != vocab.EnrollmentCancelled {
		t.Fatalf("enrollment ended %+v, want cancelled", st)
	}
	if n := countRows(r, "SELECT count(*) FROM login_offers"); n != 0 {
		t.Fatal("a cancelled offer must be closed")
	}
}

func (r *rig) queryEnrollment() wfapi.EnrollmentState {
	r.t.Helper()
	v, err := r.env.QueryWorkflow(wfapi.QueryEnrollmentState)
	if err != nil {
		r.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := v.Get(&st); err != nil {
		r.t.Fatal(err)
	}
	return st
}
