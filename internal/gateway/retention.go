package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// retentionScheduleWait bounds the calls that create or update the retention schedule at
// start.
const retentionScheduleWait = 30 * time.Second

// ScheduleChange says what EnsureRetentionSchedule did.
type ScheduleChange string

// The outcomes of EnsureRetentionSchedule.
const (
	ScheduleCreated   ScheduleChange = "created"   // there was none
	ScheduleUpdated   ScheduleChange = "updated"   // its interval or task queue differed
	ScheduleUnchanged ScheduleChange = "unchanged" // it was as configured
	ScheduleDeleted   ScheduleChange = "deleted"   // every horizon is 0: the schedule went
	ScheduleNone      ScheduleChange = "none"      // every horizon is 0 and there was none
)

// EnsureRetentionSchedule creates or updates the installation's one retention schedule
// (wfapi.Installation.RetentionScheduleID): every `every` (0: DefaultRetentionEvery) it
// starts a Retention workflow on taskQueue, skipping a run while the previous one still
// runs. It is idempotent across restarts and workers: a schedule that exists already is
// updated only when its interval, workflow type or task queue differ, and its paused state
// and note (an operator's `temporal schedule toggle --pause`) are kept. A policy that keeps
// everything has no schedule: one left from an earlier configuration is deleted.
func EnsureRetentionSchedule(ctx context.Context, tc client.Client, inst wfapi.Installation, taskQueue string,
	policy store.RetentionPolicy, every time.Duration) (ScheduleChange, error) {
	if every <= 0 {
		every = DefaultRetentionEvery
	}
	id := inst.RetentionScheduleID()
	sc := tc.ScheduleClient()
	if policy.KeepsEverything() {
		err := sc.GetHandle(ctx, id).Delete(ctx)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return ScheduleNone, nil
		}
		if err != nil {
			return "", fmt.Errorf("delete the retention schedule %s: %w", id, err)
		}
		return ScheduleDeleted, nil
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{ID: id, Workflow: wfapi.RetentionWorkflow, TaskQueue: taskQueue}
	_, err := sc.Create(ctx, client.ScheduleOptions{ID: id, Spec: spec, Action: action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP})
	if err == nil {
		return ScheduleCreated, nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return "", fmt.Errorf("create the retention schedule %s: %w", id, err)
	}
	h := sc.GetHandle(ctx, id)
	d, err := h.Describe(ctx)
	if err != nil {
		return "", fmt.Errorf("describe the retention schedule %s: %w", id, err)
	}
	if retentionScheduleAsConfigured(d.Schedule, every, taskQueue) {
		return ScheduleUnchanged, nil
	}
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		s := in.Description.Schedule
		if s.Spec == nil {
			s.Spec = &client.ScheduleSpec{}
		}
		s.Spec.Intervals = spec.Intervals
		s.Spec.Calendars, s.Spec.CronExpressions = nil, nil
		s.Action = action
		if s.Policy == nil {
			s.Policy = &client.SchedulePolicies{}
		}
		s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		return &client.ScheduleUpdate{Schedule: &s}, nil
	}})
	if err != nil {
		return "", fmt.Errorf("update the retention schedule %s: %w", id, err)
	}
	return ScheduleUpdated, nil
}

// retentionScheduleAsConfigured reports whether a described schedule runs Retention every
// `every` on taskQueue, skipping overlaps.
func retentionScheduleAsConfigured(s client.Schedule, every time.Duration, taskQueue string) bool {
	if s.Spec == nil || len(s.Spec.Intervals) != 1 || s.Spec.Intervals[0].Every != every ||
		s.Spec.Intervals[0].Offset != 0 || len(s.Spec.Calendars) > 0 || len(s.Spec.CronExpressions) > 0 {
		return false
	}
	a, ok := s.Action.(*client.ScheduleWorkflowAction)
	if !ok || a.Workflow != wfapi.RetentionWorkflow || a.TaskQueue != taskQueue {
		return false
	}
	return s.Policy != nil && s.Policy.Overlap == enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
}

// ensureRetention runs EnsureRetentionSchedule at the worker's start. A failure is logged,
// not fatal: the purge waits for the next start (or another worker's), the traffic does not.
func ensureRetention(ctx context.Context, st *store.Store, tc client.Client, cfg Config, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, retentionScheduleWait)
	defer cancel()
	inst, err := st.Installation(ctx)
	if err == nil {
		var change ScheduleChange
		change, err = EnsureRetentionSchedule(ctx, tc, inst, cfg.TaskQueue, cfg.Retention, cfg.RetentionEvery)
		if err == nil {
			logger.Info("retention schedule", "schedule", inst.RetentionScheduleID(), "change", string(change),
				"every", cfg.RetentionEvery, "retain_content", cfg.Retention.Content, "retain_rows", cfg.Retention.Rows)
			return
		}
	}
	logger.Error("the retention schedule could not be created or updated; nothing is purged until a worker starts with it",
		"error", err)
}
