package activity

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// errLeaseHeld is returned (retryable) when another attempt holds an account's poll lease.
var errLeaseHeld = errors.New("activities: another poller holds the account's lease")

// Retries of a poll activity that owe nothing to its attempt count: a poll handed over by a
// stopping worker, or failed by a supervisor because its worker died, is retried at once
// on a live worker; one that found the lease held or lost it, every leaseHeldRetry until
// it has it again, however many attempts the activity had before.
const (
	handOverRetry  = 10 * time.Millisecond
	leaseHeldRetry = 2 * time.Second
)

// pollRetry is a retryable error of a poll activity of kind (the error type) retried after
// delay.
func pollRetry(kind string, delay time.Duration, cause error) error {
	return temporal.NewApplicationErrorWithOptions(cause.Error(), kind, temporal.ApplicationErrorOptions{
		Cause: cause, NextRetryDelay: delay, Category: temporal.ApplicationErrorCategoryBenign})
}

// errHandedOver ends a poll whose worker stops gracefully once its long poll ended: Temporal
// retries the activity at once on another worker (no workflow task on the way).
var errHandedOver = errors.New("activities: the worker stops; the poll goes on on another worker")

// errLeaseLost is returned (retryable) when a poll's lease was taken over, asked for by a
// newer poll, or not renewed in time: the poll stopped fetching.
var errLeaseLost = errors.New("activities: poll lease lost")

// errAttemptAdopted ends, on this worker, a poll whose lease expired while its worker was
// frozen or cut off and whose attempt another worker adopted: that worker polls the bot
// under the attempt and ends it, so this one sends Temporal no result.
var errAttemptAdopted = errors.New("activities: this poll's attempt was adopted by another worker")

// errLeaseShed ends a poll whose worker holds more than its share of the bots, once its
// long poll ended: Temporal retries it at once, on any worker (docs/poll-leases.md).
var errLeaseShed = errors.New("activities: this worker polls more than its share of the bots; the poll goes on elsewhere")

// storeErr maps a store failure to an activity error: a rule violation is a
// non-retryable application error whose type is the store code (retrying the same call
// cannot succeed); anything else (database unreachable, serialization conflict) is a
// plain, retryable error. Store errors never carry a secret.
func storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if store.IsRuleViolation(err) {
		// A refusal by a rule is an answer, not a fault: typed with its code for the
		// workflow, and benign, so that the SDK does not log it as an activity error.
		return temporal.NewApplicationErrorWithOptions(op+": "+err.Error(), string(store.CodeOf(err)),
			temporal.ApplicationErrorOptions{NonRetryable: true, Cause: err, Category: temporal.ApplicationErrorCategoryBenign})
	}
	return fmt.Errorf("%s: %w", op, err)
}

// upstreamErr maps an iLink failure of a one-shot call (QR login, notify): a failure that
// surely had no effect or may pass (transport, 5xx, 408, 429) is retryable; an invalid
// input is not; everything else is retryable as well, so that a short outage of iLink
// does not fail an enrollment. ilink errors never carry a secret.
func upstreamErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if ilink.CodeOf(err) == ilink.CodeInvalidInput {
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), activities.ErrTypeInvalidInput, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// pollStopCode reports the activities.PollResult.Stopped code of a store error that means "this
// generation can no longer poll", or "".
func pollStopCode(err error) string {
	switch c := store.CodeOf(err); c {
	case vocab.CodeAccountNotActive, vocab.CodeGenerationConflict, vocab.CodeAccountNotFound:
		return string(c)
	}
	return ""
}
