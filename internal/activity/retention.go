package activity

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// PurgeExpired runs the retention purge (docs/operations.md, "Retention") by the worker's
// horizons (Config.Retention; all zero: nothing but expired web sessions): for each class
// in store.RetentionClasses' order, batches of store.PurgeBatch until one purges fewer
// than the limit, heartbeating the counts so far between batches, until in.Budget (or
// activities.DefaultPurgeBudget) is used. It is idempotent: each batch purges only what is
// still due at in.Now, so a retry, or the next scheduled run, goes on where this one
// stopped.
func (a *Activities) PurgeExpired(ctx context.Context, in activities.PurgeInput) (activities.PurgeOutput, error) {
	policy := a.Config.Retention
	limit := in.Limit
	if limit <= 0 {
		limit = store.DefaultPurgeLimit
	}
	budget := in.Budget.D()
	if budget <= 0 {
		budget = activities.DefaultPurgeBudget
	}
	at := nowOr(in.Now)
	deadline := now().Add(budget)
	out := activities.PurgeOutput{Purged: map[string]int{}}
	for _, class := range store.RetentionClasses {
		out.Purged[class] = 0
	}
	for _, class := range store.RetentionClasses {
		for {
			if now().After(deadline) {
				a.log().Info("retention: the run's budget is used; the next run goes on", "purged", out.Purged)
				return out, nil
			}
			n, err := a.Store.PurgeBatch(ctx, at, policy, class, limit)
			if err != nil {
				return out, storeErr("purge "+class, err)
			}
			out.Purged[class] += n
			a.Metrics.RetentionPurged(class, n)
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, out.Purged)
			}
			faultpoint.Hit(faultpoint.PurgeBatchCommitted, class)
			if n < limit {
				break
			}
		}
	}
	out.Done = true
	a.log().Info("retention: purged", "purged", out.Purged, "at", at.Format(time.RFC3339))
	return out, nil
}
