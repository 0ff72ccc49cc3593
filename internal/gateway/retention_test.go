package gateway_test

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestTheRetentionScheduleIsCreatedOnceAndUpdatedWhenItsIntervalChanges(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inst := wfapi.Installation{ID: "0123456789ab"}
	policy := gateway.DefaultConfig().Retention
	const queue = "retention-test"
	ensure := func(p store.RetentionPolicy, every time.Duration, want gateway.ScheduleChange) {
		t.Helper()
		got, err := gateway.EnsureRetentionSchedule(ctx, tc, inst, queue, p, every)
		if err != nil || got != want {
			t.Fatalf("ensure every %v: %q, %v; want %q", every, got, err, want)
		}
	}
	describe := func() *client.ScheduleDescription {
		t.Helper()
		d, err := tc.ScheduleClient().GetHandle(ctx, inst.RetentionScheduleID()).Describe(ctx)
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		return d
	}
	ensure(policy, time.Hour, gateway.ScheduleCreated)
	// A restart, or a second worker, with the same settings changes nothing.
	ensure(policy, time.Hour, gateway.ScheduleUnchanged)
	d := describe()
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok || a.Workflow != wfapi.RetentionWorkflow || a.TaskQueue != queue ||
		d.Schedule.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP || d.Schedule.Spec.Intervals[0].Every != time.Hour {
		t.Fatalf("schedule %+v, action %+v", d.Schedule, d.Schedule.Action)
	}
	// An operator's pause is kept across an update of the interval.
	if err := tc.ScheduleClient().GetHandle(ctx, inst.RetentionScheduleID()).Pause(ctx, client.SchedulePauseOptions{Note: "paused by the operator"}); err != nil {
		t.Fatal(err)
	}
	ensure(policy, 15*time.Minute, gateway.ScheduleUpdated)
	ensure(policy, 15*time.Minute, gateway.ScheduleUnchanged)
	d = describe()
	if d.Schedule.Spec.Intervals[0].Every != 15*time.Minute || !d.Schedule.State.Paused {
		t.Fatalf("after the update: every %v, paused %v", d.Schedule.Spec.Intervals[0].Every, d.Schedule.State.Paused)
	}
	// Keeping everything: no schedule.
	ensure(store.RetentionPolicy{}, time.Hour, gateway.ScheduleDeleted)
	ensure(store.RetentionPolicy{}, time.Hour, gateway.ScheduleNone)
}
