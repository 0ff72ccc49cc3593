// Package faultpoint names the instants at which the crash tests kill a worker process:
// instants no signal sent from outside can hit, such as the one between the pickup of a
// poll activity and the taking of its lease. In the product's build Hit does nothing and
// costs a function call. A binary built with -tags faultpoints kills its own process with
// SIGKILL at the point named by ILINKFLOW_FAULTPOINT, the first time the point is reached
// once ILINKFLOW_FAULTPOINT_AFTER (a Go duration, default 0) has passed since the process
// started; just before, it prints one line to stderr:
//
//	faultpoint: killing the process at poll-picked-up (account ilk_…)
package faultpoint

// The named points.
const (
	// PollPickedUp: a PollAccount activity has started on this worker and has not taken
	// the bot's poll lease yet. Detail: the account key.
	PollPickedUp = "poll-picked-up"
	// SendInFlight: a sendmessage request reached iLink and its outcome is not recorded
	// yet. Detail: the account key.
	SendInFlight = "send-in-flight"
	// PurgeBatchCommitted: a batch of the retention purge (activity PurgeExpired) committed,
	// was counted in ilinkflow_retention_purged_total and heartbeated; the next batch has not
	// begun. Detail: the retention class (printed where the other points print the account).
	PurgeBatchCommitted = "purge-batch-committed"
)

// Line is the prefix of the line printed before the process kills itself.
const Line = "faultpoint: killing the process at "
