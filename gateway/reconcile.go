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

	"github.com/ilinkflow/ilinkflow/actapi"
	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// maxReconciledWindows is the most open windows one reconcile lists (the store's cap).
const maxReconciledWindows = 10000

// ReconcileReport says what a reconcile found and did.
type ReconcileReport struct {
	// Installation is the installation id the reconciled workflow ids name
	// (docs/workflow-ids.md).
	Installation string
	// RecoveredAttempts counts pending attempts released because a crash orphaned them.
	RecoveredAttempts int
	// PendingLeft counts windows whose pending attempts were left to their running
	// workflow (its Send activity, or a retry of it, resumes them).
	PendingLeft int
	// Accounts counts the active accounts; each now has a poller.
	Accounts int
	// PollersStarted counts pollers that were not running and were started;
	// PollersSignalled counts running pollers that were told their generation again.
	PollersStarted, PollersSignalled int
	// PausedWithoutPoller lists paused accounts whose poller is not running: nothing will
	// resume them (an operator should resume or re-enroll them).
	PausedWithoutPoller []string
	// Windows counts the open windows; WindowsStarted got a new ReplyWindow workflow and
	// WindowsRunning already had a running one.
	Windows, WindowsStarted, WindowsRunning int
	// WindowsClosed lists open windows whose workflow already ran and closed: the id
	// policy (REJECT_DUPLICATE) refuses a second run, so an operator must look at them.
	WindowsClosed []int64
	// WindowsTruncated is set when more open windows exist than one reconcile lists.
	WindowsTruncated bool
}

// LogValue summarises the report for the log.
func (r ReconcileReport) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("installation", r.Installation),
		slog.Int("recovered_attempts", r.RecoveredAttempts),
		slog.Int("pending_left", r.PendingLeft),
		slog.Int("accounts", r.Accounts),
		slog.Int("pollers_started", r.PollersStarted),
		slog.Int("pollers_signalled", r.PollersSignalled),
		slog.Int("paused_without_poller", len(r.PausedWithoutPoller)),
		slog.Int("windows", r.Windows),
		slog.Int("windows_started", r.WindowsStarted),
		slog.Int("windows_running", r.WindowsRunning),
		slog.Int("windows_closed", len(r.WindowsClosed)),
		slog.Bool("windows_truncated", r.WindowsTruncated),
	)
}

// ReconcileOptions configures [ReconcileWithOptions].
type ReconcileOptions struct {
	// TaskQueue is where started workflows run.
	TaskQueue string
	// Limits supplies the reply quota of a window stored without one.
	Limits store.Limits
	// Activities, when set, are the activities whose StartPoller starts the pollers (the
	// worker's own, so that pollers started here and at enrollment get the same input);
	// by default activities over the store, the client and TaskQueue.
	Activities *activities.Activities
	// Logger receives progress and problems (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock stamped on recovered attempts (time.Now when nil).
	Now func() time.Time
	// PendingGrace is how long a pending attempt of a window whose workflow runs is left
	// to it (default DefaultPendingGrace, longer than a Send activity's whole retry
	// budget); an older one is recovered as abandoned.
	PendingGrace time.Duration
}

// DefaultPendingGrace is the default ReconcileOptions.PendingGrace.
const DefaultPendingGrace = 15 * time.Minute

// Reconcile makes Temporal match the store after a start or a crash: pending attempts
// orphaned by a crash are released (their quota given back), every active account has
// its AccountPoller (activities.StartPoller: signal-with-start with its generation), and
// every open window has its ReplyWindow workflow ([StartWindow]). It is idempotent: a
// second run starts nothing new. Errors of single accounts or windows do not stop the
// others; they are joined in the returned error, next to a report of what was done.
func Reconcile(ctx context.Context, st *store.Store, tc client.Client, taskQueue string, limits store.Limits) (ReconcileReport, error) {
	return ReconcileWithOptions(ctx, st, tc, ReconcileOptions{TaskQueue: taskQueue, Limits: limits})
}

// ReconcileWithOptions is [Reconcile] with the worker's activities, a logger and a clock.
//
// Pending attempts orphaned by a crash are recovered first, so that window workflows
// start against released reservations. An attempt is pending only between its
// reservation and its start; it is orphaned when its window's workflow is not running
// (terminated, or never started), or when it is older than PendingGrace. The pending
// attempts of a running window workflow are left to it: its Send activity (another
// worker's, or a retry of one a crash interrupted) reserves by the same request id, finds
// the attempt and resumes it, so a reply is neither failed by a restart elsewhere in the
// fleet nor ever sent twice.
func ReconcileWithOptions(ctx context.Context, st *store.Store, tc client.Client, opts ReconcileOptions) (ReconcileReport, error) {
	var rep ReconcileReport
	if st == nil || tc == nil {
		return rep, errors.New("reconcile: store and Temporal client are required")
	}
	if opts.TaskQueue == "" {
		return rep, errors.New("reconcile: task queue is empty")
	}
	acts := opts.Activities
	if acts == nil {
		acts = &activities.Activities{Store: st, Temporal: tc, Config: activities.Config{TaskQueue: opts.TaskQueue}, Logger: opts.Logger}
	}
	actsQueue := acts.Config.TaskQueue
	if actsQueue == "" {
		actsQueue = wfapi.DefaultTaskQueue // the activities' default
	}
	if acts.Temporal == nil || actsQueue != opts.TaskQueue {
		return rep, fmt.Errorf("reconcile: the activities must have a Temporal client and start workflows on task queue %s (not %s)", opts.TaskQueue, actsQueue)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var errs []error
	// Every workflow id below is this installation's (or the legacy id of a workflow
	// started before installation ids): another installation's workflows in the same
	// namespace are never looked at.
	inst, err := st.Installation(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	rep.Installation = inst.ID

	n, left, err := recoverOrphans(ctx, st, tc, inst, now, opts.PendingGrace)
	if err != nil {
		errs = append(errs, fmt.Errorf("recover pending attempts: %w", err))
	}
	rep.RecoveredAttempts, rep.PendingLeft = n, left
	if n > 0 {
		logger.Warn("released pending attempts orphaned by a crash", "attempts", n)
	}

	active, err := st.ListAccounts(ctx, vocab.AccountActive)
	if err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("list active accounts: %w", err))...)
	}
	rep.Accounts = len(active)
	for _, a := range active {
		if ctx.Err() != nil {
			return rep, errors.Join(append(errs, ctx.Err())...)
		}
		started, err := ensurePoller(ctx, tc, inst, acts, a)
		if err != nil {
			errs = append(errs, fmt.Errorf("poller of account %s: %w", a.AccountKey, err))
			continue
		}
		if started {
			rep.PollersStarted++
			logger.Info("started account poller", "account", a.AccountKey, "generation", a.Generation)
		} else {
			rep.PollersSignalled++
		}
	}

	paused, err := st.ListAccounts(ctx, vocab.AccountPaused)
	if err != nil {
		errs = append(errs, fmt.Errorf("list paused accounts: %w", err))
	}
	for _, a := range paused {
		id, _, err := activities.RunningPoller(ctx, tc, inst, a.AccountKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("poller of paused account %s: %w", a.AccountKey, err))
			continue
		}
		if id == "" {
			rep.PausedWithoutPoller = append(rep.PausedWithoutPoller, a.AccountKey)
			logger.Warn("paused account has no running poller: nothing will resume it", "account", a.AccountKey)
		}
	}

	windows, err := st.ListOpenWindows(ctx, "", maxReconciledWindows)
	if err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("list open windows: %w", err))...)
	}
	rep.Windows = len(windows)
	if len(windows) >= maxReconciledWindows {
		rep.WindowsTruncated = true
		logger.Warn("more open windows than one reconcile lists; the oldest were not checked", "listed", len(windows))
	}
	for _, w := range windows {
		if ctx.Err() != nil {
			return rep, errors.Join(append(errs, ctx.Err())...)
		}
		outcome, err := activities.StartWindow(ctx, tc, opts.TaskQueue, inst.WindowWorkflowID(w.ReplyWindowID),
			activities.WindowInput(activities.WindowRefOf(w), acts.Config.ReofferAfter, opts.Limits.MaxSends, nil))
		if err != nil {
			errs = append(errs, fmt.Errorf("window %d: %w", w.ReplyWindowID, err))
			continue
		}
		switch outcome {
		case activities.WindowStarted:
			rep.WindowsStarted++
			logger.Info("started reply window workflow", "window", w.ReplyWindowID, "account", w.AccountKey)
		case activities.WindowRunning:
			rep.WindowsRunning++
		case activities.WindowClosed:
			rep.WindowsClosed = append(rep.WindowsClosed, w.ReplyWindowID)
			logger.Warn("open window's workflow already closed; not restarted (REJECT_DUPLICATE)",
				"window", w.ReplyWindowID, "account", w.AccountKey)
		}
	}
	return rep, errors.Join(errs...)
}

// recoverOrphans recovers the pending attempts that no running window workflow owns any
// more (see ReconcileWithOptions) and reports how many it recovered and how many windows
// it left to their workflow.
func recoverOrphans(ctx context.Context, st *store.Store, tc client.Client, inst wfapi.Installation, now func() time.Time, grace time.Duration) (int, int, error) {
	if grace <= 0 {
		grace = DefaultPendingGrace
	}
	pending, err := st.ListPendingWindows(ctx)
	if err != nil {
		return 0, 0, err
	}
	var orphaned []int64
	left := 0
	for _, p := range pending {
		running, _, err := isRunning(ctx, tc, inst.WindowWorkflowID(p.ReplyWindowID))
		if err != nil {
			return 0, 0, err
		}
		if running && now().Sub(p.Oldest) < grace {
			left++
			continue
		}
		orphaned = append(orphaned, p.ReplyWindowID)
	}
	n, err := st.RecoverPendingAttemptsOf(ctx, now(), orphaned)
	return n, left, err
}

// ensurePoller makes sure an active account's poller runs, through the code path of the
// enrollment: activities.StartPoller (signal-with-start of wfapi.AccountPollerWorkflow
// with wfapi.SignalRotate and the account's generation; a poller still running under its
// legacy id is signalled instead, never doubled). It reports whether a new run started.
func ensurePoller(ctx context.Context, tc client.Client, inst wfapi.Installation, acts *activities.Activities, a store.Account) (bool, error) {
	id, runID, err := activities.RunningPoller(ctx, tc, inst, a.AccountKey)
	if err != nil {
		return false, err
	}
	if err := acts.StartPoller(ctx, actapi.AccountRef{AccountKey: a.AccountKey, Generation: a.Generation}); err != nil {
		return false, err
	}
	if id == "" {
		return true, nil
	}
	nowID, nowRunID, err := activities.RunningPoller(ctx, tc, inst, a.AccountKey)
	if err != nil {
		return false, err
	}
	return nowID != "" && (nowID != id || nowRunID != runID), nil
}

// isRunning reports whether the latest run of a workflow id is running, and its run id.
func isRunning(ctx context.Context, tc client.Client, id string) (bool, string, error) {
	d, err := tc.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("describe %s: %w", id, err)
	}
	return d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.WorkflowExecution.RunID, nil
}
