package workflows_test

// Fast tests of the ReplyWindow state machine alone: its activities are stand-ins
// registered under the contract's names (package activities), so no database, simulator or
// Temporal server is involved. The integration tests beside them run the real activities.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// standIns are the window's activities as plain functions; nil ones answer the default.
type standIns struct {
	handOff func(activities.HandOffInput) (activities.HandOffOutput, error)
	send    func(activities.SendInput) (wfapi.SendResult, error)
	finish  func(activities.FinishInput) (activities.FinishOutput, error)
	expire  func(activities.ExpireInput) (activities.WindowState, error)
	hold    func(activities.HoldInput) (wfapi.SendResult, error)
}

func unitEnv(t *testing.T, s standIns) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.ReplyWindow, workflowOptions(wfapi.ReplyWindowWorkflow))
	if s.handOff == nil {
		s.handOff = func(in activities.HandOffInput) (activities.HandOffOutput, error) {
			return activities.HandOffOutput{SessionID: "s1", MessageKey: "im_1", Delivered: true}, nil
		}
	}
	if s.send == nil {
		s.send = func(activities.SendInput) (wfapi.SendResult, error) {
			return wfapi.SendResult{AttemptID: "a", Status: vocab.AttemptSent, SendsLeft: 9}, nil
		}
	}
	if s.finish == nil {
		s.finish = func(in activities.FinishInput) (activities.FinishOutput, error) {
			return activities.FinishOutput{Status: in.Status}, nil
		}
	}
	if s.expire == nil {
		s.expire = func(activities.ExpireInput) (activities.WindowState, error) {
			return activities.WindowState{State: vocab.WindowExpired}, nil
		}
	}
	if s.hold == nil {
		s.hold = func(in activities.HoldInput) (wfapi.SendResult, error) {
			return wfapi.SendResult{Status: wfapi.SendHeld, HeldID: "hr_1", HeldPosition: 1, ErrorCode: string(vocab.CodeReplyQuotaExhausted)}, nil
		}
	}
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.HandOffInput) (activities.HandOffOutput, error) {
		return s.handOff(in)
	}, activity.RegisterOptions{Name: activities.HandOff})
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.HoldInput) (wfapi.SendResult, error) {
		return s.hold(in)
	}, activity.RegisterOptions{Name: activities.HoldReply})
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.SendInput) (wfapi.SendResult, error) {
		return s.send(in)
	}, activity.RegisterOptions{Name: activities.Send})
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.FinishInput) (activities.FinishOutput, error) {
		return s.finish(in)
	}, activity.RegisterOptions{Name: activities.FinishMessage})
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.ExpireInput) (activities.WindowState, error) {
		return s.expire(in)
	}, activity.RegisterOptions{Name: activities.ExpireWindow})
	return env
}

func unitInput(start time.Time) wfapi.WindowInput {
	return wfapi.WindowInput{ReplyWindowID: 1, AccountKey: "ilk_1", MessageKey: "im_1", ExpiresAt: start.Add(time.Hour),
		MaxSends: 10, Deliverable: true, ReofferAfter: wfapi.Duration(10 * time.Minute)}
}

func windowState(t *testing.T, env *testsuite.TestWorkflowEnvironment) wfapi.WindowState {
	t.Helper()
	v, err := env.QueryWorkflow(wfapi.QueryWindowState)
	if err != nil {
		t.Fatal(err)
	}
	var st wfapi.WindowState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// An unhandled message is offered again every ReofferAfter while the window is open, and
// the offers stop with the verdict.
func TestUnitAnUnhandledMessageIsOfferedAgainUntilItsVerdict(t *testing.T) {
	t.Parallel()
	var offers atomic.Int32
	env := unitEnv(t, standIns{handOff: func(in activities.HandOffInput) (activities.HandOffOutput, error) {
		offers.Add(1)
		return activities.HandOffOutput{SessionID: "s", MessageKey: "im_1", Delivered: true}, nil
	}})
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var finished error = errNotCalled
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(wfapi.UpdateFinish, "", &updateRecorder{done: func(err error) { finished = err }},
			wfapi.FinishRequest{Handled: true})
	}, 25*time.Minute)
	env.ExecuteWorkflow(wfapi.ReplyWindowWorkflow, unitInput(start))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if finished != nil {
		t.Fatalf("finish update: %v", finished)
	}
	// Offers at 0, 10 and 20 minutes; the verdict at 25 ends them.
	if n := offers.Load(); n != 3 {
		t.Fatalf("%d offers before the verdict at 25 minutes with a 10-minute re-offer, want 3", n)
	}
	if st := windowState(t, env); st.Verdict != vocab.MessageHandled || st.State != wfapi.WindowStateExpired {
		t.Fatalf("state %+v, want handled and expired", st)
	}
}

// A hand-off whose handler failed for good marks the message failed: no re-offer, and a
// send through the window is refused afterwards.
func TestUnitAPermanentHandOffFailureEndsTheOffersAndRefusesSends(t *testing.T) {
	t.Parallel()
	var offers atomic.Int32
	env := unitEnv(t, standIns{handOff: func(activities.HandOffInput) (activities.HandOffOutput, error) {
		offers.Add(1)
		return activities.HandOffOutput{}, temporal.NewNonRetryableApplicationError("failed", activities.ErrTypeHandOffFailed, nil)
	}})
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var sent error = errNotCalled
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(wfapi.UpdateSend, "", &updateRecorder{done: func(err error) { sent = err }},
			wfapi.SendRequest{Type: "text", Text: "late", SessionID: "s"})
	}, 5*time.Minute)
	env.ExecuteWorkflow(wfapi.ReplyWindowWorkflow, unitInput(start))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := offers.Load(); n != 1 {
		t.Fatalf("%d offers after a permanent failure, want 1", n)
	}
	var app *temporal.ApplicationError
	if !asApp(sent, &app) || app.Type() != string(vocab.CodeInvalidAgentSession) {
		t.Fatalf("send after the message failed: %v, want %s", sent, vocab.CodeInvalidAgentSession)
	}
	if st := windowState(t, env); st.Verdict != vocab.MessageFailed {
		t.Fatalf("verdict %q, want failed", st.Verdict)
	}
}

// The validator refuses a send once the quota is spent, when the caller asked not to
// hold it, before the Send activity runs; without that ask, the reply is held.
func TestUnitTheValidatorRefusesASendBeyondTheQuotaThatMayNotBeHeldAndHoldsTheOthers(t *testing.T) {
	t.Parallel()
	var sends, holds atomic.Int32
	env := unitEnv(t, standIns{send: func(activities.SendInput) (wfapi.SendResult, error) {
		n := sends.Add(1)
		return wfapi.SendResult{AttemptID: "a", Status: vocab.AttemptSent, SendsLeft: 2 - n}, nil
	}, hold: func(in activities.HoldInput) (wfapi.SendResult, error) {
		holds.Add(1)
		if in.RequestID != "d" || in.Content.Text != "reply" {
			return wfapi.SendResult{}, errors.New("held the wrong reply")
		}
		return wfapi.SendResult{Status: wfapi.SendHeld, HeldID: "hr_1", HeldPosition: 1, ErrorCode: string(vocab.CodeReplyQuotaExhausted)}, nil
	}})
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	in := unitInput(start)
	in.MaxSends = 2
	var results []error
	for i := range 4 {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(wfapi.UpdateSend, "", &updateRecorder{done: func(err error) { results = append(results, err) }},
				wfapi.SendRequest{Type: "text", Text: "reply", RequestID: string(rune('a' + i)), NoHold: i == 2})
		}, time.Duration(i+1)*time.Minute)
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(wfapi.SignalRetired, nil) }, 10*time.Minute)
	env.ExecuteWorkflow(wfapi.ReplyWindowWorkflow, in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var app *temporal.ApplicationError
	if len(results) != 4 || results[0] != nil || results[1] != nil || !asApp(results[2], &app) ||
		app.Type() != string(vocab.CodeReplyQuotaExhausted) || results[3] != nil {
		t.Fatalf("results %v: want two sends, a quota refusal and a hold", results)
	}
	if n := sends.Load(); n != 2 {
		t.Fatalf("the Send activity ran %d times, want 2 (the refusal runs nothing)", n)
	}
	if n := holds.Load(); n != 1 {
		t.Fatalf("the HoldReply activity ran %d times, want 1", n)
	}
	if st := windowState(t, env); st.State != wfapi.WindowStateRetired || st.SendsLeft != 0 {
		t.Fatalf("state %+v, want retired with no sends left", st)
	}
}

// errNotCalled is what an update result holds until the update answered.
var errNotCalled = errors.New("update not answered")

func workflowOptions(name string) workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: name}
}

func asApp(err error, app **temporal.ApplicationError) bool { return errors.As(err, app) }
