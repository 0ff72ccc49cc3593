package ilink_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

const maxUint64 = ^uint64(0)

// TestSimMaxUint64MessageIDAndQuoteSvrIDRoundTrip injects a message whose
// message_id is 18446744073709551615 quoting svr_id 18446744073709551614,
// in the string and in the number encoding of the item ids.
func TestSimMaxUint64MessageIDAndQuoteSvrIDRoundTrip(t *testing.T) {
	for _, numeric := range []bool{false, true} {
		e := newSim(t, func(c *ilinksim.Config) { c.NumericItemIDs = numeric }, nil)
		in := e.inject(ilinksim.InjectRequest{
			Kind: ilinksim.KindText, Text: "quoting", MessageID: maxUint64,
			Ref: &ilinksim.RefSpec{SvrID: maxUint64 - 1, Title: "earlier", Text: "quoted text",
				PartialText: &ilinksim.PartialText{Start: "quo", End: "ext", StartIndex: 1, EndIndex: 1, QuoteMD5: "abc"}},
		})
		if !strings.Contains(string(in.Message), "18446744073709551615") {
			t.Fatalf("simulator did not issue the id: %s", in.Message)
		}
		page := e.poll("")
		if len(page.Messages) != 1 {
			t.Fatalf("%d messages", len(page.Messages))
		}
		m := page.Messages[0]
		if uint64(m.MessageID) != maxUint64 || m.ID() != maxUint64 || m.MessageID.String() != "18446744073709551615" {
			t.Fatalf("numeric=%v: message_id %d", numeric, m.MessageID)
		}
		it := m.ItemList[0]
		if uint64(it.MsgID) != maxUint64 {
			t.Fatalf("numeric=%v: msg_id %d", numeric, it.MsgID)
		}
		ref := it.RefMsg
		if ref == nil || uint64(ref.SvrID) != maxUint64-1 || ref.Title != "earlier" || ref.MessageItem == nil ||
			ref.MessageItem.TextItem.Text != "quoted text" || ref.PartialText == nil || ref.PartialText.QuoteMD5 != "abc" {
			t.Fatalf("numeric=%v: ref_msg %+v", numeric, ref)
		}
		// Re-encoding keeps every digit.
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"message_id":18446744073709551615`) || !strings.Contains(string(b), `"svr_id":"18446744073709551614"`) {
			t.Fatalf("re-encoded %s", b)
		}
	}
}

// TestSimInboundMessageCarriesTheFullModel checks the fields of an inbound
// text message against what the simulator says it queued.
func TestSimInboundMessageCarriesTheFullModel(t *testing.T) {
	e := newSim(t, nil, nil)
	in := e.inject(ilinksim.InjectRequest{Kind: ilinksim.KindText, Text: "hello"})
	m := e.poll("").Messages[0]
	if uint64(m.MessageID) != in.MessageID || m.MessageID < 1<<53 || m.ContextToken.Reveal() != in.ContextToken ||
		m.ClientID != in.ClientID || m.FromUserID != e.bot.Owner || m.ToUserID != e.bot.BotID ||
		m.MessageType != ilink.MessageTypeUser || m.MessageState != ilink.MessageStateFinish || m.SessionID == "" ||
		m.CreateTimeMs == 0 || uint64(m.Seq) != in.Seq {
		t.Fatalf("message %+v vs injected %+v", m, in)
	}
	if len(m.ItemList) != 1 || m.ItemList[0].Type != ilink.ItemText || m.ItemList[0].TextItem.Text != "hello" {
		t.Fatalf("items %+v", m.ItemList)
	}
}

// TestSimCursorAdvancesAndHandedOutMessagesAreNotReplayed polls twice with
// the advancing cursor.
func TestSimCursorAdvancesAndHandedOutMessagesAreNotReplayed(t *testing.T) {
	e := newSim(t, nil, nil)
	e.inject(ilinksim.InjectRequest{Text: "one"})
	e.inject(ilinksim.InjectRequest{Text: "two"})
	p1 := e.poll("")
	if len(p1.Messages) != 2 || p1.Cursor == "" || p1.TimedOut {
		t.Fatalf("%+v", p1)
	}
	p2 := e.poll(p1.Cursor)
	if len(p2.Messages) != 0 || p2.Cursor == "" {
		t.Fatalf("second page %+v", p2)
	}
	e.inject(ilinksim.InjectRequest{Text: "three"})
	p3 := e.poll(p2.Cursor)
	if len(p3.Messages) != 1 || p3.Messages[0].ItemList[0].TextItem.Text != "three" || p3.Cursor == p2.Cursor {
		t.Fatalf("third page %+v", p3)
	}
	// An old cursor does not bring handed-out messages back.
	p4 := e.poll(p1.Cursor)
	if len(p4.Messages) != 0 {
		t.Fatalf("old cursor replayed %d messages", len(p4.Messages))
	}
}

// TestSimNextPollTimeoutComesFromLongpollingTimeoutMs checks that the
// server's hint is exposed and used.
func TestSimNextPollTimeoutComesFromLongpollingTimeoutMs(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.LongPollTimeoutMS = 1234 }, nil)
	page := e.poll("")
	if page.PollTimeout != 1234*time.Millisecond || page.TimedOut || len(page.Messages) != 0 {
		t.Fatalf("%+v", page)
	}
}

// TestSimEmptyPollReturnsAfterTheServerHold checks an empty long poll that
// the server ends (not the client).
func TestSimEmptyPollReturnsAfterTheServerHold(t *testing.T) {
	e := newSim(t, nil, nil)
	page := e.poll("")
	if page.TimedOut || len(page.Messages) != 0 || page.Cursor == "" {
		t.Fatalf("%+v", page)
	}
}

// TestSimGetConfigTicketDrivesTheTypingIndicator checks getconfig and both
// sendtyping statuses through the simulator's bookkeeping.
func TestSimGetConfigTicketDrivesTheTypingIndicator(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("hi")
	cfg, err := e.client.GetConfig(e.ctx, m.FromUserID, "")
	if err != nil || cfg.TypingTicket == "" {
		t.Fatalf("%v %v", cfg, err)
	}
	typing := func() int {
		st, err := e.ctl.BotState(e.ctx, e.bot.BotID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Peers {
			if p.UserID == m.FromUserID {
				if p.TypingTicket != cfg.TypingTicket.Reveal() {
					t.Fatalf("ticket mismatch")
				}
				return p.Typing
			}
		}
		t.Fatal("peer missing")
		return 0
	}
	if err := e.client.SendTyping(e.ctx, m.FromUserID, cfg.TypingTicket, ilink.TypingStart); err != nil || typing() != 1 {
		t.Fatalf("typing start: %v", err)
	}
	if err := e.client.SendTyping(e.ctx, m.FromUserID, cfg.TypingTicket, ilink.TypingStop); err != nil || typing() != 2 {
		t.Fatalf("typing stop: %v", err)
	}
}

// TestSimNotifyStartAndStopToggleOnlineState checks msg/notifystart and
// msg/notifystop.
func TestSimNotifyStartAndStopToggleOnlineState(t *testing.T) {
	e := newSim(t, nil, nil)
	online := func() bool {
		st, err := e.ctl.BotState(e.ctx, e.bot.BotID)
		if err != nil {
			t.Fatal(err)
		}
		return st.Online
	}
	if err := e.client.NotifyStart(e.ctx); err != nil || !online() {
		t.Fatalf("notifystart: %v", err)
	}
	if err := e.client.NotifyStop(e.ctx); err != nil || online() {
		t.Fatalf("notifystop: %v", err)
	}
}

// TestSimSendSuccessBodiesAllCountAsAccepted checks {}, {"ret":0} and
// {"ret":0,"message_id":N}.
func TestSimSendSuccessBodiesAllCountAsAccepted(t *testing.T) {
	for _, style := range []string{ilinksim.SendSuccessEmpty, ilinksim.SendSuccessRet0, ilinksim.SendSuccessMessageID} {
		e := newSim(t, func(c *ilinksim.Config) { c.SendSuccessStyle = style }, nil)
		m := e.converse("hi")
		res, err := e.client.SendText(e.ctx, replyOpts(m), "ok")
		if err != nil {
			t.Fatalf("%s: %v", style, err)
		}
		if (style == ilinksim.SendSuccessMessageID) != (res.MessageID != 0) {
			t.Fatalf("%s: message id %d", style, res.MessageID)
		}
	}
}
