package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// A window that expires while its message is handed out without a verdict leaves the
// message in an honest final status: failed with the reason when nothing was sent, never
// processing forever.
func TestAnExpiredWindowFailsItsUnansweredMessageWithTheReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	if _, err := e.store.ExpireWindow(e.ctx, t0.Add(24*time.Hour), res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	m, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != vocab.MessageFailed || !strings.Contains(m.FailureReason, "expired") {
		t.Fatalf("message after expiry: %s %q, want failed with the expiry as reason", m.Status, m.FailureReason)
	}
}

// A window that expires after a reply of its message was sent, but before the agent's
// verdict, leaves the message handled: it was answered.
func TestAnExpiredWindowWhoseReplyWasSentLeavesItsMessageHandled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	e.sendOne(tok, "an answer")
	if _, err := e.store.ExpireWindow(e.ctx, t0.Add(24*time.Hour), res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	m, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != vocab.MessageHandled || m.FailureReason != "" {
		t.Fatalf("message after expiry: %s %q, want handled", m.Status, m.FailureReason)
	}
}

// A message never handed out stays received when its window expires: it is the
// conversation's backlog, merged into the next delivery.
func TestAnExpiredWindowLeavesANeverOfferedMessageReceived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res := e.commit(b, t0, b.msg("hello", t0))
	if _, err := e.store.ExpireWindow(e.ctx, t0.Add(24*time.Hour), res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	m, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != vocab.MessageReceived {
		t.Fatalf("message after expiry: %s, want received", m.Status)
	}
}

// A removal cancels the open windows and fails their unanswered messages with the reason.
func TestARemovalFailsTheUnansweredMessagesOfTheWindowsItCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	if _, err := e.store.DisableAccount(e.ctx, t0, b.key, b.generation, "operator removed it"); err != nil {
		t.Fatal(err)
	}
	m, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != vocab.MessageFailed || !strings.Contains(m.FailureReason, "account_disabled") {
		t.Fatalf("message after the removal: %s %q, want failed naming the cancellation", m.Status, m.FailureReason)
	}
}

// A poll's health record on a paused or removed account is refused with
// account_not_active, so the poll ends instead of polling an account that may not be
// polled; on an active account it is recorded.
func TestRecordPollRefusesAnAccountThatIsNotActive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	paused, removed, active := e.register(), e.register(), e.register()
	if _, err := e.store.PauseAccount(e.ctx, t0, paused.key, paused.generation, t0.Add(time.Hour), "operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.DisableAccount(e.ctx, t0, removed.key, removed.generation, "operator"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*bot{paused, removed} {
		wantCode(t, e.store.RecordPoll(e.ctx, t0, b.key, b.generation), vocab.CodeAccountNotActive)
	}
	wantCode(t, e.store.RecordPoll(e.ctx, t0, active.key, active.generation+1), vocab.CodeGenerationConflict)
	if err := e.store.RecordPoll(e.ctx, t0, active.key, active.generation); err != nil {
		t.Fatal(err)
	}
}
