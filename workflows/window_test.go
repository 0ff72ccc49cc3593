package workflows_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

func TestWindowExpiresOnItsTimerAtExpiresAt(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	r := newRig(t, limits)
	b := r.bot()
	w := r.deliver(b, "hello")
	r.env.SetStartTime(time.Now())
	r.env.ExecuteWorkflow(workflows.ReplyWindow, windowInput(w, limits))
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if now := r.env.Now(); now.Before(w.ExpiresAt) {
		t.Fatalf("window workflow ended at %v, before its expiry %v", now, w.ExpiresAt)
	}
	got, err := r.store.GetWindow(r.ctx, w.ReplyWindowID)
	if err != nil || got.State != vocab.WindowExpired {
		t.Fatalf("window after its timer: %+v %v", got, err)
	}
	if n := countRows(r, "SELECT count(*) FROM agent_sessions WHERE reply_window_id = $1", w.ReplyWindowID); n != 1 {
		t.Fatalf("the deliverable message must have been handed off with one session, got %d", n)
	}
}

func TestRefusedUpdateWritesNothingAndLeavesNoSend(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxSends = 2
	limits.FinalSlots = 0 // the quota itself
	r := newRig(t, limits)
	b := r.bot()
	w := r.deliver(b, "hello")
	in := windowInput(w, limits)
	results := make([]error, 0, 3)
	for i := 0; i < 3; i++ {
		i := i
		r.env.RegisterDelayedCallback(func() {
			r.env.UpdateWorkflow(wfapi.UpdateSend, "", &updateRecorder{done: func(err error) { results = append(results, err) }},
				wfapi.SendRequest{Type: "text", Text: "reply", RequestID: "req-" + string(rune('a'+i)), NoHold: true})
		}, time.Duration(i+1)*time.Minute)
	}
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(wfapi.SignalRetired, nil) }, 10*time.Minute)
	r.env.ExecuteWorkflow(workflows.ReplyWindow, in)
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || results[0] != nil || results[1] != nil {
		t.Fatalf("first two sends must succeed: %v", results)
	}
	var app *temporal.ApplicationError
	if !errors.As(results[2], &app) || app.Type() != string(vocab.CodeReplyQuotaExhausted) {
		t.Fatalf("third send: %v, want a reply_quota_exhausted refusal", results[2])
	}
	sent, err := r.ctl.Sent(r.ctx, b.info.BotID)
	if err != nil || len(sent) != 2 {
		t.Fatalf("simulator saw %d sends (%v), want 2", len(sent), err)
	}
	if n := countRows(r, "SELECT count(*) FROM send_attempts"); n != 2 {
		t.Fatalf("%d attempts stored, want 2: a refused update writes nothing", n)
	}
}

// updateRecorder collects an update's outcome.
type updateRecorder struct{ done func(error) }

func (u *updateRecorder) Accept()                   {}
func (u *updateRecorder) Reject(err error)          { u.done(err) }
func (u *updateRecorder) Complete(_ any, err error) { u.done(err) }

func countRows(r *rig, q string, args ...any) int {
	r.t.Helper()
	var n int
	if err := r.pool.QueryRow(r.ctx, q, args...).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}
