package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
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

// A QR code that expires on iLink (the simulator's clock passes its TTL) is replaced by a
// new one, which the user scans and confirms: the account is enrolled, from the second code.
func TestEnrollmentReplacesAnExpiredQRAndEnrollsWithTheNewOne(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	var first, second wfapi.EnrollmentState
	r.script(map[time.Duration]func(){
		2 * time.Second: func() {
			first = r.queryEnrollment()
			_, err := r.ctl.Advance(r.ctx, r.sim.Config().QRTTL) // the first code's lifetime passes on iLink
			r.must(err)
		},
		5 * time.Second: func() {
			second = r.queryEnrollment()
			_, err := r.ctl.ScanQR(r.ctx, "", "") // the newest code: the one shown, checked below
			r.must(err)
		},
		7 * time.Second: func() { _, err := r.ctl.ConfirmQR(r.ctx, ""); r.must(err) },
	})
	st := r.enroll("qo_refreshed", time.Minute)
	if first.QRSerial != 1 || first.Status != vocab.EnrollmentWaiting || first.QRContent == "" {
		t.Fatalf("state before the QR code expired %+v, want the first code waiting", first)
	}
	if second.QRSerial != 2 || second.Status != vocab.EnrollmentWaiting || second.QRContent == first.QRContent ||
		second.QRRefreshesLeft != vocab.DefaultQRRefreshes-1 {
		t.Fatalf("state after the QR code expired %+v, want a second, different code waiting, one refresh fewer", second)
	}
	if st.Status != vocab.EnrollmentConfirmed || st.AccountKey == "" || st.QRSerial != 2 {
		t.Fatalf("enrollment ended %+v, want confirmed with the second QR code", st)
	}
	sessions, err := r.ctl.QRSessions(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 || sessions[0].Status != vocab.EnrollmentExpired || sessions[1].Status != vocab.EnrollmentConfirmed ||
		sessions[1].ImgContent != second.QRContent {
		t.Fatalf("simulator QR sessions %+v, want the first expired and the second (shown after the refresh) confirmed", sessions)
	}
	if a, err := r.store.GetAccount(r.ctx, st.AccountKey); err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("account %+v %v, want active", a, err)
	}
	if len(r.started) != 1 || r.started[0].AccountKey != st.AccountKey {
		t.Fatalf("poller starts %+v, want the new account's", r.started)
	}
}

// The same on the Temporal dev server, in real time, with a worker running the real
// activities: the simulator lets the first QR code expire, the enrollment shows a second
// one (the query through the server says so), a user scans and confirms it, the account
// is enrolled and its poller runs.
func TestEnrollmentOnTheDevServerReplacesAnExpiredQRAndEnrollsWithTheNewOne(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	dev := devserver.Start(t)
	_, tc := dev.NewNamespace(t)
	queue := devserver.TaskQueue(t)
	r.acts.Temporal, r.acts.Config.TaskQueue = tc, queue
	w := worker.New(tc, queue, worker.Options{})
	workflows.Register(w)
	w.RegisterActivity(r.acts)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(r.ctx, 2*time.Minute)
	defer cancel()
	id := wfapi.EnrollmentID("qo_dev_refreshed")
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, wfapi.EnrollmentWorkflow,
		wfapi.EnrollmentInput{OfferID: "qo_dev_refreshed", RequestedBy: "test", Lifetime: wfapi.Duration(5 * time.Minute),
			PollGap: wfapi.Duration(100 * time.Millisecond), QRLifetime: wfapi.Duration(r.sim.Config().QRTTL)})
	if err != nil {
		t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	showing := func(serial int) func() (bool, error) {
		return func() (bool, error) {
			v, err := tc.QueryWorkflow(ctx, id, "", wfapi.QueryEnrollmentState)
			if err != nil {
				return false, err
			}
			if err := v.Get(&st); err != nil {
				return false, err
			}
			return st.QRSerial == serial && st.Status == vocab.EnrollmentWaiting, nil
		}
	}
	testkit.Eventually(t, "the first QR code shown", time.Minute, showing(1))
	first := st
	if _, err := r.ctl.Advance(ctx, r.sim.Config().QRTTL); err != nil { // the first code's lifetime passes on iLink
		t.Fatal(err)
	}
	testkit.Eventually(t, "a second QR code shown", time.Minute, showing(2))
	if st.QRContent == first.QRContent || st.QRRefreshesLeft != vocab.DefaultQRRefreshes-1 || !st.QRExpiresAt.After(first.QRExpiresAt) {
		t.Fatalf("state after the QR code expired %+v (before: %+v), want a new code, scannable later, one refresh fewer", st, first)
	}
	if _, err := r.ctl.ScanQR(ctx, "", ""); err != nil { // the newest code: the one shown, checked below
		t.Fatal(err)
	}
	if _, err := r.ctl.ConfirmQR(ctx, ""); err != nil {
		t.Fatal(err)
	}
	var end wfapi.EnrollmentState
	if err := run.Get(ctx, &end); err != nil {
		t.Fatal(err)
	}
	if end.Status != vocab.EnrollmentConfirmed || end.AccountKey == "" || end.QRSerial != 2 || end.Error != "" {
		t.Fatalf("enrollment ended %+v, want confirmed with the second QR code", end)
	}
	sessions, err := r.ctl.QRSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 2 || sessions[0].Status != vocab.EnrollmentExpired || sessions[1].Status != vocab.EnrollmentConfirmed ||
		sessions[1].ImgContent != st.QRContent {
		t.Fatalf("simulator QR sessions %+v, want the first expired and the second (shown after the refresh) confirmed", sessions)
	}
	if a, err := r.store.GetAccount(ctx, end.AccountKey); err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("account %+v %v, want active", a, err)
	}
	inst, err := r.store.Installation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := tc.DescribeWorkflow(ctx, inst.PollerID(end.AccountKey), "")
	if err != nil || poller.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the new account's poller: %+v %v, want running", poller, err)
	}
	if err := tc.SignalWorkflow(ctx, inst.PollerID(end.AccountKey), "", wfapi.SignalStop, wfapi.StopSignal{Reason: "test over"}); err != nil {
		t.Fatal(err)
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
