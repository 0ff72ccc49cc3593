package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestTheBotsReminderKeepsTheWindowsLastSend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		maxSends   int32
		reminderOn bool
		want       int32
	}{
		{10, false, 10},
		{10, true, 9},
		{1, true, 1}, // a window of one send keeps it for the replies
	}
	for _, c := range cases {
		w, a := openWindow(), activeBot()
		w.MaxSends, a.ReminderOn = c.maxSends, c.reminderOn
		if got := rules.SendsFor(w, a); got != c.want {
			t.Errorf("SendsFor(max %d, reminder %v) = %d, want %d", c.maxSends, c.reminderOn, got, c.want)
		}
	}
}

func TestASendPastTheQuotaIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		used       int32
		reminderOn bool
		finalSlots int32
		final      bool
		want       vocab.Code
	}{
		{"sends left", 5, false, 0, false, ""},
		{"the last send", 9, false, 0, false, ""},
		{"every send used", 10, false, 0, true, vocab.CodeReplyQuotaExhausted},
		{"the slot kept for the final answer refuses another reply", 9, false, 1, false, vocab.CodeReplySlotsReserved},
		{"the final answer uses the kept slot", 9, false, 1, true, ""},
		{"the reminder's send is not the replies'", 9, true, 0, true, vocab.CodeReplyQuotaExhausted},
		{"the reminder's send and a final slot", 8, true, 1, false, vocab.CodeReplySlotsReserved},
	}
	for _, c := range cases {
		w, a := openWindow(), activeBot()
		w.Reserved, w.Transmitted, a.ReminderOn = c.used/2, c.used-c.used/2, c.reminderOn
		if got := rules.QuotaRefusal(w, a, c.finalSlots, c.final); got != c.want {
			t.Errorf("%s: QuotaRefusal = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAReplyIsHeldOnlyWhenItsWindowCannotCarryIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		state string
		now   time.Time
		used  int32
		want  vocab.Code
	}{
		{"the window can carry it", vocab.WindowOpen, t0, 5, ""},
		{"open but past its end", vocab.WindowOpen, t0.Add(time.Hour), 5, vocab.CodeReplyWindowExpired},
		{"expired", vocab.WindowExpired, t0, 0, vocab.CodeReplyWindowExpired},
		{"quota used up", vocab.WindowOpen, t0, 10, vocab.CodeReplyQuotaExhausted},
		{"the sends left are the final answer's", vocab.WindowOpen, t0, 9, vocab.CodeReplySlotsReserved},
	}
	for _, c := range cases {
		w := openWindow()
		w.State, w.Reserved, w.Transmitted = c.state, 0, c.used
		if got := rules.HoldReason(c.now, w, activeBot(), 1, false); got != c.want {
			t.Errorf("%s: HoldReason = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAGatewaySendMayUseTheSendKeptForTheReminder(t *testing.T) {
	t.Parallel()
	cases := []struct {
		used int32
		want vocab.Code
	}{{9, ""}, {10, vocab.CodeReplyQuotaExhausted}}
	for _, c := range cases {
		w := openWindow()
		w.Reserved, w.Transmitted = 0, c.used
		if got := codeOf(rules.CheckGatewayQuota(w)); got != c.want {
			t.Errorf("CheckGatewayQuota(used %d) = %q, want %q", c.used, got, c.want)
		}
	}
}

func TestAMessageRunsOutOfSendIndexes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		next int32
		want vocab.Code
	}{{0, ""}, {rules.MaxSendIndex - 1, ""}, {rules.MaxSendIndex, vocab.CodeReplyQuotaExhausted}}
	for _, c := range cases {
		if got := codeOf(rules.CheckSendIndex(c.next)); got != c.want {
			t.Errorf("CheckSendIndex(%d) = %q, want %q", c.next, got, c.want)
		}
	}
}
