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

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
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
	// PollersRunning counts pollers found running, which are left as they are.
	PollersStarted, PollersRunning int
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
		slog.Int("pollers_running", r.PollersRunning),
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
	// Activities, when set, are the activities whose StartPoller starts the pollers (the
	// worker's own, so that pollers started here and at enrollment get the same input);
	// by default activities over the store, the client and TaskQueue.
	Activities *activity.Activities
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

// ReconcileStore is what the start-up reconcile reads and recovers in the store (a
// *store.Store): the accounts and windows it starts workflows for, and the pending sends it
// settles; without Activities in its options it builds the activities on the same store.
type ReconcileStore interface {
	activity.Store
	ListAccounts(ctx context.Context, status string) ([]store.Account, error)
	ListPendingWindows(ctx context.Context) ([]store.PendingWindow, error)
	RecoverPendingAttemptsOf(ctx context.Context, now time.Time, windowIDs []int64) (int, error)
}

var _ ReconcileStore = (*store.Store)(nil)

// Reconcile makes Temporal match the store after a start or a crash: pending attempts
// orphaned by a crash are released (their quota given back), every active account has
// its AccountPoller (one not running is started: activity.StartPoller, signal-with-start
// with its generation), and every open window has its ReplyWindow workflow
// ([wfclient.LaunchWindow]). Running workflows are found through Temporal's visibility
// and left as they are. It is idempotent: a second run starts nothing new. Errors of single accounts or windows do not stop the
// others; they are joined in the returned error, next to a report of what was done.
func Reconcile(ctx context.Context, st ReconcileStore, tc client.Client, taskQueue string) (ReconcileReport, error) {
	return ReconcileWithOptions(ctx, st, tc, ReconcileOptions{TaskQueue: taskQueue})
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
func ReconcileWithOptions(ctx context.Context, st ReconcileStore, tc client.Client, opts ReconcileOptions) (ReconcileReport, error) {
	r, err := newReconciler(st, tc, opts)
	if err != nil {
		return ReconcileReport{}, err
	}
	// Every workflow id below is this installation's: another installation's workflows in
	// the same namespace are never looked at.
	r.inst, err = st.Installation(ctx)
	if err != nil {
		return r.rep, fmt.Errorf("reconcile: %w", err)
	}
	r.rep.Installation = r.inst.ID

	r.recoverPending(ctx)
	if err := r.ensurePollers(ctx); err != nil {
		return r.rep, err
	}
	r.checkPaused(ctx)
	if err := r.startWindows(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, errors.Join(r.errs...)
}

// reconciler is one reconcile under way: its checked options with their defaults, the
// installation, the report so far and the errors that did not stop it.
type reconciler struct {
	st     ReconcileStore
	tc     client.Client
	opts   ReconcileOptions
	acts   *activity.Activities
	logger *slog.Logger
	now    func() time.Time
	inst   wfapi.Installation
	rep    ReconcileReport
	errs   []error
}

// newReconciler checks the options and resolves their defaults (the activities, the
// logger, the clock).
func newReconciler(st ReconcileStore, tc client.Client, opts ReconcileOptions) (*reconciler, error) {
	if st == nil || tc == nil {
		return nil, errors.New("reconcile: store and Temporal client are required")
	}
	if opts.TaskQueue == "" {
		return nil, errors.New("reconcile: task queue is empty")
	}
	acts := opts.Activities
	if acts == nil {
		acts = &activity.Activities{Store: st, Temporal: tc, Config: activity.Config{TaskQueue: opts.TaskQueue}, Logger: opts.Logger}
	}
	actsQueue := acts.Config.TaskQueue
	if actsQueue == "" {
		actsQueue = wfapi.DefaultTaskQueue // the activities' default
	}
	if acts.Temporal == nil || actsQueue != opts.TaskQueue {
		return nil, fmt.Errorf("reconcile: the activities must have a Temporal client and start workflows on task queue %s (not %s)", opts.TaskQueue, actsQueue)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &reconciler{st: st, tc: tc, opts: opts, acts: acts, logger: logger, now: now}, nil
}

// recoverPending releases the pending attempts orphaned by a crash (recoverOrphans); its
// failure is recorded and the reconcile goes on.
func (r *reconciler) recoverPending(ctx context.Context) {
	n, left, err := recoverOrphans(ctx, r.st, r.tc, r.inst, r.now, r.opts.PendingGrace)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("recover pending attempts: %w", err))
	}
	r.rep.RecoveredAttempts, r.rep.PendingLeft = n, left
	if n > 0 {
		r.logger.Warn("released pending attempts orphaned by a crash", "attempts", n)
	}
}

// ensurePollers makes sure every active account's poller runs (ensurePoller). It returns
// the reconcile's error when it cannot go on: the accounts are unreadable or ctx ended.
func (r *reconciler) ensurePollers(ctx context.Context) error {
	active, err := r.st.ListAccounts(ctx, vocab.AccountActive)
	if err != nil {
		return errors.Join(append(r.errs, fmt.Errorf("list active accounts: %w", err))...)
	}
	r.rep.Accounts = len(active)
	running := r.running(ctx, wfapi.AccountPollerIDPrefix(r.inst.ID))
	for _, a := range active {
		if ctx.Err() != nil {
			return errors.Join(append(r.errs, ctx.Err())...)
		}
		if running[r.inst.PollerID(a.AccountKey)] {
			r.rep.PollersRunning++
			continue
		}
		started, err := ensurePoller(ctx, r.tc, r.inst, r.acts, a)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("poller of account %s: %w", a.AccountKey, err))
			continue
		}
		if started {
			r.rep.PollersStarted++
			r.logger.Info("started account poller", "account", a.AccountKey, "generation", a.Generation)
		} else {
			r.rep.PollersRunning++
		}
	}
	return nil
}

// running lists the running workflows under an id prefix through Temporal's visibility
// (wfclient.RunningWorkflowIDs): a worker's start then looks up only what is not running,
// one by one, instead of every account's poller and every open window's workflow, which
// after a crash would load Temporal just as the dead worker's bots move. A failed list is
// logged and the reconcile looks every workflow up.
func (r *reconciler) running(ctx context.Context, prefix string) map[string]bool {
	ids, err := wfclient.RunningWorkflowIDs(ctx, r.tc, prefix)
	if err != nil {
		r.logger.Warn("listing running workflows failed; each is looked up instead", "prefix", prefix, "error", err)
		return nil
	}
	return ids
}

// checkPaused reports the paused accounts whose poller is not running (nothing would
// resume them); its failures are recorded and the reconcile goes on.
func (r *reconciler) checkPaused(ctx context.Context) {
	paused, err := r.st.ListAccounts(ctx, vocab.AccountPaused)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("list paused accounts: %w", err))
	}
	for _, a := range paused {
		id, _, err := wfclient.RunningPoller(ctx, r.tc, r.inst, a.AccountKey)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("poller of paused account %s: %w", a.AccountKey, err))
			continue
		}
		if id == "" {
			r.rep.PausedWithoutPoller = append(r.rep.PausedWithoutPoller, a.AccountKey)
			r.logger.Warn("paused account has no running poller: nothing will resume it", "account", a.AccountKey)
		}
	}
}

// startWindows makes sure every open window has its ReplyWindow workflow (LaunchWindow). It
// returns the reconcile's error when it cannot go on: the windows are unreadable or ctx ended.
func (r *reconciler) startWindows(ctx context.Context) error {
	windows, err := r.st.ListOpenWindows(ctx, "", time.Time{}, maxReconciledWindows)
	if err != nil {
		return errors.Join(append(r.errs, fmt.Errorf("list open windows: %w", err))...)
	}
	r.rep.Windows = len(windows)
	if len(windows) >= maxReconciledWindows {
		r.rep.WindowsTruncated = true
		r.logger.Warn("more open windows than one reconcile lists; the oldest were not checked", "listed", len(windows))
	}
	running := r.running(ctx, wfapi.ReplyWindowIDPrefix(r.inst.ID))
	for _, w := range windows {
		if ctx.Err() != nil {
			return errors.Join(append(r.errs, ctx.Err())...)
		}
		if running[r.inst.WindowWorkflowID(w.ReplyWindowID)] {
			r.rep.WindowsRunning++
			continue
		}
		// No offer before the start: the window may have been offered already (its
		// workflow ran, or runs and visibility did not list it); the workflow offers.
		outcome, err := wfclient.LaunchWindow(ctx, wfclient.WindowLaunch{Temporal: r.tc, TaskQueue: r.opts.TaskQueue,
			WorkflowID: r.inst.WindowWorkflowID(w.ReplyWindowID), Window: activity.WindowRefOf(w),
			ReofferAfter: r.acts.Config.ReofferAfter})
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("window %d: %w", w.ReplyWindowID, err))
			continue
		}
		switch outcome {
		case wfclient.WindowStarted:
			r.rep.WindowsStarted++
			r.logger.Info("started reply window workflow", "window", w.ReplyWindowID, "account", w.AccountKey)
		case wfclient.WindowRunning:
			r.rep.WindowsRunning++
		case wfclient.WindowClosed:
			r.rep.WindowsClosed = append(r.rep.WindowsClosed, w.ReplyWindowID)
			r.logger.Warn("open window's workflow already closed; not restarted (REJECT_DUPLICATE)",
				"window", w.ReplyWindowID, "account", w.AccountKey)
		}
	}
	return nil
}

// recoverOrphans recovers the pending attempts that no running window workflow owns any
// more (see ReconcileWithOptions) and reports how many it recovered and how many windows
// it left to their workflow.
func recoverOrphans(ctx context.Context, st ReconcileStore, tc client.Client, inst wfapi.Installation, now func() time.Time, grace time.Duration) (int, int, error) {
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

// ensurePoller makes sure an active account's poller runs. A running one is left as it is:
// a poller follows a rotation by itself (a poll of the old generation stops with a
// generation conflict and the poller reads the stored one, workflows/poller.go), so a
// worker's start costs no signal and no workflow task per bot. One not running is started
// through the code path of the enrollment: activity.StartPoller (signal-with-start of
// wfapi.AccountPollerWorkflow with wfapi.SignalRotate and the account's generation). It
// reports whether it started one.
func ensurePoller(ctx context.Context, tc client.Client, inst wfapi.Installation, acts *activity.Activities, a store.Account) (bool, error) {
	id, _, err := wfclient.RunningPoller(ctx, tc, inst, a.AccountKey)
	if err != nil || id != "" {
		return false, err
	}
	if err := acts.StartPoller(ctx, activities.AccountRef{AccountKey: a.AccountKey, Generation: a.Generation}); err != nil {
		return false, err
	}
	return true, nil
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
