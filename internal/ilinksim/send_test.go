package ilinksim

import (
	"strings"
	"testing"
	"time"
)

// gap keeps consecutive sends clear of the default burst detector.
const gap = 2 * time.Second

func TestReplyQuotaRefusesEleventhSendUntilNextInbound(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	for i := 1; i <= 10; i++ {
		e.advance(gap)
		if r := e.send(b, b.Owner, in.ContextToken, "reply"); num(r, "ret") != 0 || num(r, "message_id") == 0 {
			t.Fatalf("send %d: %v", i, r)
		}
	}
	e.advance(gap)
	r := e.send(b, b.Owner, in.ContextToken, "eleventh")
	if num(r, "ret") != -2 || r["errmsg"] != "prepare failed" {
		t.Fatalf("11th send: %v", r)
	}
	in2 := e.inject(b.BotID, InjectRequest{Text: "again"})
	e.advance(gap)
	if r := e.send(b, b.Owner, in2.ContextToken, "after reset"); num(r, "ret") != 0 {
		t.Fatalf("send after new inbound: %v", r)
	}
	sent, err := e.ctl.Sent(e.ctx, b.BotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 12 || sent[10].Outcome != OutcomeRefused || sent[10].Reason != ReasonQuota || sent[11].Outcome != OutcomeAccepted {
		t.Fatalf("send log: %+v", sent)
	}
}

func TestReplyWindowClosesTwentyFourHoursAfterLastInbound(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	e.advance(24*time.Hour - time.Second)
	if r := e.send(b, b.Owner, in.ContextToken, "just in time"); num(r, "ret") != 0 {
		t.Fatalf("send inside window: %v", r)
	}
	e.advance(time.Second)
	if r := e.send(b, b.Owner, in.ContextToken, "too late"); num(r, "ret") != -2 {
		t.Fatalf("send after 24h: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if got := sent[len(sent)-1].Reason; got != ReasonWindow {
		t.Fatalf("reason %q, want window", got)
	}
	// A new inbound message opens a new window.
	in2 := e.inject(b.BotID, InjectRequest{Text: "back"})
	e.advance(gap) // refused attempts count toward the burst detector too
	if r := e.send(b, b.Owner, in2.ContextToken, "ok"); num(r, "ret") != 0 {
		t.Fatalf("send after new inbound: %v", r)
	}
}

func TestIdlePeerAnswersErrcode14After66Hours(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	e.advance(66 * time.Hour)
	if r := e.send(b, b.Owner, in.ContextToken, "hello?"); !isStale(r) {
		t.Fatalf("send after 66h idle: %v", r)
	}
	// The bot itself is not dead: polling still works.
	if r := e.poll(b.Token, ""); num(r, "ret") != 0 {
		t.Fatalf("poll: %v", r)
	}
}

func TestSendBeforeAnyInboundIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	if r := e.send(b, b.Owner, "", "hello"); num(r, "ret") != -2 {
		t.Fatalf("send without inbound: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if sent[0].Reason != ReasonNoInbound {
		t.Fatalf("reason %q", sent[0].Reason)
	}
}

func TestBurstThrottlePenaltyRefusesEverySendUntilItEnds(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ThrottleBurst, c.ThrottleInterval, c.ThrottlePenalty = 3, 2*time.Second, time.Hour })
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	for i := 0; i < 2; i++ {
		if r := e.send(b, b.Owner, in.ContextToken, "burst"); num(r, "ret") != 0 {
			t.Fatalf("send %d: %v", i, r)
		}
	}
	if r := e.send(b, b.Owner, in.ContextToken, "third"); num(r, "ret") != -2 || r["errmsg"] != "prepare failed" {
		t.Fatalf("third send in burst: %v", r)
	}
	// A new inbound message does not lift the bot-wide penalty, and
	// getupdates keeps working.
	in2 := e.inject(b.BotID, InjectRequest{Text: "still there?"})
	if r := e.poll(b.Token, ""); num(r, "ret") != 0 || len(msgs(r)) != 2 {
		t.Fatalf("poll during penalty: %v", r)
	}
	e.advance(59 * time.Minute)
	if r := e.send(b, b.Owner, in2.ContextToken, "during penalty"); num(r, "ret") != -2 {
		t.Fatalf("send during penalty: %v", r)
	}
	st, _ := e.ctl.BotState(e.ctx, b.BotID)
	if st.PenaltyUntil.IsZero() {
		t.Fatal("penalty not visible in bot state")
	}
	e.advance(time.Minute)
	if r := e.send(b, b.Owner, in2.ContextToken, "after penalty"); num(r, "ret") != 0 {
		t.Fatalf("send after penalty: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if sent[2].Reason != ReasonThrottle || sent[3].Reason != ReasonThrottle {
		t.Fatalf("reasons: %+v", sent)
	}
}

func TestThrottlePenaltyExtendsOnAttemptWhenConfigured(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ThrottleBurst, c.ThrottlePenalty, c.ThrottleExtendOnAttempt = 2, time.Hour, true })
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	e.send(b, b.Owner, in.ContextToken, "1")
	e.send(b, b.Owner, in.ContextToken, "2") // starts the penalty
	e.advance(50 * time.Minute)
	e.send(b, b.Owner, in.ContextToken, "probe") // restarts it
	e.advance(50 * time.Minute)
	if r := e.send(b, b.Owner, in.ContextToken, "still throttled"); num(r, "ret") != -2 {
		t.Fatalf("penalty not extended: %v", r)
	}
}

func TestTextOver16KiBIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	if r := e.send(b, b.Owner, in.ContextToken, strings.Repeat("é", 8192)); num(r, "ret") != 0 { // 16384 bytes
		t.Fatalf("16384-byte text: %v", r)
	}
	e.advance(gap)
	if r := e.send(b, b.Owner, in.ContextToken, strings.Repeat("a", 16385)); num(r, "ret") != -2 {
		t.Fatalf("16385-byte text: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if sent[1].Reason != ReasonTextTooLong {
		t.Fatalf("reason %q", sent[1].Reason)
	}
}

func TestSendRequiresExactlyOneItem(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	m := textMsg(b.Owner, in.ContextToken, "a")
	msg := m["msg"].(map[string]any)
	item := msg["item_list"].([]any)[0]
	msg["item_list"] = []any{item, item}
	if r := e.api(b.Token, "sendmessage", m); num(r, "ret") != -2 {
		t.Fatalf("two items: %v", r)
	}
	msg["item_list"] = []any{}
	if r := e.api(b.Token, "sendmessage", m); num(r, "ret") != -2 {
		t.Fatalf("no items: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if len(sent) != 2 || sent[0].Reason != ReasonInvalid || sent[1].Reason != ReasonInvalid {
		t.Fatalf("send log: %+v", sent)
	}
	// Invalid sends do not count toward the quota or the burst detector.
	if r := e.send(b, b.Owner, in.ContextToken, "fine"); num(r, "ret") != 0 {
		t.Fatalf("valid send: %v", r)
	}
}

func TestContextTokenModes(t *testing.T) {
	t.Run("present rejects missing and foreign tokens", func(t *testing.T) {
		e := newEnv(t, nil)
		b := e.bot()
		in := e.inject(b.BotID, InjectRequest{Text: "hi"})
		if r := e.send(b, b.Owner, "", "no token"); num(r, "ret") != -2 {
			t.Fatalf("missing token: %v", r)
		}
		e.advance(gap)
		if r := e.send(b, b.Owner, "CKbogus", "bogus"); num(r, "ret") != -2 {
			t.Fatalf("unknown token: %v", r)
		}
		e.inject(b.BotID, InjectRequest{Text: "newer"})
		e.advance(gap)
		if r := e.send(b, b.Owner, in.ContextToken, "older token"); num(r, "ret") != 0 {
			t.Fatalf("older token in present mode: %v", r)
		}
		sent, _ := e.ctl.Sent(e.ctx, b.BotID)
		if sent[0].Reason != ReasonContextToken || sent[1].Reason != ReasonContextToken {
			t.Fatalf("reasons: %+v", sent)
		}
	})
	t.Run("latest rejects an older token", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ContextTokenMode = TokenLatest })
		b := e.bot()
		old := e.inject(b.BotID, InjectRequest{Text: "hi"})
		in := e.inject(b.BotID, InjectRequest{Text: "newer"})
		if r := e.send(b, b.Owner, old.ContextToken, "older token"); num(r, "ret") != -2 {
			t.Fatalf("older token: %v", r)
		}
		e.advance(gap)
		if r := e.send(b, b.Owner, in.ContextToken, "latest"); num(r, "ret") != 0 {
			t.Fatalf("latest token: %v", r)
		}
	})
	t.Run("ignore accepts no token", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ContextTokenMode = TokenIgnore })
		b := e.bot()
		e.inject(b.BotID, InjectRequest{Text: "hi"})
		if r := e.send(b, b.Owner, "", "tokenless"); num(r, "ret") != 0 {
			t.Fatalf("tokenless: %v", r)
		}
	})
}

func TestSendSuccessBodyStyles(t *testing.T) {
	for style, want := range map[string]string{SendSuccessEmpty: `{}`, SendSuccessRet0: `{"ret":0}`} {
		e := newEnv(t, func(c *Config) { c.SendSuccessStyle = style })
		b := e.bot()
		in := e.inject(b.BotID, InjectRequest{Text: "hi"})
		sent := e.send(b, b.Owner, in.ContextToken, "x")
		if len(sent) != strings.Count(want, ":") || num(sent, "ret") != 0 {
			t.Fatalf("%s: %v", style, sent)
		}
		log, _ := e.ctl.Sent(e.ctx, b.BotID)
		if string(log[0].Response) != want {
			t.Fatalf("%s: recorded response %s", style, log[0].Response)
		}
	}
}

func TestBotVoiceAndToolItemsAreAcceptedButNotRendered(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	voice := map[string]any{"msg": map[string]any{
		"to_user_id": b.Owner, "client_id": "c1", "message_type": 2, "message_state": 2, "context_token": in.ContextToken,
		"item_list": []any{map[string]any{"type": 3, "voice_item": map[string]any{"media": map[string]any{"encrypt_query_param": "x"}}}},
	}}
	if r := e.api(b.Token, "sendmessage", voice); num(r, "ret") != 0 {
		t.Fatalf("voice: %v", r)
	}
	e.advance(gap)
	tool := map[string]any{"msg": map[string]any{
		"to_user_id": b.Owner, "client_id": "c2", "message_type": 2, "message_state": 2, "context_token": in.ContextToken,
		"item_list": []any{map[string]any{"type": 11, "tool_call_start_item": map[string]any{"tool_name": "t", "tool_call_id": "1"}}},
	}}
	if r := e.api(b.Token, "sendmessage", tool); num(r, "ret") != 0 {
		t.Fatalf("tool: %v", r)
	}
	e.advance(gap)
	e.send(b, b.Owner, in.ContextToken, "text")
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if sent[0].Rendered || sent[0].RenderNote == "" || sent[1].Rendered || !sent[2].Rendered {
		t.Fatalf("render flags: %+v", sent)
	}
	st, _ := e.ctl.BotState(e.ctx, b.BotID)
	if st.Peers[0].SendsSinceInbound != 3 {
		t.Fatalf("accepted-but-invisible sends must use quota: %+v", st.Peers)
	}
}

func TestGeneratingThenFinishWithSameClientIDIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	m := textMsg(b.Owner, in.ContextToken, "thinking")
	m["msg"].(map[string]any)["client_id"] = "same"
	m["msg"].(map[string]any)["message_state"] = 1
	if r := e.api(b.Token, "sendmessage", m); num(r, "ret") != 0 {
		t.Fatalf("generating: %v", r)
	}
	e.advance(gap)
	m["msg"].(map[string]any)["message_state"] = 2
	if r := e.api(b.Token, "sendmessage", m); num(r, "ret") != -2 {
		t.Fatalf("finish with the same client_id: %v", r)
	}
}

func TestGetConfigRequiresIlinkUserIDAndTypingIsFree(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	r := e.api(b.Token, "getconfig", map[string]any{"user_id": b.Owner})
	if num(r, "ret") != -2 || r["errmsg"] != "ilink_user_id required" {
		t.Fatalf("getconfig with user_id: %v", r)
	}
	r = e.api(b.Token, "getconfig", map[string]any{"ilink_user_id": b.Owner})
	ticket, _ := r["typing_ticket"].(string)
	if num(r, "ret") != 0 || !strings.HasPrefix(ticket, "AARTBK8F") {
		t.Fatalf("getconfig: %v", r)
	}
	for _, st := range []int{1, 1, 2} {
		if r := e.api(b.Token, "sendtyping", map[string]any{"ilink_user_id": b.Owner, "typing_ticket": ticket, "status": st}); num(r, "ret") != 0 {
			t.Fatalf("sendtyping: %v", r)
		}
	}
	if r := e.api(b.Token, "msg/notifystart", nil); num(r, "ret") != 0 {
		t.Fatalf("notifystart: %v", r)
	}
	state, _ := e.ctl.BotState(e.ctx, b.BotID)
	if !state.Online || state.Peers[0].Typing != 2 || state.Peers[0].SendsSinceInbound != 0 {
		t.Fatalf("state: %+v", state)
	}
	if r := e.api(b.Token, "msg/notifystop", nil); num(r, "ret") != 0 {
		t.Fatalf("notifystop: %v", r)
	}
}

func TestKilledTokenAnswersErrcode14OnEveryEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	if err := e.ctl.KillBot(e.ctx, b.BotID); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"getupdates", "getuploadurl", "getconfig", "sendtyping", "msg/notifystart", "msg/notifystop"} {
		if r := e.api(b.Token, ep, map[string]any{"ilink_user_id": b.Owner}); !isStale(r) || r["errmsg"] != "session timeout" {
			t.Fatalf("%s: %v", ep, r)
		}
	}
	if r := e.send(b, b.Owner, in.ContextToken, "x"); num(r, "errcode") != -14 {
		t.Fatalf("sendmessage: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if sent[0].Reason != ReasonStaleToken {
		t.Fatalf("reason %q", sent[0].Reason)
	}
}

func TestStaleTokenBodyStyles(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StaleTokenStyle = StaleBoth })
	r := e.poll("no-such-token", "")
	if num(r, "ret") != -14 || num(r, "errcode") != -14 {
		t.Fatalf("both: %v", r)
	}
	e = newEnv(t, func(c *Config) { c.StaleTokenStyle = StaleRet })
	r = e.poll("no-such-token", "")
	if _, has := r["errcode"]; has || num(r, "ret") != -14 {
		t.Fatalf("ret: %v", r)
	}
}

// TestRealTimeClockRefillsTheBurstLimit runs the simulator on real time: the clock moves
// by itself, so after two quick sends the third is accepted once the burst interval has
// passed, without any Advance; Advance still adds to the running clock.
func TestRealTimeClockRefillsTheBurstLimit(t *testing.T) {
	const interval = 300 * time.Millisecond
	e := newEnv(t, func(c *Config) {
		c.RealTime, c.ThrottleBurst, c.ThrottleInterval, c.ThrottlePenalty = true, 3, interval, time.Hour
	})
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hi"})
	for i := 0; i < 2; i++ {
		if r := e.send(b, b.Owner, in.ContextToken, "quick"); num(r, "ret") != 0 {
			t.Fatalf("send %d: %v", i, r)
		}
	}
	sent, err := e.ctl.Sent(e.ctx, b.BotID)
	if err != nil || len(sent) != 2 {
		t.Fatalf("sent: %+v %v", sent, err)
	}
	refilled := sent[1].At.Add(interval)
	deadline := time.Now().Add(5 * time.Second)
	for !e.sim.Now().After(refilled) {
		if time.Now().After(deadline) {
			t.Fatalf("the real-time clock did not move: now %s, want after %s", e.sim.Now(), refilled)
		}
		time.Sleep(10 * time.Millisecond) // polling the clock, not timing the test
	}
	if r := e.send(b, b.Owner, in.ContextToken, "after the interval"); num(r, "ret") != 0 {
		t.Fatalf("third send after the burst interval on real time: %v", r)
	}
	before := e.sim.Now()
	after, err := e.ctl.Advance(e.ctx, time.Hour)
	if err != nil || after.Sub(before) < time.Hour {
		t.Fatalf("advance on real time: %s -> %s (%v)", before, after, err)
	}
}

// TestManualClockStandsStill: without RealTime the clock moves only through Advance.
func TestManualClockStandsStill(t *testing.T) {
	e := newEnv(t, nil)
	first := e.sim.Now()
	e.inject(e.bot().BotID, InjectRequest{Text: "hi"})
	if !e.sim.Now().Equal(first) {
		t.Fatalf("manual clock moved: %s -> %s", first, e.sim.Now())
	}
}
