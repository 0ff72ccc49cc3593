package ilink_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// pace is the sim-clock gap between sends, well clear of the burst throttle.
const pace = 5 * time.Second

// checkRejected asserts a ret -2 rejection and the simulator's reason.
func checkRejected(t *testing.T, e *simEnv, err error, reason string) {
	t.Helper()
	var ie *ilink.Error
	if !ilink.IsRejected(err) || !asIlinkError(err, &ie) || ie.Ret != -2 || ie.Errmsg != "prepare failed" {
		t.Fatalf("want rejected, got %v", err)
	}
	if ilink.IsRetryable(err) || ilink.MayHaveTakenEffect(err) {
		t.Fatalf("a rejection is neither retryable nor uncertain: %v", err)
	}
	s := e.sent()
	if last := s[len(s)-1]; last.Outcome != ilinksim.OutcomeRefused || last.Reason != reason {
		t.Fatalf("simulator recorded %s/%s, want refused/%s", last.Outcome, last.Reason, reason)
	}
}

// TestSimReplyQuotaRejectsTheEleventhSendUntilTheNextInbound uses the
// simulator's per-(bot, peer) quota of 10.
func TestSimReplyQuotaRejectsTheEleventhSendUntilTheNextInbound(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("question")
	for i := 1; i <= 10; i++ {
		e.advance(pace)
		if _, err := e.client.SendText(e.ctx, replyOpts(m), "part"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	e.advance(pace)
	_, err := e.client.SendText(e.ctx, replyOpts(m), "one too many")
	checkRejected(t, e, err, ilinksim.ReasonQuota)

	// The next inbound message resets the quota.
	m2 := e.converse("again")
	e.advance(pace)
	if _, err := e.client.SendText(e.ctx, replyOpts(m2), "ok again"); err != nil {
		t.Fatal(err)
	}
}

// TestSimReplyWindowRejectsSendsTwentyFourHoursAfterTheLastInbound uses the
// simulator's 24 h window on its clock.
func TestSimReplyWindowRejectsSendsTwentyFourHoursAfterTheLastInbound(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("question")
	e.advance(23*time.Hour + 59*time.Minute)
	if _, err := e.client.SendText(e.ctx, replyOpts(m), "still inside"); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Minute)
	_, err := e.client.SendText(e.ctx, replyOpts(m), "too late")
	checkRejected(t, e, err, ilinksim.ReasonWindow)
}

// TestSimBurstThrottleRejectsEverySendDuringThePenalty fires the
// simulator's burst detector (3 sends within 2 s) and waits out the penalty
// on the sim clock.
func TestSimBurstThrottleRejectsEverySendDuringThePenalty(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("question")
	for i := 1; i <= 2; i++ {
		if _, err := e.client.SendText(e.ctx, replyOpts(m), "fast"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	_, err := e.client.SendText(e.ctx, replyOpts(m), "third in a burst")
	checkRejected(t, e, err, ilinksim.ReasonThrottle)

	// A new inbound message does not lift the bot-wide penalty.
	m2 := e.converse("hello?")
	e.advance(30 * time.Minute)
	_, err = e.client.SendText(e.ctx, replyOpts(m2), "during the penalty")
	checkRejected(t, e, err, ilinksim.ReasonThrottle)

	e.advance(31 * time.Minute)
	if _, err := e.client.SendText(e.ctx, replyOpts(m2), "after the penalty"); err != nil {
		t.Fatal(err)
	}
}

// TestSimTextOver16KiBIsRejected uses the simulator's text limit.
func TestSimTextOver16KiBIsRejected(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("question")
	if _, err := e.client.SendText(e.ctx, replyOpts(m), strings.Repeat("a", 16384)); err != nil {
		t.Fatalf("16 KiB exactly: %v", err)
	}
	e.advance(pace)
	_, err := e.client.SendText(e.ctx, replyOpts(m), strings.Repeat("a", 16385))
	if !ilink.IsRejected(err) {
		t.Fatalf("got %v", err)
	}
	if s := e.sent(); s[len(s)-1].Reason != ilinksim.ReasonTextTooLong {
		t.Fatalf("reason %s", s[len(s)-1].Reason)
	}
}

// TestSimSendBeforeAnyInboundIsRejected checks the "user must write first"
// rule.
func TestSimSendBeforeAnyInboundIsRejected(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.ContextTokenMode = ilinksim.TokenIgnore }, nil)
	_, err := e.client.SendText(e.ctx, ilink.SendOptions{ToUserID: e.bot.Owner}, "hello first")
	checkRejected(t, e, err, ilinksim.ReasonNoInbound)
}
