package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Activity options, one per kind of activity. Rule violations are non-retryable
// application errors raised by the activities themselves.
var (
	// storeOptions: one short transaction.
	storeOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		},
	}
	// pollOptions: a long-poll session (activity.Config.PollSession, 10 minutes by
	// default, plus the wait for the windows it opened). No heartbeat: its liveness is the
	// poll lease, and a dead worker's poll is replaced on the lease supervisor's signal.
	pollOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 20 * time.Minute,
		// A poll goes through matching to any worker, never eagerly to the worker that
		// completed the poller's workflow task (wfapi.ServerSettings turns eager activities
		// on): the poller's tasks stick to one worker, so every next poll of the bot would
		// stay there, and a restarted or new worker would get polls only as they are
		// handed on.
		DisableEagerExecution: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		},
	}
	// sendOptions: reserve → start → transmit → complete; a retry never re-sends (the
	// activity completes an attempt it finds sending as unknown).
	sendOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 45 * time.Second,
		HeartbeatTimeout:    20 * time.Second, // a crashed worker's send is retried (and completed unknown) soon
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 10,
		},
	}
	// handOffOptions: open a session and deliver it to the agent's handler (a webhook
	// call, a workflow start). Failures back off; once the attempts are used up the
	// workflow offers the message again after its re-offer interval.
	handOffOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
		},
	}
	// upstreamOptions: one iLink call (QR, notify).
	upstreamOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 5,
		},
	}
)

func withOptions(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	return workflow.WithActivityOptions(ctx, o)
}

// sleepOrSignal waits until d passes or one of the channels has a message (it does not
// consume it). It reports whether the full duration passed.
func sleepOrSignal(ctx workflow.Context, d time.Duration, chans ...workflow.ReceiveChannel) bool {
	if d <= 0 {
		return true
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	fired := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, d), func(workflow.Future) { fired = true })
	for _, ch := range chans {
		sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) {})
	}
	sel.Select(ctx)
	return fired
}

// pollOptionsFor bounds a poll activity by the workers' poll session (when the poller
// knows it) plus wfapi.PollSlack: a poll that was dispatched to a worker that died before it took
// the bot's lease (so no lease expires for the supervisor to see) is retried then.
func pollOptionsFor(c wfapi.PollerConfig) workflow.ActivityOptions {
	o := pollOptions
	if s := c.PollSession.D(); s > 0 && s+wfapi.PollSlack < o.StartToCloseTimeout {
		o.StartToCloseTimeout = s + wfapi.PollSlack
	}
	return o
}
