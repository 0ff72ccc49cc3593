package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// echoWebhook starts a webhook agent that answers every delivery with one reply naming
// the message's text, and the verdict handled.
func echoWebhook(t *testing.T) (*receiver, string) {
	return newReceiver(t, func(_ int, d webhook.Delivery) (int, string) { return http.StatusOK, reAnswer(d) })
}

// reAnswer is a webhook answer with one reply, "re: " and the message's text (a merged
// message's texts are on lines of their own), and the verdict handled.
func reAnswer(d webhook.Delivery) string {
	b, err := json.Marshal(webhook.Answer{Replies: []string{"re: " + d.Message.Summary}, Handled: true})
	if err != nil {
		panic(err) // a string slice and a bool always marshal
	}
	return string(b)
}

// steer runs an operator command as `starter pause|resume|remove` does.
func (s *system) steer(verb, accountKey string, pauseFor time.Duration) operator.SteerResult {
	s.t.Helper()
	res, err := operator.Steer(s.ctx, s.store, s.tc, operator.SteerRequest{Verb: verb, AccountKey: accountKey, PauseFor: pauseFor, Reason: "e2e"})
	if err != nil {
		s.t.Fatalf("%s: %v", verb, err)
	}
	return res
}

// acceptedTexts lists the texts the simulator accepted from a bot, in order.
func acceptedTexts(ctx context.Context, ctl *ilinksim.Control, botID string) ([]string, error) {
	sent, err := ctl.Sent(ctx, botID)
	var texts []string
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeAccepted {
			texts = append(texts, m.Text)
		}
	}
	return texts, err
}

// answered lists the texts the simulator accepted from the bot.
func (s *system) answered(botID string) []string {
	s.t.Helper()
	texts, err := acceptedTexts(s.ctx, s.ctl, botID)
	if err != nil {
		s.t.Fatal(err)
	}
	return texts
}

// waitAnswer waits until the simulator accepted the reply re: text.
func (s *system) waitAnswer(botID, text string, within time.Duration) {
	s.t.Helper()
	s.eventually("the answer to "+text, within, func() (bool, error) {
		for _, got := range s.answered(botID) {
			if strings.Contains(got, text) {
				return true, nil
			}
		}
		return false, nil
	})
}

// inboxStatuses counts the stored messages by status.
func (s *system) inboxStatuses() map[string]int {
	s.t.Helper()
	rows, err := s.pool.Query(s.ctx, "SELECT status, count(*) FROM inbound_messages GROUP BY status")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			s.t.Fatal(err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// waitOnlyHandled waits until the inbox holds n messages, all handled.
func (s *system) waitOnlyHandled(n int, within time.Duration) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%d messages, all handled", n), within, func() (bool, error) {
		st := s.inboxStatuses()
		return st[vocab.MessageHandled] == n && len(st) == 1, nil
	})
}

// A removal stops the poller's work at once: the poller closes within seconds (it does
// not wait out the long poll it holds, nor retry it), and the simulator sees no more
// long polls of the bot.
func TestARemovalStopsThePollerWithinSeconds(t *testing.T) {
	t.Parallel()
	_, url := echoWebhook(t)
	// A poll session as long as a production one: the poll activity would go on
	// long-polling a removed bot for minutes if the removal did not end it.
	s := start(t, store.DefaultLimits(), webhookConfig(url, 0), func(c *gateway.Config, _ *gateway.Options) {
		c.PollSession = 10 * time.Minute
	})
	const owner = "o9cq8e2eremoval0000000001@im.wechat"
	acct, bot := s.enrolledBot("qo_e2e_removal", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "before the removal"); err != nil {
		t.Fatal(err)
	}
	s.waitAnswer(bot.BotID, "before the removal", time.Minute)

	s.steer(operator.Remove, acct, 0)
	s.waitClosed(s.pollerWF(acct), 30*time.Second)
	s.eventually("no long poll of the removed bot", 30*time.Second, func() (bool, error) {
		st, err := s.ctl.BotState(s.ctx, bot.BotID)
		return err == nil && st.Pollers == 0, err
	})
	// The poller is closed, so no attempt of its poll activity can be scheduled again.
	if a, err := s.store.GetAccount(s.ctx, acct); err != nil || a.Status != vocab.AccountDisabled {
		t.Fatalf("account after the removal: %+v %v", a, err)
	}
}

// A message the user sends while the bot is paused is answered within seconds of the
// operator's resume, without the user writing again.
func TestAMessageSentWhilePausedIsAnsweredSoonAfterTheResume(t *testing.T) {
	t.Parallel()
	_, url := echoWebhook(t)
	s := start(t, store.DefaultLimits(), webhookConfig(url, 0))
	const owner = "o9cq8e2epauseresume000001@im.wechat"
	acct, bot := s.enrolledBot("qo_e2e_pause_resume", owner)

	s.steer(operator.Pause, acct, time.Hour)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "sent while paused"); err != nil {
		t.Fatal(err)
	}
	// The message waits: at iLink (no poll of a paused account) or, when the long poll
	// held as the pause landed brought it, stored with its hand-off refused.
	s.eventually("the message waiting", time.Minute, func() (bool, error) {
		st, err := s.ctl.BotState(s.ctx, bot.BotID)
		if err != nil {
			return false, err
		}
		in := s.inboxStatuses()
		return st.Queued+in[vocab.MessageReceived]+in[vocab.MessageProcessing] == 1, nil
	})
	s.steer(operator.Resume, acct, 0)
	s.waitAnswer(bot.BotID, "sent while paused", 30*time.Second)
	s.waitOnlyHandled(1, 30*time.Second)
}

// sendsDone counts the Send activities a workflow completed (refused or not).
func (s *system) sendsDone(workflowID string) int {
	s.t.Helper()
	it := s.tc.GetWorkflowHistory(s.ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled, done := map[int64]bool{}, 0
	for it.HasNext() {
		e, err := it.Next()
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return 0 // not started yet: the poll's first offer is still with the agent
		}
		if err != nil {
			s.t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "Send" {
			scheduled[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
			done++
		}
	}
	return done
}

// An answer the pause refused is not lost: the agent answered while the bot was being
// paused, the reply was refused (account_not_active), and within seconds of the resume the
// message is offered again and answered; it is never marked failed for the pause.
func TestAnAnswerThePauseRefusedIsOfferedAgainAtTheResume(t *testing.T) {
	t.Parallel()
	paused := make(chan struct{})
	rcv, url := newReceiver(t, func(n int, d webhook.Delivery) (int, string) {
		if n == 1 {
			<-paused // the agent answers once the bot is paused
		}
		return http.StatusOK, reAnswer(d)
	})
	s := start(t, store.DefaultLimits(), webhookConfig(url, 0))
	const owner = "o9cq8e2epauserefused00001@im.wechat"
	acct, bot := s.enrolledBot("qo_e2e_pause_refused", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "answered while pausing"); err != nil {
		t.Fatal(err)
	}
	rcv.next(1, time.Minute)
	w := s.storedWindow(acct)
	s.steer(operator.Pause, acct, time.Hour)
	close(paused)
	s.eventually("the reply refused by the pause", time.Minute, func() (bool, error) {
		return s.sendsDone(s.windowWF(w.ReplyWindowID)) >= 1, nil
	})
	if st := s.inboxStatuses(); st[vocab.MessageFailed] != 0 {
		t.Fatalf("the pause failed the message: %v", st)
	}
	s.steer(operator.Resume, acct, 0)
	s.waitAnswer(bot.BotID, "answered while pausing", 30*time.Second)
	s.waitOnlyHandled(1, 30*time.Second)
	if got := s.answered(bot.BotID); len(got) != 1 {
		t.Fatalf("answers %q, want one", got)
	}
}

// The race of an operator's pause with a user's message: `pause --for` landing from 200
// ms before to 200 ms after the message (21 offsets), with a webhook agent. Every message
// is answered exactly once, the account is active again within seconds of each
// pause_until, and no message is left received, processing or failed by the pause.
func TestAPauseLandingAroundAMessageLeavesItAnsweredOnceAfterThePause(t *testing.T) {
	t.Parallel()
	_, url := echoWebhook(t)
	s := start(t, store.DefaultLimits(), webhookConfig(url, 0))
	const owner = "o9cq8e2epauserace00000001@im.wechat"
	acct, bot := s.enrolledBot("qo_e2e_pause_race", owner)

	const offsets = 21
	const pauseFor = 2 * time.Second
	var worst time.Duration
	for i := 0; i < offsets; i++ {
		offset := -200*time.Millisecond + time.Duration(i)*20*time.Millisecond
		text := fmt.Sprintf("message %d (pause %+v after it)", i, offset)
		inject := func() {
			if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", text); err != nil {
				t.Fatal(err)
			}
		}
		var res operator.SteerResult
		if offset >= 0 {
			inject()
			time.Sleep(offset) // the offset is the point of the test, not a wait for the system
			res = s.steer(operator.Pause, acct, pauseFor)
		} else {
			res = s.steer(operator.Pause, acct, pauseFor)
			time.Sleep(-offset)
			inject()
		}
		until := *res.PauseUntil
		s.eventually("the account active again after its pause", pauseFor+time.Minute, func() (bool, error) {
			a, err := s.store.GetAccount(s.ctx, acct)
			return err == nil && a.Status == vocab.AccountActive, err
		})
		if late := time.Since(until); late > worst {
			worst = late
		}
		s.waitAnswer(bot.BotID, text, time.Minute)
	}
	t.Logf("the account was active again at most %v after a pause_until (%d pauses)", worst, offsets)
	if worst > 10*time.Second {
		t.Errorf("an account was active again %v after its pause_until, want within seconds", worst)
	}
	s.eventually("every message handled", time.Minute, func() (bool, error) {
		st := s.inboxStatuses()
		return st[vocab.MessageHandled]+st[vocab.MessageAbsorbed] == offsets && st[vocab.MessageHandled] > 0 &&
			st[vocab.MessageReceived]+st[vocab.MessageProcessing]+st[vocab.MessageFailed] == 0, nil
	})
	counts := map[string]int{}
	for _, got := range s.answered(bot.BotID) {
		for i := 0; i < offsets; i++ {
			if strings.Contains(got, fmt.Sprintf("message %d ", i)) {
				counts[fmt.Sprint(i)]++
			}
		}
	}
	for i := 0; i < offsets; i++ {
		if n := counts[fmt.Sprint(i)]; n != 1 {
			t.Errorf("message %d was answered %d times, want once", i, n)
		}
	}
}

// The normal supersede path logs nothing above INFO: the user writes again while the agent
// still works on the first message; the agent's answer to it is no longer the window's to
// send (the message went with the next delivery), and that is not a warning.
func TestTheSupersedePathLogsNothingAboveInfo(t *testing.T) {
	t.Parallel()
	first := make(chan struct{})
	superseded := make(chan struct{})
	rcv, url := newReceiver(t, func(n int, d webhook.Delivery) (int, string) {
		if n == 1 {
			close(first)
			<-superseded // the user writes again before the agent answers
		}
		return http.StatusOK, reAnswer(d)
	})
	logs := &logSink{}
	s := start(t, store.DefaultLimits(), webhookConfig(url, 0), logsTo(logs))
	const owner = "o9cq8e2esupersedelogs0001@im.wechat"
	acct, bot := s.enrolledBot("qo_e2e_supersede_logs", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "first"); err != nil {
		t.Fatal(err)
	}
	<-first
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "second"); err != nil {
		t.Fatal(err)
	}
	s.eventually("the first window superseded", time.Minute, func() (bool, error) {
		ws, err := s.store.ListWindows(s.ctx, store.WindowFilter{AccountKey: acct, State: vocab.WindowSuperseded})
		return len(ws) == 1, err
	})
	close(superseded)
	rcv.next(2, time.Minute)
	s.waitAnswer(bot.BotID, "second", time.Minute)
	s.eventually("every message handled or absorbed", time.Minute, func() (bool, error) {
		st := s.inboxStatuses()
		return st[vocab.MessageHandled] == 1 && st[vocab.MessageAbsorbed] == 1 && len(st) == 2, nil
	})
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, line := range strings.Split(logs.b.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("logged above INFO on the supersede path: %s", line)
		}
	}
}
