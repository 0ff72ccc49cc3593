package workflows_test

// Fast tests of the AccountPoller state machine alone: every activity it schedules is
// mocked in the SDK's time-skipping test environment (env.OnActivity), so no database,
// simulator or Temporal server is involved and they run in -short mode. poller_test.go
// runs the same workflow with the real activities against PostgreSQL and the simulator.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// mockedActs names the activities to mock: env.OnActivity takes their method values, so
// a mock has the real activity's name and signature. Its methods are never called.
var mockedActs *activity.Activities

// mockedStart is the workflow time every mocked test starts at.
var mockedStart = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// mockedPoll is one call of the mocked PollAccount: its input and the workflow time it ran.
type mockedPoll struct {
	in activities.PollInput
	at time.Duration // since mockedStart
}

// mockedPoller runs AccountPoller with every activity mocked. poll answers the n-th
// PollAccount (from 1); state answers ReadAccountState (the account is active when nil).
// Every call is recorded, with the workflow time it ran at.
type mockedPoller struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	poll  func(n int, in activities.PollInput) activities.PollResult
	state func(in activities.AccountRef) activities.AccountState

	mu      sync.Mutex
	polls   []mockedPoll
	paused  []activities.PauseInput
	resumed []time.Duration
	relogin []activities.StatusInput
	synced  []activities.WindowsInput
	reads   int
	// removed: a poll answered that the account is not active and no state func is set,
	// so the stored account reads as removed (disabled).
	removed   bool
	notified  []string // NotifyStart, NotifyStop in order
	cancelled []int64  // the windows MarkNeedsRelogin answers it cancelled
}

func newMockedPoller(t *testing.T) *mockedPoller {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	m := &mockedPoller{t: t, env: suite.NewTestWorkflowEnvironment()}
	env := m.env
	env.SetTestTimeout(time.Minute) // wall time without progress; the machine may be loaded
	env.SetStartTime(mockedStart)
	workflows.Register(env)
	env.OnActivity(mockedActs.PollAccount, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PollInput) (activities.PollResult, error) {
			m.mu.Lock()
			m.polls = append(m.polls, mockedPoll{in: in, at: m.since()})
			n := len(m.polls)
			m.mu.Unlock()
			if m.poll == nil {
				return activities.PollResult{}, nil
			}
			res := m.poll(n, in)
			if res.Stopped == string(vocab.CodeAccountNotActive) {
				m.mu.Lock()
				m.removed = true
				m.mu.Unlock()
			}
			return res, nil
		})
	env.OnActivity(mockedActs.ReadAccountState, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AccountRef) (activities.AccountState, error) {
			m.mu.Lock()
			m.reads++
			removed := m.removed
			m.mu.Unlock()
			if m.state == nil {
				status := vocab.AccountActive
				if removed {
					status = vocab.AccountDisabled
				}
				return activities.AccountState{Status: status, Generation: in.Generation}, nil
			}
			return m.state(in), nil
		})
	env.OnActivity(mockedActs.PauseAccount, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PauseInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.paused = append(m.paused, in)
			return nil
		})
	env.OnActivity(mockedActs.ResumeAccount, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StatusInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.resumed = append(m.resumed, m.since())
			return nil
		})
	env.OnActivity(mockedActs.MarkNeedsRelogin, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StatusInput) (activities.StatusOutput, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.relogin = append(m.relogin, in)
			return activities.StatusOutput{Status: vocab.AccountNeedsRelogin, CancelledWindowIDs: m.cancelled}, nil
		})
	env.OnActivity(mockedActs.SyncWindows, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.WindowsInput) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.synced = append(m.synced, in)
			return nil
		})
	for _, notify := range []struct {
		name string
		fn   func(context.Context, activities.AccountRef) error
	}{{activities.NotifyStart, mockedActs.NotifyStart}, {activities.NotifyStop, mockedActs.NotifyStop}} {
		env.OnActivity(notify.fn, mock.Anything, mock.Anything).Return(func(context.Context, activities.AccountRef) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.notified = append(m.notified, notify.name)
			return nil
		})
	}
	return m
}

// since is the workflow time passed since mockedStart.
func (m *mockedPoller) since() time.Duration { return m.env.Now().Sub(mockedStart) }

// at runs f at workflow time d after the start.
func (m *mockedPoller) at(d time.Duration, f func()) { m.env.RegisterDelayedCallback(f, d) }

// run runs the poller from in (the account ilk_1 at generation 1 when in is zero) and
// returns its error (nil when it ended, a *workflow.ContinueAsNewError when it continued).
func (m *mockedPoller) run(in wfapi.PollerInput) error {
	m.t.Helper()
	if in.AccountKey == "" {
		in.AccountKey, in.Generation = "ilk_1", 1
	}
	m.env.ExecuteWorkflow(wfapi.AccountPollerWorkflow, in)
	if !m.env.IsWorkflowCompleted() {
		m.t.Fatal("the poller did not complete")
	}
	return m.env.GetWorkflowError()
}

// mustEnd runs the poller and fails the test unless it ended without an error.
func (m *mockedPoller) mustEnd(in wfapi.PollerInput) {
	m.t.Helper()
	if err := m.run(in); err != nil {
		m.t.Fatalf("the poller ended with %v, want a clean end", err)
	}
}

// query answers the poller's state query.
func (m *mockedPoller) query() wfapi.PollerState {
	m.t.Helper()
	v, err := m.env.QueryWorkflow(wfapi.QueryPollerState)
	if err != nil {
		m.t.Fatal(err)
	}
	var st wfapi.PollerState
	if err := v.Get(&st); err != nil {
		m.t.Fatal(err)
	}
	return st
}

// pollTimes lists when each poll ran.
func (m *mockedPoller) pollTimes() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := make([]time.Duration, len(m.polls))
	for i, p := range m.polls {
		at[i] = p.at
	}
	return at
}

// mockedStopped is the answer of a poll that finds the account no longer active (as the real
// activity does once the account is removed): the poller stops.
var mockedStopped = activities.PollResult{Stopped: string(vocab.CodeAccountNotActive)}

// mockedUpstreamError is the answer of a poll whose getupdates failed.
var mockedUpstreamError = activities.PollResult{UpstreamError: "http_status"}

func sameDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// After a poll session that committed pages the next poll starts at once, and the state
// counts what the sessions committed.
func TestPollerPollsAgainAtOnceAfterASessionWithPages(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 4 {
			return mockedStopped
		}
		return activities.PollResult{Pages: 2, Messages: 3}
	}
	m.mustEnd(wfapi.PollerInput{})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, 0, 0, 0}) {
		t.Fatalf("polls at %v, want four polls back to back at 0", at)
	}
	for i, p := range m.polls {
		if p.in.Probe || p.in.AccountKey != "ilk_1" || p.in.Generation != 1 {
			t.Fatalf("poll %d input %+v", i+1, p.in)
		}
		if i > 0 && p.in.LeaseEpoch <= m.polls[i-1].in.LeaseEpoch {
			t.Fatalf("poll %d has lease epoch %d after %d: each poll must take the lease over from the one before",
				i+1, p.in.LeaseEpoch, m.polls[i-1].in.LeaseEpoch)
		}
	}
	if st := m.query(); st.Pages != 6 || st.Messages != 9 || st.Status != wfapi.PollerStopped {
		t.Fatalf("state %+v, want 6 pages, 9 messages, stopped", st)
	}
	if want := []string{activities.NotifyStart, activities.NotifyStop}; len(m.notified) != 2 ||
		m.notified[0] != want[0] || m.notified[1] != want[1] {
		t.Fatalf("notified %v, want %v", m.notified, want)
	}
}

// The windows a poll session opened or retired but could not start or signal itself are
// handed to SyncWindows before the next poll.
func TestPollerSyncsTheWindowsItsPollLeftUndone(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	opened := activities.WindowRef{ReplyWindowID: 5, AccountKey: "ilk_1", MessageKey: "im_5", Deliverable: true}
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 1 {
			return activities.PollResult{Pages: 1, Messages: 1, Opened: []activities.WindowRef{opened}, Retired: []int64{4}}
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if len(m.synced) != 1 || len(m.synced[0].Opened) != 1 || m.synced[0].Opened[0].ReplyWindowID != 5 ||
		len(m.synced[0].Retired) != 1 || m.synced[0].Retired[0] != 4 {
		t.Fatalf("synced %+v, want window 5 opened and 4 retired", m.synced)
	}
}

// An upstream error backs off 2 s on a timer before the next poll.
func TestPollerBacksOffTwoSecondsAfterAnUpstreamError(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	var during wfapi.PollerState
	m.at(time.Second, func() { during = m.query() })
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 1 {
			return mockedUpstreamError
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, 2 * time.Second}) {
		t.Fatalf("polls at %v, want 0 and 2s", at)
	}
	if during.Status != wfapi.PollerBackingOff || during.Failures != 1 {
		t.Fatalf("state during the back-off %+v, want backing_off with 1 failure", during)
	}
}

// The third upstream error in a row, and every one after it, backs off 30 s.
func TestPollerBacksOffThirtySecondsAfterThreeUpstreamErrorsInARow(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n <= 4 {
			return mockedUpstreamError
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	s := time.Second
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, 2 * s, 4 * s, 34 * s, 64 * s}) {
		t.Fatalf("polls at %v, want 0, 2s, 4s, 34s, 64s (2 s, 2 s, then 30 s after the third error in a row)", at)
	}
}

// A successful poll resets the count of upstream errors in a row: the next error backs
// off 2 s again.
func TestPollerCountsUpstreamErrorsInARowOnlyUntilAPollSucceeds(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		switch n {
		case 1, 2, 4:
			return mockedUpstreamError
		case 3:
			return activities.PollResult{}
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	s := time.Second
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, 2 * s, 4 * s, 4 * s, 6 * s}) {
		t.Fatalf("polls at %v, want 0, 2s, 4s, 4s, 6s (the error after a success is the first in a row)", at)
	}
}

// A stale token (-14) pauses the account for an hour on a timer; then the account is
// resumed and one probe polls; a probe that succeeds returns the poller to normal polls.
func TestPollerPausesAnHourOnAStaleTokenThenProbesOnce(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	var during wfapi.PollerState
	m.at(30*time.Minute, func() { during = m.query() })
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		switch n {
		case 1:
			return activities.PollResult{StaleToken: true}
		case 2:
			return activities.PollResult{Pages: 1, Messages: 1}
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, time.Hour, time.Hour}) {
		t.Fatalf("polls at %v, want 0, then the probe and the next poll after the hour", at)
	}
	if len(m.paused) != 1 || m.paused[0].Until.Sub(m.paused[0].Now) != time.Hour || !m.paused[0].Now.Equal(mockedStart) {
		t.Fatalf("paused %+v, want one pause of an hour from the start", m.paused)
	}
	if during.Status != wfapi.PollerPaused || during.PausedUntil == nil || !during.PausedUntil.Equal(mockedStart.Add(time.Hour)) {
		t.Fatalf("state during the pause %+v, want paused until the hour", during)
	}
	if !sameDurations(m.resumed, []time.Duration{time.Hour}) {
		t.Fatalf("resumed at %v, want once, when the hour ended", m.resumed)
	}
	if probes := []bool{m.polls[0].in.Probe, m.polls[1].in.Probe, m.polls[2].in.Probe}; probes[0] || !probes[1] || probes[2] {
		t.Fatalf("probe flags %v, want only the poll after the pause to be the probe", probes)
	}
	if len(m.relogin) != 0 {
		t.Fatalf("marked needs_relogin %+v after a probe that succeeded", m.relogin)
	}
}

// A second -14, on the probe after the stale-token pause, marks the account needs_relogin,
// retires the windows that cancelled, and stops the poller.
func TestPollerMarksNeedsReloginAndStopsOnASecondStaleToken(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.cancelled = []int64{7, 8}
	m.poll = func(int, activities.PollInput) activities.PollResult { return activities.PollResult{StaleToken: true} }
	m.mustEnd(wfapi.PollerInput{})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, time.Hour}) {
		t.Fatalf("polls at %v, want the poll and its probe an hour later, and no more", at)
	}
	if len(m.paused) != 1 {
		t.Fatalf("paused %d times, want once (the probe's -14 does not pause again)", len(m.paused))
	}
	if len(m.relogin) != 1 || m.relogin[0].AccountKey != "ilk_1" || m.relogin[0].Generation != 1 {
		t.Fatalf("marked needs_relogin %+v, want once for ilk_1 generation 1", m.relogin)
	}
	if len(m.synced) != 1 || len(m.synced[0].Retired) != 2 || m.synced[0].Retired[0] != 7 || m.synced[0].Retired[1] != 8 {
		t.Fatalf("synced %+v, want the cancelled windows 7 and 8 retired", m.synced)
	}
	if st := m.query(); st.Status != wfapi.PollerStopped {
		t.Fatalf("state %+v, want stopped", st)
	}
	if n := len(m.notified); n == 0 || m.notified[n-1] != activities.NotifyStop {
		t.Fatalf("notified %v, want NotifyStop last", m.notified)
	}
}

// An operator's pause signal stops polling until the pause ends (the store, which the
// operator's command wrote first, says until when); then the account is resumed and the
// poller polls again.
func TestPollerPauseSignalStopsPollingUntilThePauseEnds(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	until := mockedStart.Add(3 * time.Hour)
	m.state = func(in activities.AccountRef) activities.AccountState {
		if len(m.pollTimes()) > 1 { // removed after the pause, to end the test
			return activities.AccountState{Status: vocab.AccountDisabled, Generation: in.Generation}
		}
		return activities.AccountState{Status: vocab.AccountPaused, Generation: in.Generation, PausedUntil: &until}
	}
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 1 {
			m.env.SignalWorkflow(wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: "operator"})
			// The session that held a page when the pause landed stores it and returns.
			return activities.PollResult{Pages: 1, Messages: 1, Stopped: string(vocab.CodeAccountNotActive)}
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{0, 3 * time.Hour}) {
		t.Fatalf("polls at %v, want 0 and 3h (when the pause ended)", at)
	}
	if m.reads == 0 {
		t.Fatal("the poller did not read the stored state after the pause signal")
	}
	if !sameDurations(m.resumed, []time.Duration{3 * time.Hour}) {
		t.Fatalf("resumed at %v, want once at 3h", m.resumed)
	}
}

// A resume signal ends a pause early: the poller reads the stored state (active) and
// polls at once, without waiting for the pause's end.
func TestPollerResumeSignalEndsAPauseEarly(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	until := mockedStart.Add(time.Hour)
	m.at(10*time.Minute, func() { m.env.SignalWorkflow(wfapi.SignalResume, nil) })
	m.poll = func(int, activities.PollInput) activities.PollResult { return mockedStopped }
	m.mustEnd(wfapi.PollerInput{PausedUntil: &until})
	if at := m.pollTimes(); !sameDurations(at, []time.Duration{10 * time.Minute}) {
		t.Fatalf("polls at %v, want one at 10m (the resume), none during the pause", at)
	}
	if m.reads < 1 {
		t.Fatalf("%d reads of the stored state, want one after the resume signal", m.reads)
	}
	if len(m.resumed) != 0 {
		t.Fatalf("the poller resumed the account itself at %v: the operator's command already did", m.resumed)
	}
}

// A stop signal (a removal) during a poll ends the poller at once, without waiting for the
// poll (the activity ends after its long poll, storing what it brought), with NotifyStop
// and no other poll.
func TestPollerStopSignalEndsItWithoutWaitingForTheRunningPoll(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(int, activities.PollInput) activities.PollResult {
		m.env.SignalWorkflow(wfapi.SignalStop, wfapi.StopSignal{Reason: "removed"})
		return activities.PollResult{Pages: 1, Messages: 1}
	}
	m.mustEnd(wfapi.PollerInput{})
	if len(m.polls) != 1 {
		t.Fatalf("%d polls, want 1", len(m.polls))
	}
	if st := m.query(); st.Status != wfapi.PollerStopped {
		t.Fatalf("state %+v, want stopped", st)
	}
	if want := []string{activities.NotifyStart, activities.NotifyStop}; len(m.notified) != 2 || m.notified[1] != want[1] {
		t.Fatalf("notified %v, want %v", m.notified, want)
	}
}

// A stop signal cuts a back-off short: the poller ends at once instead of waiting it out.
func TestPollerStopSignalCutsABackOffShort(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(int, activities.PollInput) activities.PollResult { return mockedUpstreamError }
	m.at(time.Second, func() { m.env.SignalWorkflow(wfapi.SignalStop, wfapi.StopSignal{Reason: "removed"}) })
	m.mustEnd(wfapi.PollerInput{})
	if len(m.polls) != 1 || m.since() != time.Second {
		t.Fatalf("%d polls, ended at %v: want one poll and the end at the stop (1s)", len(m.polls), m.since())
	}
}

// A rotate signal moves the poller to the new generation: the next poll polls it.
func TestPollerRotateSignalMovesItToTheNewGeneration(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 1 {
			m.env.SignalWorkflow(wfapi.SignalRotate, wfapi.RotateSignal{Generation: 2})
			return activities.PollResult{}
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if len(m.polls) != 2 || m.polls[0].in.Generation != 1 || m.polls[1].in.Generation != 2 {
		t.Fatalf("polls %+v, want generation 1 then 2", m.polls)
	}
	if st := m.query(); st.Generation != 2 {
		t.Fatalf("state %+v, want generation 2", st)
	}
}

// The poller continues as new after its loop bound (500 polls by default), carrying its
// state, and a signal that arrived meanwhile, into the next run.
func TestPollerContinuesAsNewAfterFiveHundredLoops(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, _ activities.PollInput) activities.PollResult {
		if n == 500 {
			m.env.SignalWorkflow(wfapi.SignalRotate, wfapi.RotateSignal{Generation: 3})
		}
		return activities.PollResult{Pages: 1, Messages: 2}
	}
	err := m.run(wfapi.PollerInput{})
	var can *workflow.ContinueAsNewError
	if !asCAN(err, &can) {
		t.Fatalf("the poller ended with %v, want continue-as-new", err)
	}
	if len(m.polls) != 500 {
		t.Fatalf("continued as new after %d polls, want 500", len(m.polls))
	}
	var next wfapi.PollerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.AccountKey != "ilk_1" || next.Generation != 3 || next.Loops != 0 || next.Pages != 500 || next.Messages != 1000 ||
		next.Stopped || next.PausedUntil != nil {
		t.Fatalf("continued with %+v, want ilk_1 at generation 3 (the signal), loops reset, 500 pages and 1000 messages", next)
	}
	if can.WorkflowType == nil || can.WorkflowType.Name != wfapi.AccountPollerWorkflow {
		t.Fatalf("continued as %+v, want %s", can.WorkflowType, wfapi.AccountPollerWorkflow)
	}
}

// The loop bound is configurable, and a run continued as new carries the count of upstream
// errors in a row, so that its back-off goes on where it was.
func TestPollerContinuesAsNewAfterItsConfiguredLoopBoundWithItsState(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(int, activities.PollInput) activities.PollResult { return mockedUpstreamError }
	err := m.run(wfapi.PollerInput{Config: wfapi.PollerConfig{MaxLoops: 2}})
	var can *workflow.ContinueAsNewError
	if !asCAN(err, &can) {
		t.Fatalf("the poller ended with %v, want continue-as-new", err)
	}
	var next wfapi.PollerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(m.polls) != 2 || next.Failures != 2 || next.Config.MaxLoops != 2 {
		t.Fatalf("%d polls, continued with %+v: want 2 polls, 2 failures carried, the bound kept", len(m.polls), next)
	}
}

// A poll-lost signal naming the running poll's lease epoch (its worker died) abandons that
// poll and schedules a new one at once, with a newer epoch; a signal naming an older
// poll's epoch changes nothing.
func TestPollerReplacesAPollWhoseLeaseWasLost(t *testing.T) {
	t.Parallel()
	m := newMockedPoller(t)
	m.poll = func(n int, in activities.PollInput) activities.PollResult {
		switch n {
		case 1:
			m.env.SignalWorkflow(wfapi.SignalPollLost, wfapi.PollLostSignal{Epoch: in.LeaseEpoch - 1})
			return activities.PollResult{Pages: 1, Messages: 1}
		case 2:
			m.env.SignalWorkflow(wfapi.SignalPollLost, wfapi.PollLostSignal{Epoch: in.LeaseEpoch})
			return activities.PollResult{Pages: 1, Messages: 1} // abandoned: the poller no longer waits for it
		}
		return mockedStopped
	}
	m.mustEnd(wfapi.PollerInput{})
	if len(m.polls) != 3 || m.polls[2].in.LeaseEpoch <= m.polls[1].in.LeaseEpoch || m.polls[2].at != 0 {
		t.Fatalf("polls %+v, want a third poll at once with a newer lease epoch", m.polls)
	}
	if st := m.query(); st.Pages != 1 {
		t.Fatalf("state %+v, want the first poll's page only (the second poll was abandoned)", st)
	}
}
