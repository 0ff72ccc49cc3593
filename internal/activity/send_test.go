package activity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestSendTransmitsOnceWithTheWindowsContextTokenAndClientID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	out, err := h.send(ho.SessionID, "r1", "hi back")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != vocab.AttemptSent || out.ProviderMessageID == "" || out.ErrorCode != "" || out.SendsLeft != 9 {
		t.Fatalf("output %+v", out)
	}
	sent := h.sent()
	if len(sent) != 1 || sent[0].Outcome != ilinksim.OutcomeAccepted || sent[0].ClientID != out.ClientMessageID ||
		sent[0].Text != "hi back" || sent[0].ToUserID != h.bot.Owner || fmt.Sprint(sent[0].MessageID) != out.ProviderMessageID {
		t.Fatalf("simulator saw %+v", sent)
	}
	att, err := h.store.GetAttempt(h.ctx, out.AttemptID)
	if err != nil || att.Status != vocab.AttemptSent || att.ProviderMessageID != out.ProviderMessageID {
		t.Fatalf("attempt %+v %v", att, err)
	}
}

func TestTenSendsThenTheQuotaAnswersWithoutCallingIlink(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	for i := 0; i < 10; i++ {
		// The last is the final answer: the window keeps its last send for it.
		out, err := run[activities.SendOutput](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: fmt.Sprintf("r%d", i),
			Content: vocab.Content{Type: "text", Text: fmt.Sprintf("reply %d", i)}, Final: i == 9})
		if err != nil || out.Status != vocab.AttemptSent || out.SendsLeft != int32(9-i) {
			t.Fatalf("send %d: %+v %v", i, out, err)
		}
	}
	out, err := h.send(ho.SessionID, "r10", "one too many")
	if err != nil {
		t.Fatalf("a quota refusal is an answer, not an error: %v", err)
	}
	if out.ErrorCode != string(vocab.CodeReplyQuotaExhausted) || out.Status != vocab.AttemptFailed {
		t.Fatalf("output %+v", out)
	}
	if n := len(h.sent()); n != 10 {
		t.Fatalf("the simulator saw %d sends, want 10", n)
	}
}

func TestARetriedSendWithTheSameRequestIDDoesNotSendTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	first, err := h.send(ho.SessionID, "same-request", "only once")
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.send(ho.SessionID, "same-request", "only once")
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("retry answered %+v, first %+v", again, first)
	}
	n := 0
	for _, s := range h.sent() {
		if s.ClientID == first.ClientMessageID {
			n++
		}
	}
	if n != 1 || len(h.sent()) != 1 {
		t.Fatalf("the simulator saw client_id %d times (%d sends), want once", n, len(h.sent()))
	}
}

func TestADroppedConnectionAfterTheRequestWasReadIsUnknownAndNeverResent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	out, err := h.send(ho.SessionID, "r1", "lost in transit")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != vocab.AttemptUnknown || out.ErrorCode != vocab.SendOutcomeUnknown {
		t.Fatalf("output %+v, want unknown", out)
	}
	again, err := h.send(ho.SessionID, "r1", "lost in transit")
	if err != nil || again.Status != vocab.AttemptUnknown || again.AttemptID != out.AttemptID {
		t.Fatalf("retry %+v %v", again, err)
	}
	if n := h.requests("sendmessage"); n != 1 {
		t.Fatalf("%d sendmessage requests, want 1 (never re-sent)", n)
	}
}

func TestARetryThatFindsItsAttemptSendingCompletesItUnknownWithoutSending(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	// An earlier execution reserved and started, then its worker died.
	content := vocab.Content{Type: "text", Text: "crashed mid-send"}
	prep, err := h.store.ReserveAndStart(h.ctx, time.Now(), store.ReplyInput{Session: store.BySessionID(ho.SessionID), Content: content, RequestID: "r1"}, store.SendPacing{})
	if err != nil || prep.Started == nil {
		t.Fatalf("reserve and start: %+v %v", prep, err)
	}
	att := prep.Attempt
	out, err := h.send(ho.SessionID, "r1", "crashed mid-send")
	if err != nil || out.Status != vocab.AttemptUnknown || out.AttemptID != att.AttemptID {
		t.Fatalf("output %+v %v", out, err)
	}
	if n := h.requests("sendmessage"); n != 0 {
		t.Fatalf("%d sendmessage requests, want none", n)
	}
}

func TestAThrottleRejectionFailsTheSendAndBlocksTheBot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.sim = func(c *ilinksim.Config) { c.ThrottleBurst = 2 } // the second send in a row is throttled
	})
	_, ho := h.deliver("hello")
	if out, err := h.send(ho.SessionID, "r1", "first"); err != nil || out.Status != vocab.AttemptSent {
		t.Fatalf("first send %+v %v", out, err)
	}
	before := time.Now()
	out, err := h.send(ho.SessionID, "r2", "second")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != vocab.AttemptFailed || out.ErrorCode != vocab.SendThrottled || out.RetryAfter.Before(before.Add(59*time.Minute)) {
		t.Fatalf("output %+v, want failed/throttled with a retry-after one penalty away", out)
	}
	att, _ := h.store.GetAttempt(h.ctx, out.AttemptID)
	if att.FailType != vocab.FailThrottled {
		t.Fatalf("fail type %q", att.FailType)
	}
	acct := h.account()
	if acct.SendsBlockedUntil == nil || !acct.SendsBlockedUntil.Equal(out.RetryAfter) {
		t.Fatalf("account sends blocked until %v, want %v", acct.SendsBlockedUntil, out.RetryAfter)
	}
	// The next send is answered by the breaker, without a call to iLink.
	requests := h.requests("sendmessage")
	next, err := h.send(ho.SessionID, "r3", "third")
	if err != nil || next.Status != vocab.AttemptFailed || next.ErrorCode != vocab.SendThrottled || !next.RetryAfter.Equal(out.RetryAfter) {
		t.Fatalf("next send %+v %v", next, err)
	}
	if n := h.requests("sendmessage"); n != requests {
		t.Fatalf("the blocked send reached iLink (%d → %d requests)", requests, n)
	}
	// Its reservation was given back: only the two transmitted sends count.
	if next.SendsLeft != 8 {
		t.Fatalf("sends left %d, want 8", next.SendsLeft)
	}
}

func TestSendsOfOneBotArePacedBySendGap(t *testing.T) {
	t.Parallel()
	const gap = 250 * time.Millisecond
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.SendGap = gap }
	})
	_, ho := h.deliver("hello")
	if _, err := h.send(ho.SessionID, "r1", "first"); err != nil {
		t.Fatal(err)
	}
	first := *h.account().LastSendAt
	if _, err := h.send(ho.SessionID, "r2", "second"); err != nil {
		t.Fatal(err)
	}
	second := *h.account().LastSendAt
	if d := second.Sub(first); d < gap {
		t.Fatalf("second send started %v after the first, want at least %v", d, gap)
	}
	if n := len(h.sent()); n != 2 {
		t.Fatalf("%d sends", n)
	}
}

func TestAStaleTokenOnSendFailsTheAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	if err := h.ctl.KillBot(h.ctx, h.bot.BotID); err != nil {
		t.Fatal(err)
	}
	out, err := h.send(ho.SessionID, "r1", "too late")
	if err != nil || out.Status != vocab.AttemptFailed || out.ErrorCode != vocab.SendStaleToken {
		t.Fatalf("output %+v %v", out, err)
	}
}

func TestAnHTTP5xxOnSendIsUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultStatus, Status: 503}); err != nil {
		t.Fatal(err)
	}
	out, err := h.send(ho.SessionID, "r1", "maybe")
	if err != nil || out.Status != vocab.AttemptUnknown {
		t.Fatalf("output %+v %v", out, err)
	}
}

func TestARequestThatNeverLeftFailsAsTransportAndGivesTheQuotaBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	// The account's base URL points at a closed port: the dial fails, nothing is sent.
	if _, err := h.pool.Exec(h.ctx, "UPDATE accounts SET base_url = 'http://127.0.0.1:1/' WHERE account_key = $1", h.key); err != nil {
		t.Fatal(err)
	}
	out, err := h.send(ho.SessionID, "r1", "never left")
	if err != nil || out.Status != vocab.AttemptFailed || out.ErrorCode != vocab.SendNotSent || out.SendsLeft != 10 {
		t.Fatalf("output %+v %v", out, err)
	}
	att, _ := h.store.GetAttempt(h.ctx, out.AttemptID)
	if att.FailType != vocab.FailTransport {
		t.Fatalf("fail type %q", att.FailType)
	}
}

func TestSendRefusalsAreAnswersNotErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	out, err := h.send("00000000-0000-0000-0000-000000000000", "r1", "who am I")
	if err != nil || out.ErrorCode != string(vocab.CodeInvalidAgentSession) {
		t.Fatalf("unknown session: %+v %v", out, err)
	}
	out, err = h.send(ho.SessionID, "r2", strings.Repeat("x", 16*1024+1))
	if err != nil || out.ErrorCode != string(vocab.CodeInvalidInput) {
		t.Fatalf("text too long: %+v %v", out, err)
	}
	// A superseded window refuses: a newer message took the conversation.
	h.inject(ilinksim.InjectRequest{Text: "newer"})
	if res, err := h.poll(false); err != nil || len(res.Retired) != 1 {
		t.Fatalf("poll %+v %v", res, err)
	}
	out, err = h.send(ho.SessionID, "r3", "to the old window")
	if err != nil || out.ErrorCode != string(vocab.CodeReplyWindowInactive) {
		t.Fatalf("superseded window: %+v %v", out, err)
	}
	if n := h.requests("sendmessage"); n != 0 {
		t.Fatalf("%d refused sends reached iLink", n)
	}
}

func TestHandOffOpensASessionAndDeliversItsTokenToTheHandlerOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var got []handoff.Delivery
	h.acts.Handler = handlerFunc(func(d handoff.Delivery) error { got = append(got, d); return nil })
	h.inject(ilinksim.InjectRequest{Text: "hello agent"})
	res := must[activities.PollResult](t)(h.poll(false))
	w := res.Opened[0]
	ho, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 1})
	if err != nil || !ho.Delivered || ho.MessageKey != w.MessageKey || ho.SessionID == "" || !ho.SessionEnd.Equal(w.ExpiresAt) {
		t.Fatalf("hand-off %+v %v", ho, err)
	}
	if len(got) != 1 || got[0].SessionID != ho.SessionID || got[0].Message.Payload.Summary != "hello agent" ||
		got[0].Message.Status != vocab.MessageProcessing || got[0].Window.ReplyWindowID != w.ReplyWindowID {
		t.Fatalf("delivery %+v", got)
	}
	tok := got[0].SessionToken
	if len(tok.Reveal()) != 43 {
		t.Fatalf("session token of %d characters, want 32 bytes base64url", len(tok.Reveal()))
	}
	if strings.Contains(fmt.Sprintf("%+v", ho), tok.Reveal()) {
		t.Fatal("the hand-off result carries the session token")
	}
	// The agent's capability works: the session validates by its token.
	sess, err := h.store.ValidateSession(h.ctx, time.Now(), store.ByToken(tok))
	if err != nil || sess.SessionID != ho.SessionID {
		t.Fatalf("session by token: %+v %v", sess, err)
	}
	// A re-offer opens another session.
	again, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: w.ReplyWindowID, Attempt: 2})
	if err != nil || again.SessionID == ho.SessionID || len(got) != 2 || got[1].SessionToken.Equal(tok) {
		t.Fatalf("re-offer %+v %v", again, err)
	}
}

func TestHandOffHandlerFailureIsRetryableAndRefusalsAreNot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acts.Handler = handlerFunc(func(handoff.Delivery) error { return fmt.Errorf("agent unreachable") })
	h.inject(ilinksim.InjectRequest{Text: "hello"})
	res := must[activities.PollResult](t)(h.poll(false))
	_, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Attempt: 1})
	wantRetryable(t, err)

	h.acts.Handler = nil
	ho, err := run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: res.Opened[0].ReplyWindowID, Attempt: 2})
	if err != nil || ho.Delivered || ho.SessionID == "" {
		t.Fatalf("without a handler: %+v %v", ho, err)
	}
	_, err = run[activities.HandOffOutput](h, h.acts.HandOff, activities.HandOffInput{ReplyWindowID: 999999, Attempt: 1})
	wantNonRetryable(t, err, string(vocab.CodeReplyWindowNotFound))
}

type handlerFunc func(handoff.Delivery) error

func (f handlerFunc) Deliver(_ context.Context, d handoff.Delivery) (handoff.Answer, error) {
	return handoff.Answer{}, f(d)
}

func TestASendWithoutRequestIDIsIdempotentPerScheduledActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	// Two fresh test environments present the same workflow run and activity id, as a
	// retry of one scheduled activity does.
	first, err := h.send(ho.SessionID, "", "no request id")
	if err != nil || first.Status != vocab.AttemptSent {
		t.Fatalf("first %+v %v", first, err)
	}
	again, err := h.send(ho.SessionID, "", "no request id")
	if err != nil || again.AttemptID != first.AttemptID {
		t.Fatalf("retry %+v %v", again, err)
	}
	if n := len(h.sent()); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
}

func TestASendUnderTheSessionOfAnotherWindowIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w1, _ := h.deliver("first")
	w2, ho2 := h.deliver("second") // supersedes the first window
	in := activities.SendInput{SessionID: ho2.SessionID, RequestID: "r1", Content: vocab.Content{Type: "text", Text: "hi"},
		ReplyWindowID: w1.ReplyWindowID}
	out, err := run[activities.SendOutput](h, h.acts.Send, in)
	if err != nil || out.ErrorCode != string(vocab.CodeInvalidAgentSession) || out.AttemptID != "" {
		t.Fatalf("session of window %d sent through window %d: %+v %v, want an invalid_agent_session refusal",
			w2.ReplyWindowID, w1.ReplyWindowID, out, err)
	}
	if n := h.count("SELECT count(*) FROM send_attempts"); n != 0 || h.requests("sendmessage") != 0 {
		t.Fatalf("%d attempts, %d sendmessage calls: a refused send writes and sends nothing", n, h.requests("sendmessage"))
	}
	in.ReplyWindowID = w2.ReplyWindowID
	if out, err := run[activities.SendOutput](h, h.acts.Send, in); err != nil || out.Status != vocab.AttemptSent {
		t.Fatalf("session of its own window: %+v %v, want sent", out, err)
	}
}

// The reply that answers a message (SendInput.FinishHandled) marks the message handled in
// its own Send once it is sent; a retry of that Send sends nothing again and answers the
// same.
func TestASentReplyThatAnswersItsMessageMarksItHandledInTheSameActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	in := activities.SendInput{SessionID: ho.SessionID, RequestID: "r1", Content: vocab.Content{Type: "text", Text: "the answer"},
		Final: true, FinishHandled: ho.MessageKey}
	for try := range 2 {
		out, err := run[activities.SendAnswer](h, h.acts.Send, in)
		if err != nil || out.Status != vocab.AttemptSent || out.MessageStatus != vocab.MessageHandled {
			t.Fatalf("try %d: %+v %v; want sent and the message handled", try, out, err)
		}
	}
	if m, err := h.store.GetMessage(h.ctx, ho.MessageKey); err != nil || m.Status != vocab.MessageHandled {
		t.Fatalf("message %+v %v", m, err)
	}
	if n := len(h.sent()); n != 1 {
		t.Fatalf("%d sends reached iLink, want 1", n)
	}
}

// A reply that answers a message but is not sent leaves the message unfinished: handled
// means answered.
func TestAReplyThatAnswersItsMessageButIsNotSentLeavesItUnfinished(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	if err := h.ctl.KillBot(h.ctx, h.bot.BotID); err != nil {
		t.Fatal(err)
	}
	out, err := run[activities.SendAnswer](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: "r1",
		Content: vocab.Content{Type: "text", Text: "too late"}, Final: true, FinishHandled: ho.MessageKey})
	if err != nil || out.Status != vocab.AttemptFailed || out.MessageStatus != "" {
		t.Fatalf("output %+v %v; want failed, the message not finished", out, err)
	}
	if m, err := h.store.GetMessage(h.ctx, ho.MessageKey); err != nil || m.Status == vocab.MessageHandled {
		t.Fatalf("message %+v %v: handled without an answer", m, err)
	}
}

// A sent reply whose message already has another verdict (the agent failed it meanwhile)
// keeps that verdict: the send answers sent, and no status.
func TestASentReplyLeavesAnotherVerdictAlreadyRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, ho := h.deliver("hello")
	if _, err := h.store.FinishMessage(h.ctx, time.Now(), ho.MessageKey, vocab.MessageFailed, "the agent gave up"); err != nil {
		t.Fatal(err)
	}
	out, err := run[activities.SendAnswer](h, h.acts.Send, activities.SendInput{SessionID: ho.SessionID, RequestID: "r1",
		Content: vocab.Content{Type: "text", Text: "late answer"}, Final: true, FinishHandled: ho.MessageKey})
	if err == nil && out.Status == vocab.AttemptSent && out.MessageStatus != "" {
		t.Fatalf("output %+v: the send claimed a verdict over the recorded one", out)
	}
	if m, err := h.store.GetMessage(h.ctx, ho.MessageKey); err != nil || m.Status != vocab.MessageFailed {
		t.Fatalf("message %+v %v: the recorded verdict changed", m, err)
	}
}
