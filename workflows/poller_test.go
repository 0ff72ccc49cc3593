package workflows_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// runStalePause runs a poller (started with a one-hour stale pause) against a dead bot
// token and returns how long it stayed paused before its probe.
func runStalePause(t *testing.T, r *rig) time.Duration {
	t.Helper()
	b := r.bot()
	if err := r.ctl.KillBot(r.ctx, b.info.BotID); err != nil {
		t.Fatal(err)
	}
	r.env.SetStartTime(time.Now())
	var pausedAt time.Time
	r.env.SetOnActivityCompletedListener(func(info *activityInfo, _ converter.EncodedValue, err error) {
		if info.ActivityType.Name == "PauseAccount" && err == nil {
			pausedAt = r.env.Now()
		}
	})
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1,
		Config: wfapi.PollerConfig{StalePause: wfapi.Duration(time.Hour)}})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if pausedAt.IsZero() {
		t.Fatal("the first -14 must pause the account")
	}
	a, err := r.store.GetAccount(r.ctx, b.key)
	if err != nil || a.Status != vocab.AccountNeedsRelogin {
		t.Fatalf("account after the probe: %s %v, want needs_relogin", a.Status, err)
	}
	return r.env.Now().Sub(pausedAt)
}

func TestStaleTokenPausesThenProbesThenNeedsRelogin(t *testing.T) {
	t.Parallel()
	if d := runStalePause(t, newRig(t, store.DefaultLimits())); d < time.Hour {
		t.Fatalf("the probe ran %v after the pause, want at least the 1h pause", d)
	}
}

func TestContinueAsNewCarriesStateAndLosesNoSignal(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	b := r.bot()
	if _, err := r.ctl.InjectText(r.ctx, b.info.BotID, "", "before continue-as-new"); err != nil {
		t.Fatal(err)
	}
	// A rotation arrives while the first poll runs; the run continues as new after one loop.
	r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "PollAccount" {
			r.env.SignalWorkflow(wfapi.SignalRotate, wfapi.RotateSignal{Generation: 2})
		}
	})
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1,
		Config: wfapi.PollerConfig{MaxLoops: 1}})
	err := r.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !asCAN(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next wfapi.PollerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Generation != 2 || next.AccountKey != b.key || next.Config.MaxLoops != 1 {
		t.Fatalf("continued with %+v: the rotate signal or the state was lost", next)
	}
	c, err := r.store.GetAccount(r.ctx, b.key)
	if err != nil || c.Cursor == "" {
		t.Fatalf("cursor %q (%v): the page before continue-as-new must be committed", c.Cursor, err)
	}
	if n := countRows(r, "SELECT count(*) FROM inbound_messages"); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

func TestOperatorPauseStopsPollingUntilItEndsThenResumes(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	b := r.bot()
	start := time.Now()
	r.env.SetStartTime(start)
	until := start.Add(time.Hour).Truncate(time.Microsecond) // the store keeps microseconds
	polls := 0
	r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name != "PollAccount" {
			return
		}
		polls++
		if polls == 1 { // the operator pauses while the first poll runs (what `starter pause` does)
			if _, err := r.store.PauseAccount(r.ctx, time.Now(), b.key, 1, until, "operator"); err != nil {
				t.Error(err)
			}
			r.env.SignalWorkflow(wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: "operator"})
		}
		if polls == 2 { // polling again after the pause: the test is over
			if now := r.env.Now(); now.Before(until) {
				t.Errorf("polled again at %v, before the pause ended at %v", now, until)
			}
			r.env.SignalWorkflow(wfapi.SignalStop, wfapi.StopSignal{Reason: "test over"})
		}
	})
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if polls < 2 {
		t.Fatalf("%d polls: the poller must poll again after the pause", polls)
	}
	a, err := r.store.GetAccount(r.ctx, b.key)
	if err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("account after the pause: %s %v, want active", a.Status, err)
	}
}

// An idle bot costs no heartbeat actions: the poll activity is scheduled without a
// heartbeat timeout (its liveness is the poll lease).
func TestThePollRunsWithoutAHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	b := r.bot()
	if err := r.ctl.KillBot(r.ctx, b.info.BotID); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "PollAccount" {
			got = append(got, info.HeartbeatTimeout)
		}
	})
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1,
		Config: wfapi.PollerConfig{StalePause: wfapi.Duration(time.Minute)}})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no poll ran")
	}
	for _, d := range got {
		if d != 0 {
			t.Fatalf("the poll ran with heartbeat timeout %v, want none", d)
		}
	}
}

// A poller started with one stale pause (its input) takes the worker's current setting
// from each poll: a setting changed at a restart reaches pollers already running.
func TestWorkerSettingsChangedAtARestartReachRunningPollers(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	r.acts.Config.Poller = wfapi.PollerConfig{StalePause: wfapi.Duration(30 * time.Second)}
	if d := runStalePause(t, r); d < 30*time.Second || d >= time.Hour {
		t.Fatalf("the probe ran %v after the pause, want the worker's 30s, not the input's 1h", d)
	}
}

// Operator commands are last-one-wins however fast they come (the store is the source of
// truth; the pause and resume signals carry no order across their channels): 50 random
// sequences of pause and resume, written to the store and signalled as `starter` does,
// with spacings from 0 upwards, and the poller ends in the last command's state.
func TestOperatorCommandsInQuickSuccessionEndInTheLastCommandsState(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	r.acts.Config.PollSession = 10 * time.Millisecond // short polls: the rounds run in real time between commands
	rnd := rand.New(rand.NewPCG(20261201, 1))
	spacings := []time.Duration{0, 0, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}
	for round := range 50 {
		r.resetEnv()
		b := r.bot()
		start := time.Now().Truncate(time.Second)
		r.env.SetStartTime(start)
		until := start.Add(time.Hour)
		cmds := make([]bool, 2+rnd.IntN(5)) // true: pause
		for i := range cmds {
			cmds[i] = rnd.IntN(2) == 0
		}
		issued, polls, settled, settledID := 0, 0, false, 0
		var failure string
		r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, _ converter.EncodedValues) {
			// Activity ids count the workflow's commands: a poll scheduled before the
			// settling read (the poller reads the store while a poll runs) may start after it.
			id, _ := strconv.Atoi(info.ActivityID)
			if info.ActivityType.Name == "ReadAccountState" && issued == len(cmds) && !settled {
				settled, settledID = true, id // this read sees the store after the last command
			}
			if info.ActivityType.Name != "PollAccount" {
				return
			}
			polls++
			if polls == 1 {
				delay := time.Duration(0)
				for i, pause := range cmds {
					delay += spacings[rnd.IntN(len(spacings))]
					r.env.RegisterDelayedCallback(func() {
						if pause {
							_, _ = r.store.PauseAccount(r.ctx, time.Now(), b.key, 1, until, "operator")
							r.env.SignalWorkflow(wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: "operator"})
						} else {
							_, _ = r.store.ResumeAccount(r.ctx, time.Now(), b.key, 1)
							r.env.SignalWorkflow(wfapi.SignalResume, nil)
						}
						issued = i + 1
					}, delay)
				}
				return
			}
			if !settled || id < settledID {
				return // scheduled before the poller read the last command's state
			}
			// The first poll after the poller read the last command's state: before the
			// pause's end only if the last command was a resume.
			last := cmds[len(cmds)-1]
			if now := r.env.Now(); last == now.Before(until) {
				failure = fmt.Sprintf("commands %v: polled at %v (pause until %v)", cmds, now.Sub(start), until.Sub(start))
			}
			r.env.SignalWorkflow(wfapi.SignalStop, wfapi.StopSignal{Reason: "round over"})
		})
		r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1})
		if err := r.env.GetWorkflowError(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if failure != "" {
			t.Fatalf("round %d: %s", round, failure)
		}
	}
}

// A rotation whose signal has not arrived (or never will) does not stop the poller: when
// its poll stops on the newer stored generation, the poller reads it and polls that one.
func TestAPollerFollowsARotationItsPollSawBeforeTheSignal(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	b := r.bot()
	var gens []int32
	r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != "PollAccount" {
			return
		}
		var in activities.PollInput
		if err := args.Get(&in); err != nil {
			t.Error(err)
			return
		}
		gens = append(gens, in.Generation)
		switch len(gens) {
		case 1: // the bot is re-enrolled with a new token while the poll runs; no signal
			if _, err := storetest.Enroll(r.ctx, r.store, time.Now(), store.ConfirmInput{AccountGeneration: 2,
				ProviderAccountID: b.info.BotID, OwnerPeerID: b.info.Owner, BaseURL: r.srv.URL,
				BotToken: sealing.NewSecret(b.info.Token)}); err != nil {
				t.Error(err)
			}
		case 2:
			r.env.SignalWorkflow(wfapi.SignalStop, wfapi.StopSignal{Reason: "test over"})
		}
	})
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1})
	if err := r.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(gens) < 2 || gens[1] != 2 {
		t.Fatalf("polls of generations %v, want 1 then 2", gens)
	}
}

// TestPollerStateCountsWhatItsPollSessionsCommittedAcrossContinueAsNew: the state query's
// Messages and Pages are the poller's totals, the same numbers its poll session counts
// from (PollInput.MessagesBefore, the base of its heartbeat progress), kept across
// continue-as-new: a message committed is counted once, never reset to 0 by a new run.
func TestPollerStateCountsWhatItsPollSessionsCommittedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	r := newRig(t, store.DefaultLimits())
	b := r.bot()
	if _, err := r.ctl.InjectText(r.ctx, b.info.BotID, "", "counted once"); err != nil {
		t.Fatal(err)
	}
	var before []activities.PollInput
	r.env.SetOnActivityStartedListener(func(info *activityInfo, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == "PollAccount" {
			var in activities.PollInput
			if err := args.Get(&in); err != nil {
				t.Error(err)
			}
			before = append(before, in)
		}
	})
	// As if continued from a run that had committed 3 messages on 2 pages.
	r.env.ExecuteWorkflow(workflows.AccountPoller, wfapi.PollerInput{AccountKey: b.key, Generation: 1,
		Pages: 2, Messages: 3, Config: wfapi.PollerConfig{MaxLoops: 1}})
	var can *workflow.ContinueAsNewError
	if err := r.env.GetWorkflowError(); !asCAN(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if len(before) != 1 || before[0].MessagesBefore != 3 || before[0].PagesBefore != 2 {
		t.Fatalf("poll inputs %+v, want the session to count from 3 messages on 2 pages", before)
	}
	var next wfapi.PollerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Messages != 4 || next.Pages < 3 {
		t.Fatalf("continued with %d messages on %d pages, want 4 on at least 3", next.Messages, next.Pages)
	}
	v, err := r.env.QueryWorkflow(wfapi.QueryPollerState)
	if err != nil {
		t.Fatal(err)
	}
	var st wfapi.PollerState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Messages != next.Messages || st.Pages != next.Pages {
		t.Fatalf("state query says %d messages on %d pages, the poller carries %d on %d", st.Messages, st.Pages, next.Messages, next.Pages)
	}
}
