package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/gateway"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// TestActionsPerInboundMessageWithOneReplyAreAtMostSix measures what one more inbound
// message with one reply costs in Temporal actions: after a warm-up message, a stream of
// messages each answered once through the send Update (each superseding the previous
// window, the last one expiring on its timer), counted from the histories of every
// workflow the namespace ran, before and after. It makes no query, so the count is the
// product's own.
func TestActionsPerInboundMessageWithOneReplyAreAtMostSix(t *testing.T) {
	limits := store.DefaultLimits()
	limits.WindowLifetime = 15 * time.Second
	s := start(t, limits, func(c *gateway.Config, _ *gateway.Options) { c.PollSession = 10 * time.Minute })
	const owner = "o9cq8e2eactions0000000001@im.wechat"
	acct := s.enroll("qo_e2e_actions", owner)
	bot := s.botOf(owner)

	var windows []int64
	message := func(i int) {
		t.Helper()
		if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", fmt.Sprintf("message %d", i)); err != nil {
			t.Fatal(err)
		}
		var w store.Window
		s.eventually("window handed off", 30*time.Second, func() (bool, error) {
			open, err := s.store.ListWindows(s.ctx, store.WindowFilter{AccountKey: acct.AccountKey, State: store.WindowOpen})
			if err != nil || len(open) != 1 || (len(windows) > 0 && open[0].ReplyWindowID == windows[len(windows)-1]) {
				return false, err
			}
			w = open[0]
			m, err := s.store.GetMessage(s.ctx, w.SourceMessageKey)
			return err == nil && m.Status == store.MessageProcessing && s.running(wfapi.ReplyWindowID(w.ReplyWindowID)), err
		})
		windows = append(windows, w.ReplyWindowID)
		if res, err := s.send(w.ReplyWindowID, fmt.Sprintf("reply %d", i)); err != nil || res.Status != store.AttemptSent {
			t.Fatalf("reply %d: %+v %v", i, res, err)
		}
	}

	message(0) // warm-up: the poller and its activity are running
	base, before := actions(s.executions())
	const n = 10
	for i := 1; i <= n; i++ {
		message(i)
	}
	for _, id := range windows {
		s.waitClosed(wfapi.ReplyWindowID(id), limits.WindowLifetime+time.Minute)
	}
	total, after := actions(s.executions())
	delta := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			delta[k] = d
		}
	}
	per := float64(total-base) / n
	t.Logf("%d inbound messages with one reply each cost %d Temporal actions: %.1f per message; by kind: %v", n, total-base, per, delta)
	if per > 6 {
		t.Fatalf("%.1f actions per inbound message with one reply, want at most 6", per)
	}
	if d := delta["AccountPoller: ActivityTaskScheduled:PollAccount"]; d != 0 {
		t.Fatalf("%d PollAccount activities for %d pages: one poll activity commits many pages", d, n)
	}
	if d := delta["ReplyWindow: ActivityTaskScheduled:HandOff"]; d != 0 {
		t.Fatalf("%d HandOff activities: the poll makes the first offer", d)
	}
}
