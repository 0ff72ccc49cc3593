package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
)

// retentionOptions: one PurgeExpired, batches for at most activities.DefaultPurgeBudget,
// heartbeating between batches; a failed run is retried a few times, then the next
// scheduled run goes on (each batch purges only what is still due).
var retentionOptions = workflow.ActivityOptions{
	StartToCloseTimeout: activities.DefaultPurgeBudget + time.Minute,
	HeartbeatTimeout:    30 * time.Second, // one batch is one short transaction; a killed run resumes after this
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5,
	},
}

// Retention runs the retention purge once (the PurgeExpired activity at the workflow's
// time, by the horizons of the worker that runs it) and returns what it purged. The
// installation's retention schedule starts it (docs/operations.md, "Retention").
func Retention(ctx workflow.Context) (activities.PurgeOutput, error) {
	var out activities.PurgeOutput
	err := workflow.ExecuteActivity(withOptions(ctx, retentionOptions), activities.PurgeExpired,
		activities.PurgeInput{Now: workflow.Now(ctx)}).Get(ctx, &out)
	return out, err
}
