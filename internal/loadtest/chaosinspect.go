package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// A bot without a getupdates in flight for stallAfter from the rolling restart on (for
// stallWatchFor) has where its poll is noted once: its poller's pending poll activity at
// Temporal and its lease row, so that a missed bound says where the poll went.
const (
	stallAfter    = 15 * time.Second
	stallWatchFor = 6 * time.Minute
)

// describeStalls notes, once per bot, where the poll of each bot that goes unpolled for
// stallAfter (since from at the earliest) is, until ctx is done.
func (c *chaosRun) describeStalls(ctx context.Context, from time.Time) {
	noted := map[int]bool{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for bot := range c.bots {
			if d := c.watch.unpolledFor(bot, from, time.Now()); !noted[bot] && d > stallAfter {
				noted[bot] = true
				c.note("stalled: the bot of %s unpolled for %v: %s", c.bots[bot].accountKey, d.Round(time.Second), c.describePoll(ctx, c.bots[bot].accountKey))
			}
		}
	}
}

// describePoll says where the bot's poll is: its lease row and its poller's pending
// PollAccount activity (state, attempt, last worker, last started, last failure).
func (c *chaosRun) describePoll(ctx context.Context, accountKey string) string {
	var b strings.Builder
	var holder, claimedFrom *string
	var epoch, claimedAt *int64
	var attempt *int32
	err := c.pool.QueryRow(ctx, `SELECT holder, epoch, attempt, claimed_from,
		(extract(epoch FROM claimed_at) * 1000)::bigint FROM poll_leases WHERE account_key = $1`, accountKey).
		Scan(&holder, &epoch, &attempt, &claimedFrom, &claimedAt)
	switch {
	case err != nil:
		fmt.Fprintf(&b, "lease: %v", err)
	default:
		fmt.Fprintf(&b, "lease holder %s epoch %s attempt %s claimed from %s at %s", deref(holder), deref(epoch), deref(attempt),
			deref(claimedFrom), deref(claimedAt))
	}
	var id string
	if err := c.pool.QueryRow(ctx, "SELECT installation_id FROM installation").Scan(&id); err != nil {
		fmt.Fprintf(&b, "; installation: %v", err)
		return b.String()
	}
	desc, err := c.tc.DescribeWorkflow(ctx, wfapi.AccountPollerID(id, accountKey), "")
	if err != nil {
		fmt.Fprintf(&b, "; poller: %v", err)
		return b.String()
	}
	fmt.Fprintf(&b, "; poller %v", desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	for _, pa := range desc.RawResponse.GetPendingActivities() {
		fmt.Fprintf(&b, "; activity %s %v attempt %d last worker %q started %v scheduled %v failure %q",
			pa.GetActivityType().GetName(), pa.GetState(), pa.GetAttempt(), pa.GetLastWorkerIdentity(),
			pa.GetLastStartedTime().AsTime().Format(time.RFC3339Nano), pa.GetScheduledTime().AsTime().Format(time.RFC3339Nano),
			pa.GetLastFailure().GetMessage())
	}
	return b.String()
}

// deref is *p as text ("-" for nil).
func deref[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// statusUnknownSend stands for the status of a stored message with a send attempt of
// unknown outcome.
const statusUnknownSend = "send_outcome_unknown"

// readStored reads the status of every stored inbound message.
func (c *chaosRun) readStored(ctx context.Context) error {
	// A message whose reply was being sent when its worker died has a send attempt of
	// unknown outcome: by the rule that an ambiguous send is never sent again, it gets no
	// reply; it is told apart (statusUnknownSend) from a loss.
	rows, err := c.pool.Query(ctx, `SELECT m.account_key, m.provider_message_id,
		CASE WHEN EXISTS (SELECT 1 FROM send_attempts a WHERE a.source_message_key = m.message_key AND a.status = 'unknown')
		     THEN '`+statusUnknownSend+`' ELSE m.status END
		FROM inbound_messages m`)
	if err != nil {
		return fmt.Errorf("read inbound_messages: %w", err)
	}
	defer rows.Close()
	stored := map[string]string{}
	for rows.Next() {
		var acct, id, status string
		if err := rows.Scan(&acct, &id, &status); err != nil {
			return fmt.Errorf("read inbound_messages: %w", err)
		}
		stored[acct+"/"+id] = status
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read inbound_messages: %w", err)
	}
	c.mu.Lock()
	c.stored = stored
	c.mu.Unlock()
	return nil
}

// storedKey names a message in the stored map.
func (c *chaosRun) storedKey(m *chaosMsg) string {
	return c.bots[m.bot].accountKey + "/" + strconv.FormatUint(m.messageID, 10)
}
