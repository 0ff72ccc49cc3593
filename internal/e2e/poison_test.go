package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// deliveryOf waits for the recorder's delivery of the window's message.
func (s *system) deliveryOf(w store.Window) store.Message {
	s.t.Helper()
	var m store.Message
	s.eventually("the delivery of "+w.SourceMessageKey, time.Minute, func() (bool, error) {
		s.handler.mu.Lock()
		defer s.handler.mu.Unlock()
		for _, d := range s.handler.deliveries {
			if d.Message.MessageKey == w.SourceMessageKey {
				m = d.Message
				return true, nil
			}
		}
		return false, nil
	})
	return m
}

// answer sends a reply through the window and waits for the message to be handled.
func (s *system) answer(w store.Window, text string) {
	s.t.Helper()
	res, err := s.send(w.ReplyWindowID, text)
	if err != nil || res.Status != vocab.AttemptSent {
		s.t.Fatalf("reply to %s: %+v %v", w.SourceMessageKey, res, err)
	}
}

// A character no PostgreSQL text can hold (U+0000), from any WeChat user, in a text or a
// file's name: the message is stored, handed to the agent as it came and answered, and
// the bot's next message is answered at once; a page the store refuses for good goes to
// the quarantine while the bot goes on. Health stays green throughout.
func TestPoisonInputNeverStallsABotOrLosesAMessage(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	a := startAPI(t, limits, nil)
	const owner = "o9cq8e2epoison000000000001@im.wechat"
	acct := a.enroll("qo_e2e_poison", owner)
	bot := a.botOf(owner)
	healthy := func(when string) {
		t.Helper()
		if got := a.do(http.MethodGet, "/healthz", nil); got.status != http.StatusOK {
			t.Fatalf("/healthz %s: %d %s", when, got.status, got.body)
		}
	}
	a.eventually("first round trip", 30*time.Second, func() (bool, error) {
		got, err := a.store.GetAccount(a.ctx, acct.AccountKey)
		return got.LastPollAt != nil, err
	})
	healthy("before")

	var last int64
	next := func(req ilinksim.InjectRequest) (store.Window, store.Message) {
		t.Helper()
		if _, err := a.ctl.Inject(a.ctx, bot.BotID, req); err != nil {
			t.Fatal(err)
		}
		w, _ := a.openWindow(acct.AccountKey, last)
		last = w.ReplyWindowID
		return w, a.deliveryOf(w)
	}

	w, m := next(ilinksim.InjectRequest{Text: "before\x00after"})
	if m.Payload == nil || m.Payload.Summary != "before\x00after" {
		t.Fatalf("the agent was handed %+v, want the text as the user sent it", m.Payload)
	}
	a.answer(w, "text received")
	healthy("after a text with U+0000")

	w, m = next(ilinksim.InjectRequest{Kind: ilinksim.KindFile, FileName: "re\x00port.pdf"})
	if m.Payload == nil || len(m.Payload.Attachments) != 1 || m.Payload.Attachments[0].Name != "re\x00port.pdf" {
		t.Fatalf("the agent was handed %+v, want the file's name as the user's client sent it", m.Payload)
	}
	a.answer(w, "file received")

	w, _ = next(ilinksim.InjectRequest{Text: "and then"})
	a.answer(w, "answered at once")
	healthy("after a file name with U+0000")

	// A page the store refuses for good (here PostgreSQL itself, as a rule only the
	// database knows would): quarantined, the cursor moved past it, the bot goes on.
	dbtest.RefuseInboundText(t, a.pool, "poison-page")
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "a poison-page message"); err != nil {
		t.Fatal(err)
	}
	var q []store.QuarantinedPage
	a.eventually("the refused page in the quarantine", time.Minute, func() (bool, error) {
		var err error
		q, err = a.store.ListQuarantinedPages(a.ctx, acct.AccountKey)
		return len(q) == 1, err
	})
	if q[0].Scope != store.QuarantineWholePage || !q[0].CursorMoved || q[0].Messages != 1 ||
		q[0].ErrorCode != string(vocab.CodeInvalidInput) {
		t.Fatalf("quarantined %+v", q[0])
	}
	_, content, err := a.store.OpenQuarantinedPage(a.ctx, q[0].QuarantineID)
	if err != nil || !strings.Contains(content.Reveal(), "a poison-page message") {
		t.Fatalf("the quarantine does not hold the page as iLink handed it out: %v", err)
	}
	w, _ = next(ilinksim.InjectRequest{Text: "after the quarantine"})
	a.answer(w, "still answering")
	healthy("after a quarantined page")

	texts := a.sentTexts(bot.BotID)
	if strings.Join(texts, "|") != "text received|file received|answered at once|still answering" {
		t.Fatalf("the simulator received %q", texts)
	}
}
