package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// typingEvent is one sendtyping or sendmessage request the simulator received.
type typingEvent struct {
	seq    int
	kind   string // typing, cancel, send
	peerID string
}

// typingLog lists the bot-side typing and send requests in the simulator's order.
func (a *apiSystem) typingLog() []typingEvent {
	a.t.Helper()
	reqs, err := a.ctl.Requests(a.ctx)
	if err != nil {
		a.t.Fatal(err)
	}
	var out []typingEvent
	for _, r := range reqs {
		switch r.Endpoint {
		case "sendtyping":
			var b struct {
				UserID string `json:"ilink_user_id"`
				Status int    `json:"status"`
			}
			if err := json.Unmarshal(r.Body, &b); err != nil {
				a.t.Fatalf("sendtyping body: %v", err)
			}
			kind := "typing"
			if b.Status == 2 {
				kind = "cancel"
			}
			out = append(out, typingEvent{seq: r.Seq, kind: kind, peerID: b.UserID})
		case "sendmessage":
			out = append(out, typingEvent{seq: r.Seq, kind: "send"})
		}
	}
	return out
}

// peerTyping is the simulator's last typing status for a bot's peer (1 typing, 2 cancelled).
func (a *apiSystem) peerTyping(botID, peer string) int {
	a.t.Helper()
	st, err := a.ctl.BotState(a.ctx, botID)
	if err != nil {
		a.t.Fatal(err)
	}
	for _, p := range st.Peers {
		if p.UserID == peer {
			return p.Typing
		}
	}
	return 0
}

func TestTypingIsShownFromTheHandOffUntilTheFirstReplyOrTheVerdictAndNeverCostsQuota(t *testing.T) {
	t.Parallel()
	rcv, url := newReceiver(t, func(int, webhook.Delivery) (int, string) { return http.StatusOK, `{}` })
	limits := store.DefaultLimits()
	limits.MaxSends = 3
	a := startAPI(t, limits, func(_ *ilinksim.Config, cfg *gateway.Config) { useWebhook(cfg, url, 0) })
	const owner = "o9cq8typingowner0000000001@im.wechat"
	acct := a.enroll("qo_e2e_typing", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "are you there?"); err != nil {
		t.Fatal(err)
	}
	d := rcv.next(1, time.Minute)
	// Typing is shown in the background of the hand-off (it never holds a hand-off up).
	a.eventually("typing shown after the hand-off", 30*time.Second, func() (bool, error) {
		return a.peerTyping(bot.BotID, owner) == 1, nil
	})
	auth := []string{"Authorization", "Bearer " + d.SessionToken}

	// An agent's own typing calls cost no quota and write nothing.
	before := a.digest()
	for _, status := range []string{"cancel", "typing"} {
		got := a.do(http.MethodPost, "/v1/typing", []byte(`{"status":"`+status+`"}`), auth...)
		if got.status != http.StatusOK {
			t.Fatalf("typing %s: %d %s", status, got.status, got.body)
		}
		want := map[string]int{"typing": 1, "cancel": 2}[status]
		if got := a.peerTyping(bot.BotID, owner); got != want {
			t.Fatalf("after POST /v1/typing %s the user sees status %d, want %d", status, got, want)
		}
	}
	if a.digest() != before {
		t.Fatal("a typing call wrote to the store")
	}
	a.refused("typing with a bad status", http.StatusBadRequest, replyapi.CodeInvalidStatus, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/typing", []byte(`{"status":"dancing"}`), auth...)
	})
	a.refused("typing without a session", http.StatusUnauthorized, replyapi.CodeInvalidSession, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/typing", []byte(`{"status":"typing"}`))
	})
	if w := a.storedWindow(acct.AccountKey); w.SendsLeft() != limits.MaxSends {
		t.Fatalf("typing cost quota: %d sends left of %d", w.SendsLeft(), limits.MaxSends)
	}

	// The first reply cancels typing.
	if got := a.untilWindowReady(func() answer { return a.reply(d.SessionToken, "yes, here", "") }); got.status != http.StatusOK {
		t.Fatalf("reply: %d %s", got.status, got.body)
	}
	if got := a.peerTyping(bot.BotID, owner); got != 2 {
		t.Fatalf("after the first reply the user sees typing status %d, want 2 (cancelled)", got)
	}
	log := a.typingLog()
	firstTyping, send, cancelAfter := -1, -1, -1
	for i, e := range log {
		switch {
		case e.kind == "typing" && firstTyping < 0:
			firstTyping = i
		case e.kind == "send" && send < 0:
			send = i
		case e.kind == "cancel" && send >= 0 && cancelAfter < 0:
			cancelAfter = i
		}
	}
	if firstTyping < 0 || send < firstTyping || cancelAfter < send {
		t.Fatalf("want typing, then the reply, then a cancel; the simulator saw %+v", log)
	}

	// A typing failure never fails a hand-off: getconfig answers 500 for the next message.
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "getconfig", Kind: ilinksim.FaultStatus, Status: 500, Count: 10}); err != nil {
		t.Fatal(err)
	}
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "sendtyping", Kind: ilinksim.FaultStatus, Status: 500, Count: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "second question"); err != nil {
		t.Fatal(err)
	}
	d2 := rcv.next(2, time.Minute)
	if got := a.untilWindowReady(func() answer { return a.reply(d2.SessionToken, "second answer", "") }); got.status != http.StatusOK {
		t.Fatalf("reply with typing failing: %d %s", got.status, got.body)
	}

	// The verdict cancels typing too.
	if err := a.ctl.ClearFaults(a.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "third question"); err != nil {
		t.Fatal(err)
	}
	d3 := rcv.next(3, time.Minute)
	a.eventually("typing shown for the third message", 30*time.Second, func() (bool, error) {
		return a.peerTyping(bot.BotID, owner) == 1, nil
	})
	a.done(d3.SessionToken)
	if got := a.peerTyping(bot.BotID, owner); got != 2 {
		t.Fatalf("after the verdict the user sees typing status %d, want 2 (cancelled)", got)
	}
}
