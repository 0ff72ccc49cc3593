package activity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// answerFunc is a handler answering with a function of the delivery.
type answerFunc func(handoff.Delivery) (handoff.Answer, error)

func (f answerFunc) Deliver(_ context.Context, d handoff.Delivery) (handoff.Answer, error) {
	return f(d)
}

func TestHandOffReturnsTheAnswerWithTheTokenRedacted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var token string
	h.acts.Handler = answerFunc(func(d handoff.Delivery) (handoff.Answer, error) {
		token = d.SessionToken.Reveal()
		return handoff.Answer{Replies: []string{"hi", "your token is " + token}, Handled: true}, nil
	})
	h.inject(ilinksim.InjectRequest{Text: "hello"})
	res := must[activities.PollResult](t)(h.poll(false))
	ho, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Attempt: 1})
	if err != nil || !ho.Delivered || !ho.Handled || len(ho.Replies) != 2 || ho.Replies[0] != "hi" {
		t.Fatalf("hand-off %+v %v", ho, err)
	}
	if strings.Contains(fmt.Sprintf("%+v", ho), token) || ho.Replies[1] != "your token is [REDACTED]" {
		t.Fatalf("the answer carries the session token: %q", ho.Replies[1])
	}
}

func TestHandOffErrorsNeverCarryTheToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.Handler = answerFunc(func(d handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{}, errors.New("agent refused token " + d.SessionToken.Reveal())
	})
	h.inject(ilinksim.InjectRequest{Text: "hello"})
	res := must[activities.PollResult](t)(h.poll(false))
	_, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Attempt: 1})
	wantRetryable(t, err)
	if !strings.Contains(err.Error(), "agent refused token [REDACTED]") {
		t.Fatalf("error %q: want the handler's text with the token redacted", err)
	}
}

func TestPermanentHandOffFailureMarksTheMessageFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.Handler = answerFunc(func(d handoff.Delivery) (handoff.Answer, error) {
		return handoff.Answer{}, &handoff.PermanentError{Reason: "webhook answered 400: bad token " + d.SessionToken.Reveal()}
	})
	h.inject(ilinksim.InjectRequest{Text: "hello"})
	res := must[activities.PollResult](t)(h.poll(false))
	w := res.Opened[0]
	_, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1})
	wantNonRetryable(t, err, activities.ErrTypeHandOffFailed)
	m, gerr := h.store.GetMessage(h.ctx, w.MessageKey)
	if gerr != nil || m.Status != vocab.MessageFailed || m.FailureReason != "webhook answered 400: bad token [REDACTED]" {
		t.Fatalf("message %+v %v, want failed with the redacted reason", m, gerr)
	}
	if !strings.Contains(err.Error(), "webhook answered 400: bad token [REDACTED]") {
		t.Fatalf("error %q: want the reason", err)
	}
	if n := h.count("SELECT count(*) FROM agent_sessions WHERE closed_at IS NULL AND source_message_key = $1", w.MessageKey); n != 0 {
		t.Fatalf("%d sessions still open after the failure", n)
	}
	// Offering the failed message again is refused.
	_, err = run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 2})
	wantNonRetryable(t, err, string(vocab.CodeAttemptConflict))
}

func TestFinishMessageRecordsTheVerdictOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w, _ := h.deliver("hello")
	out, err := run[activities.FinishOutput](h, h.acts.FinishMessage, activities.FinishInput{MessageKey: w.MessageKey, Status: vocab.MessageHandled})
	if err != nil || out.Status != vocab.MessageHandled {
		t.Fatalf("finish: %+v %v", out, err)
	}
	if out, err := run[activities.FinishOutput](h, h.acts.FinishMessage, activities.FinishInput{MessageKey: w.MessageKey, Status: vocab.MessageHandled}); err != nil || out.Status != vocab.MessageHandled {
		t.Fatalf("finish again: %+v %v", out, err)
	}
	_, err = run[activities.FinishOutput](h, h.acts.FinishMessage, activities.FinishInput{MessageKey: w.MessageKey, Status: vocab.MessageFailed, Reason: "no"})
	wantNonRetryable(t, err, string(vocab.CodeAttemptConflict))
	_, err = run[activities.FinishOutput](h, h.acts.FinishMessage, activities.FinishInput{MessageKey: w.MessageKey, Status: "processing"})
	wantNonRetryable(t, err, string(vocab.CodeInvalidInput))
}
