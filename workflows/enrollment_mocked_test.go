package workflows_test

// Fast tests of the Enrollment state machine alone: every activity it schedules is mocked
// in the SDK's time-skipping test environment (env.OnActivity), so no database, simulator
// or Temporal server is involved and they run in -short mode. enrollment_test.go runs the
// same workflow with the real activities against PostgreSQL and the simulator's QR login.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// mockedQRPoll is one call of the mocked PollQRStatus: its input and the workflow time it
// ran at.
type mockedQRPoll struct {
	in activities.QRPollInput
	at time.Duration // since mockedStart
}

// mockedEnrollment runs Enrollment with every activity mocked. status answers the n-th
// PollQRStatus (from 1); each PollQRStatus takes pollTakes of workflow time (0: none), and
// then its at is the time it answers. The workflow runs with the input in. Every call is
// recorded.
type mockedEnrollment struct {
	t         *testing.T
	env       *testsuite.TestWorkflowEnvironment
	in        wfapi.EnrollmentInput
	status    func(n int, in activities.QRPollInput) activities.QRPollOutput
	pollTakes time.Duration

	mu        sync.Mutex
	offers    []activities.OfferInput
	fetched   []string        // the offer of each FetchQRCode
	fetchedAt []time.Duration // and when it ran
	polls     []mockedQRPoll
	closed    []time.Duration
	started   []activities.AccountRef
	stopped   [][]string
	synced    []activities.WindowsInput
}

// The QR code FetchQRCode answers first.
const (
	mockedQRCode    = "qr-poll-key"
	mockedQRContent = "https://liteapp.weixin.qq.com/q/mocked"
)

// mockedQR is the QR code the n-th FetchQRCode answers (from 1): the poll key and the
// content to render.
func mockedQR(n int) activities.QRCodeOutput {
	if n == 1 {
		return activities.QRCodeOutput{QRCode: mockedQRCode, QRContent: mockedQRContent}
	}
	return activities.QRCodeOutput{QRCode: fmt.Sprintf("%s-%d", mockedQRCode, n), QRContent: fmt.Sprintf("%s-%d", mockedQRContent, n)}
}

func newMockedEnrollment(t *testing.T) *mockedEnrollment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	m := &mockedEnrollment{t: t, env: suite.NewTestWorkflowEnvironment(),
		in: wfapi.EnrollmentInput{OfferID: "qo_1", RequestedBy: "test"}}
	env := m.env
	env.SetTestTimeout(time.Minute) // wall time without progress; the machine may be loaded
	env.SetStartTime(mockedStart)
	workflows.Register(env)
	env.OnActivity(mockedActs.CreateOffer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OfferInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.offers = append(m.offers, in)
			return nil
		})
	env.OnActivity(mockedActs.FetchQRCode, mock.Anything, mock.Anything).Return(
		func(_ context.Context, offerID string) (activities.QRCodeOutput, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.fetched, m.fetchedAt = append(m.fetched, offerID), append(m.fetchedAt, m.since())
			return mockedQR(len(m.fetched)), nil
		})
	env.OnActivity(mockedActs.PollQRStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.QRPollInput) (activities.QRPollOutput, error) {
			m.mu.Lock()
			m.polls = append(m.polls, mockedQRPoll{in: in, at: m.since()})
			n := len(m.polls)
			m.mu.Unlock()
			if m.status == nil {
				return activities.QRPollOutput{Status: vocab.EnrollmentWaiting}, nil
			}
			return m.status(n, in), nil
		}).AfterFn(func() time.Duration { return m.pollTakes })
	env.OnActivity(mockedActs.CloseOffer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CloseOfferInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.closed = append(m.closed, m.since())
			return nil
		})
	env.OnActivity(mockedActs.StartPoller, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AccountRef) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.started = append(m.started, in)
			return nil
		})
	env.OnActivity(mockedActs.StopPollers, mock.Anything, mock.Anything).Return(
		func(_ context.Context, keys []string) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.stopped = append(m.stopped, keys)
			return nil
		})
	env.OnActivity(mockedActs.SyncWindows, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WindowsInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.synced = append(m.synced, in)
			return nil
		})
	return m
}

// since is the workflow time passed since mockedStart.
func (m *mockedEnrollment) since() time.Duration { return m.env.Now().Sub(mockedStart) }

// at runs f at workflow time d after the start.
func (m *mockedEnrollment) at(d time.Duration, f func()) { m.env.RegisterDelayedCallback(f, d) }

// run runs the enrollment of the offer qo_1 with m.in (by default: the default lifetime,
// 5 minutes, poll gap, 1 s, and QR refreshes, 3), and returns its final state.
func (m *mockedEnrollment) run() wfapi.EnrollmentState {
	m.t.Helper()
	m.env.ExecuteWorkflow(wfapi.EnrollmentWorkflow, m.in)
	if !m.env.IsWorkflowCompleted() {
		m.t.Fatal("the enrollment did not complete")
	}
	if err := m.env.GetWorkflowError(); err != nil {
		m.t.Fatalf("the enrollment failed: %v", err)
	}
	var st wfapi.EnrollmentState
	if err := m.env.GetWorkflowResult(&st); err != nil {
		m.t.Fatal(err)
	}
	return st
}

// query answers the enrollment's state query.
func (m *mockedEnrollment) query() wfapi.EnrollmentState {
	m.t.Helper()
	v, err := m.env.QueryWorkflow(wfapi.QueryEnrollmentState)
	if err != nil {
		m.t.Fatal(err)
	}
	var st wfapi.EnrollmentState
	if err := v.Get(&st); err != nil {
		m.t.Fatal(err)
	}
	return st
}

// cancelAt sends the cancel signal at workflow time d.
func (m *mockedEnrollment) cancelAt(d time.Duration) {
	m.at(d, func() { m.env.SignalWorkflow(wfapi.SignalCancel, nil) })
}

// The offer is recorded with the enrollment's deadline, its QR code fetched, and the
// content to render exposed through the query while the code waits to be scanned; the
// status is polled with the QR code every poll gap.
func TestEnrollmentFetchesTheQRCodeAndShowsItThroughTheQuery(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	var during wfapi.EnrollmentState
	m.at(1500*time.Millisecond, func() { during = m.query() })
	m.cancelAt(3500 * time.Millisecond)
	m.run()
	if len(m.offers) != 1 || m.offers[0].OfferID != "qo_1" || m.offers[0].RequestedBy != "test" ||
		!m.offers[0].ExpiresAt.Equal(mockedStart.Add(5*time.Minute)) {
		t.Fatalf("offers %+v, want qo_1 by test expiring after the 5-minute lifetime", m.offers)
	}
	if len(m.fetched) != 1 || m.fetched[0] != "qo_1" {
		t.Fatalf("QR codes fetched for %v, want qo_1 once", m.fetched)
	}
	if during.Status != vocab.EnrollmentWaiting || during.QRContent != mockedQRContent || during.OfferID != "qo_1" {
		t.Fatalf("state while waiting %+v, want wait with the QR content", during)
	}
	if len(m.polls) != 4 {
		t.Fatalf("%d QR polls in 3.5 s, want 4 (one a second)", len(m.polls))
	}
	for i, p := range m.polls {
		if p.at != time.Duration(i)*time.Second || p.in.QRCode != mockedQRCode || p.in.OfferID != "qo_1" {
			t.Fatalf("QR poll %d at %v with %+v, want at %ds with the fetched QR code", i+1, p.at, p.in, i)
		}
	}
}

// A scanned code is polled again after the gap until it is confirmed; the query shows
// the scan.
func TestEnrollmentPollsAScannedCodeUntilItIsConfirmed(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	var during wfapi.EnrollmentState
	m.at(1500*time.Millisecond, func() { during = m.query() })
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		if n < 3 {
			return activities.QRPollOutput{Status: vocab.EnrollmentScanned}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed, Confirmed: &activities.Confirmed{AccountKey: "ilk_new", Generation: 1}}
	}
	st := m.run()
	if during.Status != vocab.EnrollmentScanned {
		t.Fatalf("state after the scan %+v, want scaned", during)
	}
	if st.Status != vocab.EnrollmentConfirmed || len(m.polls) != 3 || m.polls[2].at != 2*time.Second {
		t.Fatalf("ended %+v after %d polls: want confirmed at the third poll (2s)", st, len(m.polls))
	}
}

// need_verifycode waits for the verify_code signal, polling nothing meanwhile; the code
// goes with the next poll, at once.
func TestEnrollmentNeedVerifyCodeWaitsForTheVerifyCodeSignal(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	var during wfapi.EnrollmentState
	m.at(time.Minute, func() { during = m.query() })
	m.at(2*time.Minute, func() { m.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: "246810"}) })
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		if n == 1 {
			return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed, Confirmed: &activities.Confirmed{AccountKey: "ilk_new", Generation: 1}}
	}
	st := m.run()
	if !during.NeedsCode || during.Status != vocab.EnrollmentNeedsCode {
		t.Fatalf("state while waiting for the code %+v, want need_verifycode", during)
	}
	if len(m.polls) != 2 || m.polls[0].in.VerifyCode != "" || m.polls[1].in.VerifyCode != "246810" || m.polls[1].at != 2*time.Minute {
		t.Fatalf("QR polls %+v: want one without a code, then one with the signalled code at 2m", m.polls)
	}
	if st.Status != vocab.EnrollmentConfirmed || st.NeedsCode || st.WrongCodes != 0 {
		t.Fatalf("ended %+v, want confirmed with no code pending and none wrong", st)
	}
}

// A code iLink refused (it asks for a code again) is counted as wrong, and the next code
// is waited for.
func TestEnrollmentCountsAVerifyCodeILinkRefused(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	for i, code := range []string{"111111", "222222"} {
		m.at(time.Duration(i+1)*time.Minute, func() {
			m.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code})
		})
	}
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		if n < 3 {
			return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed, Confirmed: &activities.Confirmed{AccountKey: "ilk_new", Generation: 1}}
	}
	st := m.run()
	if len(m.polls) != 3 || m.polls[1].in.VerifyCode != "111111" || m.polls[2].in.VerifyCode != "222222" {
		t.Fatalf("QR polls %+v, want the first code, then the second", m.polls)
	}
	if st.Status != vocab.EnrollmentConfirmed || st.WrongCodes != 1 {
		t.Fatalf("ended %+v, want confirmed with one wrong code", st)
	}
}

// Too many wrong codes (verify_code_blocked) end the enrollment and close the offer.
func TestEnrollmentEndsWhenILinkBlocksTheVerifyCode(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentBlocked}
	}
	st := m.run()
	if st.Status != vocab.EnrollmentBlocked || len(m.closed) != 1 || len(m.started) != 0 {
		t.Fatalf("ended %+v, offer closed %d times, %d pollers started: want blocked, closed once, none",
			st, len(m.closed), len(m.started))
	}
}

// The cancel signal ends the enrollment at once, even while it waits for a code, and
// closes the offer.
func TestEnrollmentCancelSignalEndsItAndClosesTheOffer(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
	}
	m.cancelAt(30 * time.Second)
	st := m.run()
	if st.Status != vocab.EnrollmentCancelled || st.NeedsCode {
		t.Fatalf("ended %+v, want cancelled with no code pending", st)
	}
	if len(m.closed) != 1 || m.closed[0] != 30*time.Second {
		t.Fatalf("offer closed at %v, want once at the cancel (30s)", m.closed)
	}
	if len(m.polls) != 1 || len(m.started) != 0 {
		t.Fatalf("%d QR polls, %d pollers started: want 1 and none", len(m.polls), len(m.started))
	}
}

// An enrollment nobody scans expires on its timer at the end of its lifetime and closes
// the offer.
func TestEnrollmentNobodyScansExpiresOnItsTimerAndClosesTheOffer(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	st := m.run()
	if st.Status != vocab.EnrollmentExpired {
		t.Fatalf("ended %+v, want expired", st)
	}
	if len(m.closed) != 1 || m.closed[0] != 5*time.Minute {
		t.Fatalf("offer closed at %v, want once at the end of the 5-minute lifetime", m.closed)
	}
	if last := m.polls[len(m.polls)-1].at; last >= 5*time.Minute {
		t.Fatalf("a QR poll ran at %v, at or after the deadline", last)
	}
}

// A code that is never entered expires on the same timer: the wait for the signal ends at
// the deadline.
func TestEnrollmentWaitingForAVerifyCodeExpiresOnItsTimer(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
	}
	st := m.run()
	if st.Status != vocab.EnrollmentExpired || len(m.polls) != 1 {
		t.Fatalf("ended %+v after %d QR polls, want expired after 1", st, len(m.polls))
	}
	if len(m.closed) != 1 || m.closed[0] != 5*time.Minute {
		t.Fatalf("offer closed at %v, want once at 5m", m.closed)
	}
}

// scaned_but_redirect moves the polls to the host iLink names.
func TestEnrollmentFollowsARedirectToTheHostItNames(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		if n == 1 {
			return activities.QRPollOutput{Status: vocab.EnrollmentRedirect, RedirectHost: "sh.ilink.example"}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed, Confirmed: &activities.Confirmed{AccountKey: "ilk_new", Generation: 1}}
	}
	st := m.run()
	if len(m.polls) != 2 || m.polls[0].in.Host != "" || m.polls[1].in.Host != "sh.ilink.example" {
		t.Fatalf("QR polls %+v, want the second at the redirect host", m.polls)
	}
	if st.Host != "sh.ilink.example" || st.Status != vocab.EnrollmentConfirmed {
		t.Fatalf("ended %+v, want confirmed at the redirect host", st)
	}
}

// binded_redirect (the bot is bound here already) ends the enrollment without enrolling
// anything.
func TestEnrollmentOfABotAlreadyBoundEndsWithoutEnrolling(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentBindedRedirect}
	}
	st := m.run()
	if st.Status != vocab.EnrollmentAlreadyBound || len(m.started) != 0 || len(m.closed) != 1 {
		t.Fatalf("ended %+v with %d pollers started, offer closed %d times: want already_bound, none, once",
			st, len(m.started), len(m.closed))
	}
}

// confirmed (the activity ran the confirm transaction) starts the new account's poller,
// stops the pollers of the accounts the binding replaced and retires their cancelled
// windows; the offer is not closed (the confirm transaction consumed it).
func TestEnrollmentConfirmedStartsThePollerAndStopsTheReplacedOnes(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed, Confirmed: &activities.Confirmed{
			AccountKey: "ilk_new", Generation: 2, ReplacedAccountKeys: []string{"ilk_old"}, CancelledWindowIDs: []int64{9},
		}}
	}
	st := m.run()
	if st.Status != vocab.EnrollmentConfirmed || st.AccountKey != "ilk_new" || st.Generation != 2 ||
		len(st.Replaced) != 1 || st.Replaced[0] != "ilk_old" || st.Error != "" {
		t.Fatalf("ended %+v, want confirmed for ilk_new generation 2, replacing ilk_old", st)
	}
	if len(m.started) != 1 || m.started[0] != (activities.AccountRef{AccountKey: "ilk_new", Generation: 2}) {
		t.Fatalf("pollers started %+v, want ilk_new generation 2", m.started)
	}
	if len(m.stopped) != 1 || len(m.stopped[0]) != 1 || m.stopped[0][0] != "ilk_old" {
		t.Fatalf("pollers stopped %v, want ilk_old", m.stopped)
	}
	if len(m.synced) != 1 || len(m.synced[0].Retired) != 1 || m.synced[0].Retired[0] != 9 {
		t.Fatalf("windows synced %+v, want window 9 retired", m.synced)
	}
	if len(m.closed) != 0 {
		t.Fatalf("offer closed at %v after a confirmation", m.closed)
	}
}

// A confirmation that names no account fails the enrollment and closes the offer.
func TestEnrollmentConfirmationWithoutAnAccountFailsIt(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentConfirmed}
	}
	st := m.run()
	if st.Status != vocab.EnrollmentFailed || st.Error == "" || len(m.started) != 0 || len(m.closed) != 1 {
		t.Fatalf("ended %+v with %d pollers started, offer closed %d times: want failed with its reason, none, once",
			st, len(m.started), len(m.closed))
	}
}

// expiringQRCodes answers PollQRStatus as iLink does for QR codes nobody scans: wait, and
// expired once the polled code was fetched ttl ago.
func (m *mockedEnrollment) expiringQRCodes(ttl time.Duration) func(int, activities.QRPollInput) activities.QRPollOutput {
	return func(_ int, in activities.QRPollInput) activities.QRPollOutput {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, at := range m.fetchedAt {
			if mockedQR(i+1).QRCode == in.QRCode && m.since()-at >= ttl {
				return activities.QRPollOutput{Status: vocab.EnrollmentExpired}
			}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentWaiting}
	}
}

// polledQRs is the serial of the QR code (1 for the first fetched) of each QR poll.
func (m *mockedEnrollment) polledQRs() []int {
	serials := make([]int, len(m.polls))
	for i, p := range m.polls {
		for n := 1; n <= len(m.fetched); n++ {
			if mockedQR(n).QRCode == p.in.QRCode {
				serials[i] = n
			}
		}
	}
	return serials
}

// A QR code iLink reports expired is replaced by a new one, polled from then on, as many
// times as the enrollment may refresh (3 by default); the next expired code ends the
// enrollment expired, long before its own lifetime.
func TestEnrollmentReplacesAnExpiredQRUpToItsRefreshesThenExpires(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.in.Lifetime = wfapi.Duration(time.Hour)
	m.status = m.expiringQRCodes(2 * time.Minute)
	st := m.run()
	want := []time.Duration{0, 2 * time.Minute, 4 * time.Minute, 6 * time.Minute}
	if fmt.Sprint(m.fetchedAt) != fmt.Sprint(want) {
		t.Fatalf("QR codes fetched at %v, want %v: the first and one at each expiry, three times", m.fetchedAt, want)
	}
	if st.Status != vocab.EnrollmentExpired || st.QRSerial != 4 || st.QRRefreshesLeft != 0 || st.QRContent != mockedQR(4).QRContent {
		t.Fatalf("ended %+v, want expired showing the fourth QR code with no refresh left", st)
	}
	if len(m.closed) != 1 || m.closed[0] != 8*time.Minute {
		t.Fatalf("offer closed at %v, want once when the fourth QR code expired (8m)", m.closed)
	}
	serials := m.polledQRs()
	for i := 1; i < len(serials); i++ {
		if serials[i] < serials[i-1] || serials[i] > serials[i-1]+1 {
			t.Fatalf("QR polls used the codes %v: want each code polled after the one before it", serials)
		}
	}
	if serials[0] != 1 || serials[len(serials)-1] != 4 {
		t.Fatalf("QR polls used the codes %v, want the first code to the fourth", serials)
	}
}

// MaxQRRefreshes sets how many expired QR codes are replaced; a negative number means
// none.
func TestEnrollmentMaxQRRefreshesLimitsTheRefreshes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ max, fetches int }{{-1, 1}, {1, 2}, {5, 6}} {
		m := newMockedEnrollment(t)
		m.in.Lifetime, m.in.MaxQRRefreshes = wfapi.Duration(time.Hour), c.max
		m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
			if n%3 == 0 {
				return activities.QRPollOutput{Status: vocab.EnrollmentExpired}
			}
			return activities.QRPollOutput{Status: vocab.EnrollmentWaiting}
		}
		st := m.run()
		if len(m.fetched) != c.fetches || st.Status != vocab.EnrollmentExpired || st.QRSerial != c.fetches || st.QRRefreshesLeft != 0 {
			t.Fatalf("MaxQRRefreshes %d: %d QR codes fetched, ended %+v; want %d, then expired", c.max, len(m.fetched), st, c.fetches)
		}
	}
}

// A QR code iLink reports expired once the enrollment's deadline has passed (a poll that
// ran past it) is not replaced, although refreshes are left: the enrollment ends expired.
func TestEnrollmentDoesNotRefreshAQRPastItsDeadline(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.in.Lifetime = wfapi.Duration(2 * time.Minute)
	m.pollTakes = 50 * time.Second
	m.status = func(int, activities.QRPollInput) activities.QRPollOutput {
		return activities.QRPollOutput{Status: vocab.EnrollmentExpired}
	}
	st := m.run()
	if want := []time.Duration{0, 50 * time.Second, 100 * time.Second}; fmt.Sprint(m.fetchedAt) != fmt.Sprint(want) {
		t.Fatalf("QR codes fetched at %v, want %v: none after the deadline (2m)", m.fetchedAt, want)
	}
	if st.Status != vocab.EnrollmentExpired || st.QRSerial != 3 || st.QRRefreshesLeft != 1 {
		t.Fatalf("ended %+v, want expired showing the third QR code, one refresh unused", st)
	}
	if len(m.closed) != 1 || m.closed[0] != 150*time.Second {
		t.Fatalf("offer closed at %v, want once when the poll past the deadline answered (150s)", m.closed)
	}
}

// The query tells a page which QR code to show (QRSerial changes with it), until when it
// can be scanned (its fetch plus the QR lifetime, never after the enrollment's deadline),
// how many more times it will be replaced, when the enrollment ends and how many codes
// may be tried.
func TestEnrollmentStateShowsTheQRCodeItsSerialAndTheDeadlines(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	m.status = m.expiringQRCodes(2 * time.Minute)
	var states [3]wfapi.EnrollmentState
	for i, at := range []time.Duration{time.Minute, 3 * time.Minute, 4*time.Minute + 30*time.Second} {
		m.at(at, func() { states[i] = m.query() })
	}
	st := m.run()
	deadline := mockedStart.Add(5 * time.Minute)
	for i, want := range []struct {
		serial, left int
		qrExpires    time.Time
	}{
		{1, 3, mockedStart.Add(2 * time.Minute)},
		{2, 2, mockedStart.Add(4 * time.Minute)},
		{3, 1, deadline}, // fetched at 4m: 6m is past the deadline
	} {
		got := states[i]
		if got.Status != vocab.EnrollmentWaiting || got.QRSerial != want.serial || got.QRContent != mockedQR(want.serial).QRContent ||
			got.QRRefreshesLeft != want.left || !got.QRExpiresAt.Equal(want.qrExpires) || !got.ExpiresAt.Equal(deadline) ||
			got.CodeAttemptsLeft != vocab.MaxVerifyCodeAttempts {
			t.Fatalf("state %d: %+v; want QR code %d waiting, scannable until %v, %d refreshes left, the enrollment ending at %v, %d code attempts",
				i+1, got, want.serial, want.qrExpires, want.left, deadline, vocab.MaxVerifyCodeAttempts)
		}
	}
	if st.Status != vocab.EnrollmentExpired || st.QRSerial != 3 || len(m.closed) != 1 || m.closed[0] != 5*time.Minute {
		t.Fatalf("ended %+v, offer closed at %v: want expired on the enrollment's timer (5m) showing the third code", st, m.closed)
	}
}

// Each code iLink refuses leaves one attempt fewer; the third wrong code is blocked, with
// none left.
func TestEnrollmentWrongCodeLeavesOneCodeAttemptFewer(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	var states []wfapi.EnrollmentState
	for i, code := range []string{"111111", "222222", "333333"} {
		m.at(time.Duration(i+1)*time.Minute-30*time.Second, func() { states = append(states, m.query()) })
		m.at(time.Duration(i+1)*time.Minute, func() {
			m.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code})
		})
	}
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		if n < 4 {
			return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
		}
		return activities.QRPollOutput{Status: vocab.EnrollmentBlocked}
	}
	st := m.run()
	if len(states) != 3 {
		t.Fatalf("%d states queried, want 3", len(states))
	}
	for i, got := range states {
		if !got.NeedsCode || got.WrongCodes != i || got.CodeAttemptsLeft != vocab.MaxVerifyCodeAttempts-i {
			t.Fatalf("state after %d wrong codes: %+v, want a code asked with %d attempts left", i, got, vocab.MaxVerifyCodeAttempts-i)
		}
	}
	if st.Status != vocab.EnrollmentBlocked || st.WrongCodes != 3 || st.CodeAttemptsLeft != 0 {
		t.Fatalf("ended %+v, want blocked after 3 wrong codes with no attempt left", st)
	}
}

// A refreshed QR code starts over: no code asked or refused (all attempts left), polled
// at the default host (the redirect was the old code's).
func TestEnrollmentRefreshedQRStartsOverWithAllCodeAttemptsAtTheDefaultHost(t *testing.T) {
	t.Parallel()
	m := newMockedEnrollment(t)
	var before, after wfapi.EnrollmentState
	m.at(30*time.Second, func() { before = m.query() })
	m.at(time.Minute, func() { m.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: "111111"}) })
	m.at(90*time.Second, func() { m.env.SignalWorkflow(wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: "222222"}) })
	m.at(100*time.Second, func() { after = m.query() })
	m.status = func(n int, _ activities.QRPollInput) activities.QRPollOutput {
		switch n {
		case 1:
			return activities.QRPollOutput{Status: vocab.EnrollmentRedirect, RedirectHost: "sh.ilink.example"}
		case 2, 3: // asks for a code, then refuses the first
			return activities.QRPollOutput{Status: vocab.EnrollmentNeedsCode}
		case 4: // the second code came after the QR code expired
			return activities.QRPollOutput{Status: vocab.EnrollmentExpired}
		default:
			return activities.QRPollOutput{Status: vocab.EnrollmentWaiting}
		}
	}
	m.cancelAt(2 * time.Minute)
	m.run()
	if before.Host != "sh.ilink.example" || !before.NeedsCode || before.QRSerial != 1 {
		t.Fatalf("state before the refresh %+v, want the first code asking for a verification code at the redirect host", before)
	}
	if after.QRSerial != 2 || after.Status != vocab.EnrollmentWaiting || after.Host != "" || after.NeedsCode ||
		after.WrongCodes != 0 || after.CodeAttemptsLeft != vocab.MaxVerifyCodeAttempts {
		t.Fatalf("state after the refresh %+v, want the second code waiting at the default host, all code attempts left", after)
	}
	if len(m.polls) < 5 || m.polls[4].in.QRCode != mockedQR(2).QRCode || m.polls[4].in.Host != "" || m.polls[4].in.VerifyCode != "" {
		t.Fatalf("QR polls %+v: want the fifth with the new code, at the default host, without a code", m.polls)
	}
}
