package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// The retention tests run the worker command (the echo agent answers every message) with
// a content horizon of seconds. The schedule's interval cannot be shorter than a minute
// (gateway.MinRetentionEvery), so the test pauses the schedule once the worker made it and
// starts each run itself, as `temporal schedule trigger` does (a paused schedule takes no
// run of its own; a trigger still starts one).
const (
	retainContent = 3 * time.Second
	retainRows    = 168 * time.Hour // the floor of --retain-rows: no row is deleted here
	// retentionWithin bounds a triggered run, from the trigger to its result, and the
	// waits of the stream (a message answered) on a busy machine.
	retentionWithin = 2 * time.Minute
	// retentionResumeWithin bounds a run whose worker was SIGKILLed mid-purge: the dead
	// attempt's heartbeat timeout (30 s, workflows.retentionOptions), the retry's
	// backoff (10 s), the retry itself, and a wide margin.
	retentionResumeWithin = 6 * time.Minute
	// retentionPace paces the messages that flow beside a purge (not a wait for a condition).
	retentionPace = 250 * time.Millisecond
)

// retentionRig is a process rig whose workers purge content after retainContent.
type retentionRig struct {
	*procRig
	dc    converter.DataConverter
	sched client.ScheduleHandle
}

func newRetentionRig(t *testing.T) *retentionRig {
	t.Helper()
	r := newProcRig(t, time.Second, store.DefaultLimits())
	return &retentionRig{procRig: r, dc: codecConverter(t)}
}

// startWorker runs the worker bin with the retention settings (plus more) and waits until
// it has created or checked the retention schedule, which it does after its reconcile.
func (r *retentionRig) startWorker(name, bin string, more map[string]string) *proc {
	r.t.Helper()
	set := map[string]string{
		"ILINKFLOW_HANDLER":         "echo",
		"ILINKFLOW_SEND_GAP":        "5ms",
		"ILINKFLOW_POLL_SESSION":    "3s",
		"ILINKFLOW_HEARTBEAT":       "1s",
		"ILINKFLOW_SHUTDOWN_GRACE":  "2s",
		"ILINKFLOW_POLL_LEASE_TTL":  "6s",
		"ILINKFLOW_RETAIN_CONTENT":  retainContent.String(),
		"ILINKFLOW_RETAIN_ROWS":     retainRows.String(),
		"ILINKFLOW_RETENTION_EVERY": "1h",
	}
	maps.Copy(set, more)
	p := startProc(r.t, name, bin, r.baseEnv(set))
	p.waitLog(r.t, `msg="retention schedule"`, retentionWithin)
	return p
}

// pauseSchedule pauses the installation's retention schedule (an operator's pause, which
// a worker's start keeps) and checks it is the one the worker made.
func (r *retentionRig) pauseSchedule() {
	r.t.Helper()
	r.sched = r.tc.ScheduleClient().GetHandle(r.ctx, r.installation().RetentionScheduleID())
	if err := r.sched.Pause(r.ctx, client.SchedulePauseOptions{Note: "e2e: the test triggers each run"}); err != nil {
		r.t.Fatalf("pause the retention schedule: %v", err)
	}
	d := r.describeSchedule()
	a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !d.Schedule.State.Paused || d.Schedule.Spec == nil || len(d.Schedule.Spec.Intervals) != 1 ||
		d.Schedule.Spec.Intervals[0].Every != time.Hour || !ok || a.Workflow != wfapi.RetentionWorkflow || a.TaskQueue != r.tq {
		r.t.Fatalf("the retention schedule: %+v (action %+v)", d.Schedule, d.Schedule.Action)
	}
}

func (r *retentionRig) describeSchedule() *client.ScheduleDescription {
	r.t.Helper()
	d, err := r.sched.Describe(r.ctx)
	if err != nil {
		r.t.Fatalf("describe the retention schedule: %v", err)
	}
	return d
}

// trigger starts a Retention run now and returns its workflow.
func (r *retentionRig) trigger() client.ScheduleWorkflowExecution {
	r.t.Helper()
	before := r.describeSchedule().Info.NumActions
	if err := r.sched.Trigger(r.ctx, client.ScheduleTriggerOptions{}); err != nil {
		r.t.Fatalf("trigger the retention schedule: %v", err)
	}
	var run client.ScheduleWorkflowExecution
	r.eventually("the triggered Retention run started", retentionWithin, func() (bool, error) {
		d, err := r.sched.Describe(r.ctx)
		if err != nil || d.Info.NumActions <= before || len(d.Info.RecentActions) == 0 {
			return false, err
		}
		last := d.Info.RecentActions[len(d.Info.RecentActions)-1]
		if last.StartWorkflowResult == nil {
			return false, nil
		}
		run = *last.StartWorkflowResult
		return true, nil
	})
	return run
}

// result waits for a run's result.
func (r *retentionRig) result(run client.ScheduleWorkflowExecution, within time.Duration) activities.PurgeOutput {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, within)
	defer cancel()
	var out activities.PurgeOutput
	if err := r.tc.GetWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, &out); err != nil {
		r.t.Fatalf("the Retention run %s did not complete within %v: %v", run.WorkflowID, within, err)
	}
	return out
}

// purgeActivity is what a run's history says of its PurgeExpired: the time it purged at
// (its input's Now, the workflow's time) and, once it completed, the attempt that did and
// the worker that ran it.
type purgeActivity struct {
	now      time.Time
	attempt  int32
	identity string
}

func (r *retentionRig) purgeActivity(run client.ScheduleWorkflowExecution) purgeActivity {
	r.t.Helper()
	var pa purgeActivity
	it := r.tc.GetWorkflowHistory(r.ctx, run.WorkflowID, run.FirstExecutionRunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			r.t.Fatalf("history of %s: %v", run.WorkflowID, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			var in activities.PurgeInput
			if err := r.dc.FromPayloads(a.GetInput(), &in); err != nil {
				r.t.Fatalf("PurgeExpired's input: %v", err)
			}
			pa.now = in.Now
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			pa.attempt, pa.identity = a.GetAttempt(), a.GetIdentity()
		}
	}
	if pa.now.IsZero() {
		r.t.Fatalf("the Retention run %s scheduled no PurgeExpired", run.WorkflowID)
	}
	return pa
}

// retained is one inbound message as the store holds it, with its window and replies.
type retained struct {
	key, providerID, status string
	payload                 bool // the payload column is not NULL
	erasedAt                *time.Time
	createdAt, updatedAt    time.Time
	window                  int64 // 0: none
	windowState             string
	windowChanged           time.Time // when the window last changed (closed, for one not open)
	attempts, erasedReplies int       // send attempts, and those whose content is erased
}

// dueAt tells whether the content purge at now takes the message (the rule of
// queries/retention.sql, RetentionContentDue): its window closed before the horizon (a
// message without a window: its last change), an open window's message never.
func (m retained) dueAt(now time.Time) bool {
	cutoff := now.Truncate(time.Microsecond).Add(-retainContent)
	if !m.createdAt.Before(cutoff) {
		return false
	}
	if m.window == 0 {
		return m.updatedAt.Before(cutoff)
	}
	return m.windowState != vocab.WindowOpen && m.windowChanged.Before(cutoff)
}

// erasedBy tells whether the message's content was erased by the purge at now.
func (m retained) erasedBy(now time.Time) bool {
	return m.erasedAt != nil && m.erasedAt.Equal(now.Truncate(time.Microsecond))
}

// inbox reads every inbound message, oldest first.
func (r *retentionRig) inbox() []retained {
	r.t.Helper()
	rows, err := r.pool.Query(r.ctx, `
SELECT m.message_key, m.provider_message_id, m.status, m.payload IS NOT NULL, m.erased_at, m.created_at, m.updated_at,
       coalesce(w.reply_window_id, 0), coalesce(w.state, ''), coalesce(w.updated_at, 'epoch'::timestamptz),
       (SELECT count(*) FROM send_attempts a WHERE a.source_message_key = m.message_key),
       (SELECT count(*) FROM send_attempts a WHERE a.source_message_key = m.message_key AND a.erased_at IS NOT NULL)
FROM inbound_messages m LEFT JOIN reply_windows w ON w.source_message_key = m.message_key
ORDER BY m.inbox_seq`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var out []retained
	for rows.Next() {
		var m retained
		if err := rows.Scan(&m.key, &m.providerID, &m.status, &m.payload, &m.erasedAt, &m.createdAt, &m.updatedAt,
			&m.window, &m.windowState, &m.windowChanged, &m.attempts, &m.erasedReplies); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// count runs a count query.
func (r *retentionRig) count(query string, args ...any) int {
	r.t.Helper()
	var n int
	if err := r.pool.QueryRow(r.ctx, query, args...).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// assertPurgedAt checks the inbox against the purge at now: every message due then has
// its content erased by it (payload and replies' content gone, erased_at now) and keeps
// its row, key, iLink id, status and window; every other message is untouched. It
// returns how many it erased.
func (r *retentionRig) assertPurgedAt(inbox []retained, now time.Time) (erased int) {
	r.t.Helper()
	for _, m := range inbox {
		switch {
		case m.dueAt(now):
			erased++
			if !m.erasedBy(now) || m.payload || m.erasedReplies != m.attempts || m.window == 0 || m.providerID == "" {
				r.t.Errorf("message %s (iLink id %s), due at %v, not erased as the rule says: %+v", m.key, m.providerID,
					now.Format(time.RFC3339Nano), m)
			}
		case m.erasedAt != nil || m.erasedReplies != 0 || (!m.payload && m.status != vocab.MessageAbsorbed):
			r.t.Errorf("message %s (iLink id %s), not due at %v (window %s, changed %v), was touched: %+v", m.key, m.providerID,
				now.Format(time.RFC3339Nano), m.windowState, m.windowChanged.Format(time.RFC3339Nano), m)
		}
	}
	return erased
}

// retentionCounter reads ilinkflow_retention_purged_total{class} from a worker's /metrics.
func retentionCounter(t *testing.T, p *proc, class string) float64 {
	t.Helper()
	return metricOf(t, p, "ilinkflow_retention_purged_total", "class", class)
}

// metricOf reads one series from a worker's /metrics (-1 when absent).
func metricOf(t *testing.T, p *proc, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.httpAddr(t) + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return value(fams, name, labels...)
}

// talker is the bot's owner writing to it: each message is answered (the echo agent)
// before the next is sent, so each is a page of its own and closes (supersedes) the
// window of the one before.
type talker struct {
	ctx      context.Context
	ctl      *ilinksim.Control
	bot      string
	said     []ilinksim.Injected
	text     []string
	answered atomic.Int64 // len(said) once each is answered, readable while flow runs
}

// say sends text and waits for its answer.
func (tk *talker) say(text string) error {
	in, err := tk.ctl.InjectText(tk.ctx, tk.bot, "", text)
	if err != nil {
		return err
	}
	tk.said, tk.text = append(tk.said, in), append(tk.text, text)
	want := len(tk.said)
	if err := crashAwait(tk.ctx, retentionWithin, func() bool {
		sent, err := tk.ctl.Sent(tk.ctx, tk.bot)
		return err == nil && len(sent) >= want
	}); err != nil {
		return fmt.Errorf("%q not answered within %v: %w", text, retentionWithin, err)
	}
	tk.answered.Store(int64(want))
	return nil
}

// flow says a message every retentionPace until stop is closed.
func (tk *talker) flow(stop <-chan struct{}) error {
	for i := 1; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := tk.say(fmt.Sprintf("a message while the purge runs %d", i)); err != nil {
			return err
		}
		if err := crashPause(tk.ctx, retentionPace); err != nil {
			return err
		}
	}
}

// assertAnsweredOnce checks that the bot sent one echo per message said, in order: none
// was answered twice, none left unanswered.
func (tk *talker) assertAnsweredOnce(t *testing.T) {
	t.Helper()
	sent, err := tk.ctl.Sent(tk.ctx, tk.bot)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != len(tk.text) {
		t.Errorf("the bot sent %d replies to %d messages", len(sent), len(tk.text))
	}
	for i := range min(len(sent), len(tk.text)) {
		if want := handoff.EchoPrefix + tk.text[i]; sent[i].Text != want || sent[i].Outcome != ilinksim.OutcomeAccepted {
			t.Errorf("reply %d: %q (%s), want %q", i+1, sent[i].Text, sent[i].Outcome, want)
		}
	}
}

// Retention with a short clock (content kept 3 s after its window closed, rows a week):
// three answered messages whose windows closed more than 3 s ago lose their content to a
// run of the retention schedule while the owner goes on writing (a message every quarter
// second, each answered, beside the run): their payload and the content of the replies
// to them are gone, erased_at is the run's time, and their rows, keys, iLink ids,
// statuses and windows stay. Every message whose window is open, or closed less than 3 s
// before the run, is untouched, and the run's counts and the worker's counter equal what
// it erased. iLink then hands out the first old message again: it is a duplicate (the
// kept key), neither stored again nor answered again, and its content stays erased.
func TestRetentionPurgesPastTheHorizonWhileMessagesFlowAndKeepsTheDedupeKey(t *testing.T) {
	t.Parallel()
	r := newRetentionRig(t)
	w := r.startWorker("worker", r.bin, nil)
	r.pauseSchedule()
	tk := &talker{ctx: r.ctx, ctl: r.ctl, bot: r.bot.BotID}

	// Three old messages, each answered, each window closed by the next message.
	for i := 1; i <= 3; i++ {
		if err := tk.say(fmt.Sprintf("an old message %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	old := append([]ilinksim.Injected(nil), tk.said...)
	oldIDs := make([]string, len(old))
	for i, in := range old {
		oldIDs[i] = strconv.FormatUint(in.MessageID, 10)
	}
	// Messages go on until the old windows closed more than the horizon ago.
	r.eventually("the old messages' windows closed past the horizon", retentionWithin, func() (bool, error) {
		if err := tk.say(fmt.Sprintf("a message before the purge %d", len(tk.said)-len(old)+1)); err != nil {
			return false, err
		}
		n := r.count(`SELECT count(*) FROM inbound_messages m JOIN reply_windows w ON w.source_message_key = m.message_key
WHERE m.provider_message_id = ANY($1) AND w.state <> 'open' AND w.updated_at < clock_timestamp() - make_interval(secs => $2)`,
			oldIDs, retainContent.Seconds())
		return n == len(old), nil
	})

	// A run while messages flow.
	stop, flowed := make(chan struct{}), make(chan error, 1)
	go func() { flowed <- tk.flow(stop) }()
	run := r.trigger()
	out := r.result(run, retentionWithin)
	after := tk.answered.Load()
	r.eventually("two more messages answered after the run", retentionWithin, func() (bool, error) {
		return tk.answered.Load() >= after+2, nil
	})
	close(stop)
	if err := <-flowed; err != nil {
		t.Fatalf("the messages beside the purge: %v", err)
	}
	pa := r.purgeActivity(run)
	inbox := r.inbox()
	erased := r.assertPurgedAt(inbox, pa.now)
	byID := byIDOf(inbox)
	for _, id := range oldIDs {
		m := byID[id]
		if !m.erasedBy(pa.now) || m.status != vocab.MessageHandled || m.windowState != vocab.WindowSuperseded || m.attempts != 1 {
			t.Errorf("old message %s after the purge: %+v, want erased, still handled, its superseded window and its reply kept", id, m)
		}
	}
	younger := 0 // messages of the run's time not past the horizon: window open or closed within it
	for _, m := range inbox {
		if !m.dueAt(pa.now) && m.createdAt.Before(pa.now) {
			younger++
		}
	}
	if arrived := len(inbox) - countCreatedBefore(inbox, pa.now); younger == 0 || arrived < 2 {
		t.Errorf("the purge met %d messages not past the horizon and %d arrived after its time: the test did not check what it means to", younger, arrived)
	}
	if !out.Done || out.Purged[store.RetentionContent] != erased || erased < len(old) {
		t.Errorf("the run reported %+v; it erased %d messages (at least the %d old ones)", out, erased, len(old))
	}
	for _, class := range store.RetentionClasses {
		if class != store.RetentionContent && out.Purged[class] != 0 {
			t.Errorf("the run purged %d of class %s, want none", out.Purged[class], class)
		}
	}
	if got := retentionCounter(t, w, store.RetentionContent); got != float64(erased) {
		t.Errorf("ilinkflow_retention_purged_total{class=content} = %v, want %d", got, erased)
	}
	if got := r.count("SELECT count(*) FROM inbound_messages WHERE erased_at IS NOT NULL"); got != erased {
		t.Errorf("%d messages are erased, the run erased %d", got, erased)
	}

	// iLink hands the first old message out again; the owner writes once more.
	if _, err := r.ctl.Duplicate(r.ctx, r.bot.BotID, ilinksim.DuplicateRequest{MessageID: old[0].MessageID,
		DuplicateSpec: ilinksim.DuplicateSpec{Mode: ilinksim.DupSame}}); err != nil {
		t.Fatal(err)
	}
	if err := tk.say("a message after the redelivery"); err != nil {
		t.Fatal(err)
	}
	r.eventually("the redelivery counted as a duplicate", retentionWithin, func() (bool, error) {
		return metricOf(t, w, "ilinkflow_messages_total", "outcome", "duplicate") == 1, nil
	})
	if n := r.count("SELECT count(*) FROM inbound_messages WHERE provider_message_id = $1", oldIDs[0]); n != 1 {
		t.Errorf("the redelivered message is stored %d times, want once", n)
	}
	if m := r.inbox(); len(m) != len(inbox)+1 {
		t.Errorf("the inbox holds %d messages after the redelivery and one more message, want %d", len(m), len(inbox)+1)
	}
	again := byIDOf(r.inbox())[oldIDs[0]]
	if !again.erasedBy(pa.now) || again.payload || again.window != byID[oldIDs[0]].window || again.attempts != 1 {
		t.Errorf("the redelivered message after its redelivery: %+v, want its erased row as it was", again)
	}
	tk.assertAnsweredOnce(t)
	t.Logf("the run at %v erased %d messages (%d old, %d more past the horizon by then); untouched: %d not past it (window open or closed within it), %d that arrived after the run's time; %d messages said in all",
		pa.now.Format(time.RFC3339Nano), erased, len(old), erased-len(old), younger, len(inbox)-countCreatedBefore(inbox, pa.now), len(tk.said))
}

// byIDOf indexes an inbox by iLink message id (one bot here).
func byIDOf(inbox []retained) map[string]retained {
	out := map[string]retained{}
	for _, m := range inbox {
		out[m.providerID] = m
	}
	return out
}

// countCreatedBefore counts the messages stored before t.
func countCreatedBefore(inbox []retained, t time.Time) int {
	n := 0
	for _, m := range inbox {
		if m.createdAt.Before(t) {
			n++
		}
	}
	return n
}

// retentionBulk is how many messages the kill test purges: more than one batch
// (store.DefaultPurgeLimit), so that the purge is killed with some of them erased and the
// rest still due.
const retentionBulk = 700

// A run of the retention schedule whose worker is SIGKILLed mid-purge, right after its
// first batch committed (fault point purge-batch-committed: the batch of 500 erased,
// counted and heartbeated, the next not begun), is resumed by the retry of its activity
// on a fresh worker once the dead attempt's heartbeat timed out, while messages go on
// arriving. The retry purges at the run's time, so it takes exactly what the killed
// attempt left: at the end every message due at the run's time is erased and nothing
// younger is touched.
//
// No double counts, precisely: each due message is erased by one batch only (the killed
// attempt's 500 are not taken again), so what the killed attempt counted (its last
// heartbeat, which it recorded with its counter after the batch committed) and what the
// retry counted (its result, the same number as the fresh worker's
// ilinkflow_retention_purged_total{class="content"}) add up to exactly the messages
// erased, and the retry's count is the due messages less the killed attempt's.
//
// Meanwhile a trigger of the schedule (an operator's `temporal schedule trigger`) starts
// nothing: the killed run still runs, waiting for its retry, and the schedule skips
// overlapping runs.
func TestAPurgeKilledMidBatchResumesOnTheNextWorkerWithoutCountingTwice(t *testing.T) {
	t.Parallel()
	began := time.Now()
	r := newRetentionRig(t)
	bin := faultWorkerBinary(t)
	// A backlog of messages, queued before the worker starts: iLink hands them out in
	// pages (up to 100), each page's messages but its last absorbed into it, each window
	// but the last closed by the next page.
	for i := 1; i <= retentionBulk; i++ {
		if _, err := r.ctl.InjectText(r.ctx, r.bot.BotID, "", fmt.Sprintf("backlog message %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	victim := r.startWorker("armed worker", bin, map[string]string{
		"ILINKFLOW_FAULTPOINT": faultpoint.PurgeBatchCommitted, "ILINKFLOW_FAULTPOINT_AFTER": "0s"})
	r.pauseSchedule()
	ready := time.Now()
	r.eventually("the backlog stored and its last delivery answered", retentionWithin, func() (bool, error) {
		n := r.count("SELECT count(*) FROM inbound_messages")
		open := r.count("SELECT count(*) FROM reply_windows WHERE state = 'open'")
		answered := r.count(`SELECT count(*) FROM inbound_messages m JOIN reply_windows w ON w.source_message_key = m.message_key
WHERE w.state = 'open' AND m.status = 'handled'`)
		return n == retentionBulk && open == 1 && answered == 1, fmt.Errorf("%d messages stored, %d windows open, %d answered", n, open, answered)
	})
	r.eventually("the backlog's closed windows past the horizon", retentionWithin, func() (bool, error) {
		n := r.count(`SELECT count(*) FROM reply_windows WHERE state <> 'open' AND updated_at >= clock_timestamp() - make_interval(secs => $1)`,
			retainContent.Seconds())
		return n == 0, nil
	})
	stored := time.Now()

	// Messages go on arriving, one at a time, through the kill and the resume; no answer
	// is waited for (none comes while no worker runs).
	flowCtx, stopFlow := context.WithCancel(r.ctx)
	defer stopFlow()
	flowed := make(chan int, 1)
	go func() {
		n := 0
		for ; flowCtx.Err() == nil; n++ {
			if _, err := r.ctl.InjectText(flowCtx, r.bot.BotID, "", fmt.Sprintf("a message beside the purge %d", n+1)); err != nil {
				break
			}
			if crashPause(flowCtx, retentionPace) != nil {
				break
			}
		}
		flowed <- n
	}()

	// The run: the armed worker kills itself after the first batch.
	run := r.trigger()
	select {
	case <-victim.exited:
	case <-time.After(retentionWithin):
		t.Fatalf("the armed worker did not reach its fault point within %v:\n%s", retentionWithin, crashTail(victim.out.String(), 40))
	}
	m := faultLineRE.FindStringSubmatch(victim.out.String())
	if m == nil || m[1] != faultpoint.PurgeBatchCommitted || m[2] != store.RetentionContent {
		t.Fatalf("the armed worker exited (%v) without reaching its fault point:\n%s", victim.exitErr, crashTail(victim.out.String(), 40))
	}
	if ws, ok := victim.exitErr.(*exec.ExitError); !ok || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the armed worker exited with %v, want killed by SIGKILL", victim.exitErr)
	}
	erasedAtKill := r.count("SELECT count(*) FROM inbound_messages WHERE erased_at IS NOT NULL")
	if erasedAtKill != store.DefaultPurgeLimit {
		t.Fatalf("%d messages erased when the worker died after its first batch, want one batch (%d)", erasedAtKill, store.DefaultPurgeLimit)
	}
	killed := r.killedAttempt(run)
	if killed[store.RetentionContent] != erasedAtKill {
		t.Fatalf("the killed attempt's last heartbeat counts %v, want the %d it erased", killed, erasedAtKill)
	}

	// An operator's trigger now starts nothing: the killed run is still running.
	skipped := r.describeSchedule().Info.NumActionsSkippedOverlap
	actions := r.describeSchedule().Info.NumActions
	if err := r.sched.Trigger(r.ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	r.eventually("the trigger beside the killed run skipped", retentionWithin, func() (bool, error) {
		d, err := r.sched.Describe(r.ctx)
		if err != nil {
			return false, err
		}
		running := len(d.Info.RunningWorkflows) == 1 && d.Info.RunningWorkflows[0].WorkflowID == run.WorkflowID
		return d.Info.NumActionsSkippedOverlap > skipped && d.Info.NumActions == actions && running,
			fmt.Errorf("actions %d (skipped %d), running %v", d.Info.NumActions, d.Info.NumActionsSkippedOverlap, d.Info.RunningWorkflows)
	})

	// A fresh worker; the run resumes there once the dead attempt timed out.
	fresh := r.startWorker("fresh worker", bin, nil)
	out := r.result(run, retentionResumeWithin)
	resumedAfter := time.Since(victim.ended)
	stopFlow()
	flowedN := <-flowed
	pa := r.purgeActivity(run)
	if pa.attempt != 2 || holderPID(pa.identity) != fresh.cmd.Process.Pid {
		t.Errorf("the purge completed in attempt %d by %q, want its retry (2) on the fresh worker (pid %d)", pa.attempt, pa.identity, fresh.cmd.Process.Pid)
	}
	inbox := r.inbox()
	erased := r.assertPurgedAt(inbox, pa.now)
	if erased <= store.DefaultPurgeLimit {
		t.Fatalf("%d messages were due at the run's time: the test needs more than one batch", erased)
	}
	if got := r.count("SELECT count(*) FROM inbound_messages WHERE erased_at IS NOT NULL"); got != erased {
		t.Errorf("%d messages are erased, %d were due", got, erased)
	}
	counter := retentionCounter(t, fresh, store.RetentionContent)
	if !out.Done || out.Purged[store.RetentionContent] != erased-erasedAtKill || killed[store.RetentionContent]+out.Purged[store.RetentionContent] != erased ||
		counter != float64(out.Purged[store.RetentionContent]) {
		t.Errorf("counted twice or not at all: %d due and erased, %d by the killed attempt (its heartbeat %v), the retry reported %+v, the fresh worker's counter %v",
			erased, erasedAtKill, killed, out, counter)
	}
	t.Logf("%d messages due at the run's time: %d erased before the SIGKILL, %d by the retry on the fresh worker, done %v after the SIGKILL (attempt %d); %d messages arrived meanwhile, %d messages in the inbox",
		erased, erasedAtKill, out.Purged[store.RetentionContent], resumedAfter.Round(time.Second), pa.attempt, flowedN, len(inbox))
	t.Logf("timings: rig, build and armed worker %v, the backlog stored and past the horizon %v, the run to its result %v",
		ready.Sub(began).Round(time.Millisecond), stored.Sub(ready).Round(time.Millisecond), time.Since(stored).Round(time.Millisecond))
}

// killedAttempt returns the counts of the run's PurgeExpired attempt in flight as its last
// heartbeat recorded them (Temporal keeps them until the attempt is retried).
func (r *retentionRig) killedAttempt(run client.ScheduleWorkflowExecution) map[string]int {
	r.t.Helper()
	d, err := r.tc.DescribeWorkflow(r.ctx, run.WorkflowID, run.FirstExecutionRunID)
	if err != nil {
		r.t.Fatal(err)
	}
	pending := d.RawResponse.GetPendingActivities()
	if len(pending) != 1 || pending[0].GetActivityType().GetName() != activities.PurgeExpired || pending[0].GetHeartbeatDetails() == nil {
		r.t.Fatalf("the killed run's pending activities: %v", pending)
	}
	var counts map[string]int
	if err := r.dc.FromPayloads(pending[0].GetHeartbeatDetails(), &counts); err != nil {
		r.t.Fatalf("the killed attempt's heartbeat: %v", err)
	}
	return counts
}
