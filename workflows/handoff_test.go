package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// agentStub is the rig's agent handler: it records every delivery and answers as told.
type agentStub struct {
	mu         sync.Mutex
	deliveries []handoff.Delivery
	answer     func(n int, d handoff.Delivery) (handoff.Answer, error)
}

func (a *agentStub) Deliver(_ context.Context, d handoff.Delivery) (handoff.Answer, error) {
	a.mu.Lock()
	a.deliveries = append(a.deliveries, d)
	n := len(a.deliveries)
	a.mu.Unlock()
	if a.answer == nil {
		return handoff.Answer{}, nil
	}
	return a.answer(n, d)
}

func (a *agentStub) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.deliveries)
}

func (a *agentStub) distinctTokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range a.deliveries {
		seen[d.SessionToken.Reveal()] = true
	}
	return len(seen)
}

func messageOf(r *rig, key string) store.Message {
	r.t.Helper()
	m, err := r.store.GetMessage(r.ctx, key)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

func sentTexts(r *rig, botID string) []string {
	r.t.Helper()
	sent, err := r.ctl.Sent(r.ctx, botID)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, s := range sent {
		out = append(out, s.Text)
	}
	return out
}

func TestRepliesOfTheHandOffAreSentThenTheMessageIsHandled(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{answer: func(int, handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{Replies: []string{"first reply", "second reply"}, Handled: true}, nil
	}}
	r.acts.Handler = agent
	b := r.bot()
	w := r.deliver(b, "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := sentTexts(r, b.info.BotID); strings.Join(got, "|") != "first reply|second reply" {
		t.Fatalf("simulator received %q, want the two replies in order", got)
	}
	if n := countRows(r, "SELECT count(*) FROM send_attempts WHERE request_id IN ('handoff-1-1', 'handoff-1-2') AND status = 'sent'"); n != 2 {
		t.Fatalf("%d sent attempts with the hand-off's request ids, want 2", n)
	}
	if m := messageOf(r, w.MessageKey); m.Status != vocab.MessageHandled {
		t.Fatalf("message is %s, want handled", m.Status)
	}
	if agent.count() != 1 {
		t.Fatalf("%d deliveries: a handled message is not offered again", agent.count())
	}
}

// A hand-off answer that says handled but none of whose replies was sent (here refused:
// longer than one iLink message; in the crash test, a reply whose worker was killed before it left, recorded
// unknown) does not mark the message handled: the user got nothing. It is failed, with the
// reason. Found by the crash test (a status never claims an answer that was not sent).
func TestAHandledAnswerWithoutASentReplyLeavesTheMessageFailedNotHandled(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{answer: func(int, handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{Replies: []string{strings.Repeat("a", 16*1024+1)}, Handled: true}, nil
	}}
	r.acts.Handler = agent
	b := r.bot()
	w := r.deliver(b, "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := sentTexts(r, b.info.BotID); len(got) != 0 {
		t.Fatalf("simulator received %d messages, want none", len(got))
	}
	m := messageOf(r, w.MessageKey)
	if m.Status != vocab.MessageFailed || !strings.Contains(m.FailureReason, "none of its replies was confirmed sent") {
		t.Fatalf("message is %s (%q), want failed: the answer said handled but no reply was sent", m.Status, m.FailureReason)
	}
}

func TestAnUnhandledMessageIsReofferedWhileItsWindowIsOpen(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = 35 * time.Minute
	r := newRig(t, limits)
	agent := &agentStub{}
	r.acts.Handler = agent
	b := r.bot()
	w := r.deliver(b, "hello")
	r.env.SetStartTime(time.Now())
	var offers []int
	for _, at := range []time.Duration{5, 15, 25, 34} {
		r.env.RegisterDelayedCallback(func() {
			v, err := r.env.QueryWorkflow(wfapi.QueryWindowState)
			if err != nil {
				t.Error(err)
				return
			}
			var st wfapi.WindowState
			_ = v.Get(&st)
			offers = append(offers, st.Offers)
		}, at*time.Minute)
	}
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits)) // default re-offer interval: 10m
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// Offers at 0, 10, 20 and 30 minutes; the window expires at 35.
	if fmt.Sprint(offers) != "[1 2 3 4]" {
		t.Fatalf("offers seen at 5, 15, 25, 34 minutes: %v, want [1 2 3 4]", offers)
	}
	if agent.count() != 4 || agent.distinctTokens() != 4 {
		t.Fatalf("%d deliveries with %d distinct tokens, want 4 and 4", agent.count(), agent.distinctTokens())
	}
	if n := countRows(r, "SELECT count(*) FROM agent_sessions WHERE reply_window_id = $1", w.ReplyWindowID); n != 4 {
		t.Fatalf("%d sessions, want one per offer", n)
	}
	// Never answered: the expiry leaves it failed with the reason, not processing forever.
	if m := messageOf(r, w.MessageKey); m.Status != vocab.MessageFailed || !strings.Contains(m.FailureReason, "expired") {
		t.Fatalf("message is %s (%q), want failed by the expiry", m.Status, m.FailureReason)
	}
}

func TestReofferIntervalIsConfigurableAndCanBeOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		every time.Duration
		want  int
	}{{3 * time.Minute, 4}, {-1, 1}} {
		t.Run(fmt.Sprint(c.every), func(t *testing.T) {
			limits := store.DefaultLimits()
			limits.WindowLifetime = 10 * time.Minute
			r := newRig(t, limits)
			agent := &agentStub{}
			r.acts.Handler = agent
			w := r.deliver(r.bot(), "hello")
			in := windowInput(w, limits)
			in.ReofferAfter = wfapi.Duration(c.every)
			r.env.SetStartTime(time.Now())
			r.env.ExecuteWorkflow(workflows.ReplyWindow, in)
			if err := r.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if agent.count() != c.want {
				t.Fatalf("%d deliveries, want %d", agent.count(), c.want)
			}
		})
	}
}

func TestFinishUpdateMarksTheMessageAndEndsReoffers(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{}
	r.acts.Handler = agent
	b := r.bot()
	w := r.deliver(b, "hello")
	results := map[string]error{}
	record := func(name string) *updateRecorder {
		return &updateRecorder{done: func(err error) { results[name] = err }}
	}
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(wfapi.UpdateSend, "", record("send"), wfapi.SendRequest{Type: "text", Text: "an answer"})
	}, 4*time.Minute)
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(wfapi.UpdateFinish, "", record("finish"), wfapi.FinishRequest{Handled: true})
	}, 5*time.Minute)
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(wfapi.UpdateFinish, "", record("same finish"), wfapi.FinishRequest{Handled: true})
		r.env.UpdateWorkflow(wfapi.UpdateFinish, "", record("other verdict"), wfapi.FinishRequest{Reason: "changed my mind"})
		r.env.UpdateWorkflow(wfapi.UpdateSend, "", record("late send"), wfapi.SendRequest{Type: "text", Text: "late"})
	}, 6*time.Minute)
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"send", "finish", "same finish"} {
		if err, ok := results[name]; !ok || err != nil {
			t.Fatalf("%s: %v (done %v), want success", name, err, ok)
		}
	}
	if code := codeOf(results["other verdict"]); code != string(vocab.CodeAttemptConflict) {
		t.Fatalf("another verdict: %v, want attempt_conflict", results["other verdict"])
	}
	if code := codeOf(results["late send"]); code != string(vocab.CodeInvalidAgentSession) {
		t.Fatalf("send after the verdict: %v, want invalid_agent_session", results["late send"])
	}
	if m := messageOf(r, w.MessageKey); m.Status != vocab.MessageHandled {
		t.Fatalf("message is %s, want handled", m.Status)
	}
	if agent.count() != 1 {
		t.Fatalf("%d deliveries: the finish must end the re-offers", agent.count())
	}
	if got := sentTexts(r, b.info.BotID); len(got) != 1 {
		t.Fatalf("simulator received %q, want the one answer", got)
	}
}

func codeOf(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

func TestAPermanentHandOffFailureMarksTheMessageFailed(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{answer: func(int, handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{}, &handoff.PermanentError{Reason: "webhook answered 404"}
	}}
	r.acts.Handler = agent
	w := r.deliver(r.bot(), "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	m := messageOf(r, w.MessageKey)
	if m.Status != vocab.MessageFailed || m.FailureReason != "webhook answered 404" {
		t.Fatalf("message %s (%q), want failed with the handler's reason", m.Status, m.FailureReason)
	}
	if agent.count() != 1 {
		t.Fatalf("%d deliveries: a permanent failure is neither retried nor re-offered", agent.count())
	}
}

func TestAFailingHandOffIsRetriedThenReoffered(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = 15 * time.Minute
	r := newRig(t, limits)
	agent := &agentStub{answer: func(n int, _ handoff.Delivery) (handoff.Answer, error) {
		if n <= 2 {
			return handoff.Answer{}, errors.New("agent unreachable")
		}
		return handoff.Answer{}, nil
	}}
	r.acts.Handler = agent
	w := r.deliver(r.bot(), "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	// Two failed attempts and the successful third of the first offer, then the re-offer
	// ten minutes later.
	if agent.count() != 4 {
		t.Fatalf("%d deliveries, want 3 attempts of the first offer and 1 re-offer", agent.count())
	}
}

func TestAMessageFinishedElsewhereIsNotOfferedAgain(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{}
	agent.answer = func(_ int, d handoff.Delivery) (handoff.Answer, error) {
		// The agent gives its verdict through the reply API (the store), not the window.
		_, err := r.store.FinishMessage(context.Background(), time.Now(), d.Message.MessageKey, vocab.MessageHandled, "")
		return handoff.Answer{}, err
	}
	r.acts.Handler = agent
	w := r.deliver(r.bot(), "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if agent.count() != 1 {
		t.Fatalf("%d deliveries, want 1: the re-offer finds the message handled and ends the offers", agent.count())
	}
	if n := countRows(r, "SELECT count(*) FROM agent_sessions WHERE reply_window_id = $1", w.ReplyWindowID); n != 1 {
		t.Fatalf("%d sessions, want 1 (the refused re-offer writes nothing)", n)
	}
}

// runWithOffer runs a ReplyWindow started with the poll's first offer and reports how
// many HandOff activities it ran.
func runWithOffer(r *rig, in wfapi.WindowInput, offer wfapi.Offer) int {
	r.t.Helper()
	in.Offered = &offer
	var mu sync.Mutex
	handOffs := 0
	r.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		if info.ActivityType.Name == "HandOff" {
			handOffs++
		}
	})
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, in)
	if err := r.env.GetWorkflowError(); err != nil {
		r.t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return handOffs
}

func TestAFirstOfferMadeByThePollIsTakenWithoutAnotherHandOff(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	agent := &agentStub{answer: func(int, handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{Replies: []string{"answered at once"}, Handled: true}, nil
	}}
	r.acts.Handler = agent
	b := r.bot()
	w := r.deliver(b, "hello")
	// The poll's first offer: the HandOff activity's code, run before the workflow starts.
	out, err := r.acts.HandOff(r.ctx, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := runWithOffer(r, windowInput(w, limits), wfapi.Offer{SessionID: out.SessionID, MessageKey: out.MessageKey,
		Delivered: out.Delivered, Replies: out.Replies, Handled: out.Handled})
	if n != 0 || agent.count() != 1 {
		t.Fatalf("HandOff ran %d times, %d deliveries: the poll's offer is the first one, want 0 and 1", n, agent.count())
	}
	if got := sentTexts(r, b.info.BotID); strings.Join(got, "|") != "answered at once" {
		t.Fatalf("simulator received %q, want the offer's reply", got)
	}
	if m := messageOf(r, w.MessageKey); m.Status != vocab.MessageHandled {
		t.Fatalf("message is %s, want handled", m.Status)
	}
}

func TestAFirstOfferThatFailedPermanentlyEndsTheOffers(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = 35 * time.Minute
	r := newRig(t, limits)
	agent := &agentStub{answer: func(int, handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{}, &handoff.PermanentError{Reason: "webhook answered 410"}
	}}
	r.acts.Handler = agent
	w := r.deliver(r.bot(), "hello")
	if _, err := r.acts.HandOff(r.ctx, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1}); err == nil {
		t.Fatal("the hand-off succeeded, want a permanent failure")
	}
	n := runWithOffer(r, windowInput(w, limits), wfapi.Offer{MessageKey: w.MessageKey, Failed: true})
	if n != 0 || agent.count() != 1 {
		t.Fatalf("HandOff ran %d times, %d deliveries: a failed message is not offered again", n, agent.count())
	}
	if m := messageOf(r, w.MessageKey); m.Status != vocab.MessageFailed {
		t.Fatalf("message is %s, want failed", m.Status)
	}
	var st wfapi.WindowState
	if v, err := r.env.QueryWorkflow(wfapi.QueryWindowState); err != nil || v.Get(&st) != nil || st.Verdict != vocab.MessageFailed {
		t.Fatalf("window state %+v (%v), want verdict failed", st, err)
	}
}

// A reply can reach a window's workflow with its start, before the workflow took in any
// hand-off: it is taken when the poll's offer is in the start input (the offer is known
// before the Update handlers are registered), or when the request names its session (the
// reply API does; the session is checked against the window).
func TestAReplyArrivingWithTheWindowsStartIsTaken(t *testing.T) {
	t.Parallel()
	for _, viaOffer := range []bool{true, false} {
		t.Run(fmt.Sprintf("offer in the input %v", viaOffer), func(t *testing.T) {
			limits := store.DefaultLimits()
			limits.WindowLifetime = time.Hour
			r := newRig(t, limits)
			r.acts.Handler = &agentStub{}
			b := r.bot()
			w := r.deliver(b, "hello")
			out, err := r.acts.HandOff(r.ctx, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			req := wfapi.SendRequest{Type: "text", Text: "an immediate answer"}
			if !viaOffer {
				req.SessionID = out.SessionID
			}
			var sendErr error
			sent := false
			r.env.RegisterDelayedCallback(func() {
				r.env.UpdateWorkflow(wfapi.UpdateSend, "", &updateRecorder{done: func(err error) { sendErr, sent = err, true }}, req)
			}, 0)
			if viaOffer {
				runWithOffer(r, windowInput(w, limits), wfapi.Offer{SessionID: out.SessionID, MessageKey: out.MessageKey, Delivered: true})
			} else {
				r.env.SetStartTime(time.Now())
				r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
				if err := r.env.GetWorkflowError(); err != nil {
					t.Fatal(err)
				}
			}
			if !sent || sendErr != nil {
				t.Fatalf("reply with the start: done %v, error %v; want it sent", sent, sendErr)
			}
			if got := sentTexts(r, b.info.BotID); strings.Join(got, "|") != "an immediate answer" {
				t.Fatalf("simulator received %q", got)
			}
		})
	}
}
