package activity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestAccountStatusActivitiesUseTheWorkflowsTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.deliver("hello")
	wfNow := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	until := wfNow.Add(time.Hour)
	if err := runErr(h, h.acts.PauseAccount, activities.PauseInput{AccountKey: h.key, Generation: 1, Until: until, Reason: "stale", Now: wfNow}); err != nil {
		t.Fatal(err)
	}
	acct := h.account()
	if acct.Status != vocab.AccountPaused || !acct.PauseUntil.Equal(until) || !acct.UpdatedAt.Equal(wfNow) {
		t.Fatalf("paused account %+v", acct)
	}
	// The pause's end resumes the account only once the pause has ended (by the
	// workflow's time): before, a later pause stands.
	if err := runErr(h, h.acts.ResumeAccount, activities.StatusInput{AccountKey: h.key, Generation: 1, Now: wfNow}); err != nil {
		t.Fatal(err)
	}
	if acct := h.account(); acct.Status != vocab.AccountPaused {
		t.Fatalf("account resumed before its pause ended: %+v", acct)
	}
	if err := runErr(h, h.acts.ResumeAccount, activities.StatusInput{AccountKey: h.key, Generation: 1, Now: until}); err != nil {
		t.Fatal(err)
	}
	if acct := h.account(); acct.Status != vocab.AccountActive || !acct.UpdatedAt.Equal(until) {
		t.Fatalf("resumed account %+v", acct)
	}
	out, err := run[activities.StatusOutput](h, h.acts.MarkNeedsRelogin, activities.StatusInput{AccountKey: h.key, Generation: 1, Reason: "-14 twice", Now: until})
	if err != nil || out.Status != vocab.AccountNeedsRelogin || len(out.CancelledWindowIDs) != 1 {
		t.Fatalf("needs relogin %+v %v", out, err)
	}
	// Rule violations are not retried.
	err = runErr(h, h.acts.PauseAccount, activities.PauseInput{AccountKey: h.key, Generation: 1, Until: wfNow.Add(-time.Second), Now: wfNow})
	wantNonRetryable(t, err, string(vocab.CodeInvalidInput))
	err = runErr(h, h.acts.ResumeAccount, activities.StatusInput{AccountKey: h.key, Generation: 1, Now: until})
	wantNonRetryable(t, err, string(vocab.CodeAccountNotActive))
}

func TestWindowStateAndExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w, _ := h.deliver("hello")
	stored, err := h.store.GetWindow(h.ctx, w.ReplyWindowID)
	if err != nil || stored.State != vocab.WindowOpen || stored.SendsLeft() != vocab.DefaultMaxSends {
		t.Fatalf("stored window %+v %v", stored, err)
	}
	_, err = run[activities.WindowState](h, h.acts.ExpireWindow, activities.ExpireInput{ReplyWindowID: w.ReplyWindowID, Now: time.Now()})
	wantNonRetryable(t, err, string(vocab.CodeInvalidInput)) // not yet
	for i := 0; i < 2; i++ {
		st, err := run[activities.WindowState](h, h.acts.ExpireWindow, activities.ExpireInput{ReplyWindowID: w.ReplyWindowID, Now: w.ExpiresAt})
		if err != nil || st.State != vocab.WindowExpired || st.SendsLeft != 0 {
			t.Fatalf("expire #%d: %+v %v", i, st, err)
		}
	}
	_, err = run[activities.WindowState](h, h.acts.ExpireWindow, activities.ExpireInput{ReplyWindowID: 987654, Now: w.ExpiresAt})
	wantNonRetryable(t, err, string(vocab.CodeReplyWindowNotFound))
}

func TestSyncWindowsStartsWindowWorkflowsAndSignalsRetiredOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	inst := must[wfapi.Installation](t)(h.store.Installation(h.ctx)).ID
	c := &mocks.Client{}
	h.acts.Temporal = c
	exp := time.Now().Add(24 * time.Hour)
	opened := []activities.WindowRef{
		{ReplyWindowID: 1, AccountKey: h.key, MessageKey: "im_1", PeerID: "peer@im.wechat", ExpiresAt: exp, Deliverable: true, MaxSends: 10},
		{ReplyWindowID: 2, AccountKey: h.key, MessageKey: "im_2", PeerID: "peer@im.wechat", ExpiresAt: exp, MaxSends: 10, SendsUsed: 3},
	}
	for _, w := range opened {
		// The window's workflow carries the account and the peer as search attributes.
		want := wfapi.StartOptions(client.StartWorkflowOptions{
			ID: wfapi.ReplyWindowID(inst, w.ReplyWindowID), TaskQueue: wfapi.DefaultTaskQueue,
			WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowExecutionErrorWhenAlreadyStarted: true,
			EnableEagerStart:                         true,
		}, h.key, "peer@im.wechat")
		in := wfapi.WindowInput{ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.MessageKey,
			ExpiresAt: w.ExpiresAt, MaxSends: w.MaxSends, SendsUsed: w.SendsUsed, Deliverable: w.Deliverable}
		var err error
		if w.ReplyWindowID == 2 { // already started (and closed): success
			err = serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
			c.On("DescribeWorkflow", mock.Anything, wfapi.ReplyWindowID(inst, 2), "").
				Return(nil, serviceerror.NewNotFound("closed and gone")).Once()
		}
		c.On("ExecuteWorkflow", mock.Anything, want, wfapi.ReplyWindowWorkflow, mock.MatchedBy(func(got wfapi.WindowInput) bool {
			return got.ReplyWindowID == in.ReplyWindowID && got.AccountKey == in.AccountKey && got.MessageKey == in.MessageKey && got.PeerID == w.PeerID &&
				got.ExpiresAt.Equal(in.ExpiresAt) && got.MaxSends == in.MaxSends && got.SendsUsed == in.SendsUsed && got.Deliverable == in.Deliverable
		})).Return(nil, err).Once()
	}
	c.On("SignalWorkflow", mock.Anything, wfapi.ReplyWindowID(inst, 3), "", wfapi.SignalRetired, nil).Return(nil).Once()
	c.On("SignalWorkflow", mock.Anything, wfapi.ReplyWindowID(inst, 4), "", wfapi.SignalRetired, nil).
		Return(serviceerror.NewNotFound("gone")).Once()
	if err := runErr(h, h.acts.SyncWindows, activities.WindowsInput{Opened: opened, Retired: []int64{3, 4}}); err != nil {
		t.Fatal(err)
	}
	c.AssertExpectations(t)

	// Other failures are retried.
	c2 := &mocks.Client{}
	h.acts.Temporal = c2
	c2.On("SignalWorkflow", mock.Anything, wfapi.ReplyWindowID(inst, 5), "", wfapi.SignalRetired, nil).
		Return(serviceerror.NewUnavailable("down")).Once()
	wantRetryable(t, runErr(h, h.acts.SyncWindows, activities.WindowsInput{Retired: []int64{5}}))
}

func TestStartPollerSignalsWithStartAndStopPollersIgnoresMissingOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.TaskQueue = "custom-queue" }
	})
	inst := must[wfapi.Installation](t)(h.store.Installation(h.ctx)).ID
	c := &mocks.Client{}
	h.acts.Temporal = c
	id := wfapi.AccountPollerID(inst, h.key)
	c.On("SignalWithStartWorkflow", mock.Anything, id, wfapi.SignalRotate, wfapi.RotateSignal{Generation: 3},
		wfapi.StartOptions(client.StartWorkflowOptions{ID: id, TaskQueue: "custom-queue"}, h.key, ""), wfapi.AccountPollerWorkflow,
		wfapi.PollerInput{AccountKey: h.key, Generation: 3}).Return(nil, nil).Once()
	if err := runErr(h, h.acts.StartPoller, activities.AccountRef{AccountKey: h.key, Generation: 3}); err != nil {
		t.Fatal(err)
	}
	// Stopping signals each account's poller; a missing one is ignored.
	c.On("SignalWorkflow", mock.Anything, wfapi.AccountPollerID(inst, "a"), "", wfapi.SignalStop, mock.Anything).Return(nil).Once()
	c.On("SignalWorkflow", mock.Anything, wfapi.AccountPollerID(inst, "b"), "", wfapi.SignalStop, mock.Anything).
		Return(serviceerror.NewNotFound("no poller")).Once()
	if err := runErr(h, h.acts.StopPollers, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	c.AssertExpectations(t)
}
