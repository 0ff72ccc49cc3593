package loadtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/temporalconn"
)

// partitionSettings are the dynamic-config values that serve every task queue through
// partitions partitions (none for 0: the server's default, four).
func partitionSettings(partitions int) map[string]any {
	if partitions <= 0 {
		return nil
	}
	return map[string]any{"matching.numTaskqueueReadPartitions": partitions, "matching.numTaskqueueWritePartitions": partitions}
}

// startDevServer starts the dev server with the pinned temporal CLI, its task queues
// served through partitions partitions (0: the server's default, four).
func startDevServer(ctx context.Context, logger *slog.Logger, partitions int) (*devserver.Server, error) {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(partitionSettings(partitions))) {
		args = append(args, "--dynamic-config-value", name+"="+strconv.Itoa(partitions))
	}
	return devserver.New(ctx, devserver.Options{Namespace: "ilinkflow-loadtest", Logger: logger, ExtraArgs: args})
}

// openNamespace returns a client of the given namespace, or registers a fresh one named
// fresh and returns a function that deletes it.
func openNamespace(ctx context.Context, addr, given, fresh string, logger *slog.Logger) (string, client.Client, func() error, error) {
	// The gateway's worker sends uncompressed by default (gateway.CompressionNone); the
	// engine ceiling's worker and loop use this client, so they do the same.
	opts := client.Options{Logger: tlog.NewStructuredLogger(logger),
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// TLS, a client certificate or an API key come from the same settings the worker
	// reads (temporalconn), with the address and namespace of the run.
	conn, err := temporalconn.Load(os.Getenv, temporalconn.Overrides{Address: addr, Namespace: fresh})
	if err != nil {
		return "", nil, nil, err
	}
	if given != "" {
		c, err := temporalconn.Dial(ctx, conn.WithTarget(addr, given), opts)
		if err != nil {
			return "", nil, nil, fmt.Errorf("connect Temporal at %s: %w", addr, err)
		}
		return given, c, nil, nil
	}
	// The fresh namespace does not exist yet: no namespace check on this dial.
	c, err := client.DialContext(ctx, conn.ClientOptions(opts))
	if err != nil {
		return "", nil, nil, fmt.Errorf("connect Temporal at %s: %w", addr, err)
	}
	if err := devserver.CreateNamespace(ctx, c, fresh, "ilinkflow load test"); err != nil {
		c.Close()
		return "", nil, nil, err
	}
	drop := func() error {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_, err := c.OperatorService().DeleteNamespace(dctx, &operatorservice.DeleteNamespaceRequest{Namespace: fresh})
		return err
	}
	return fresh, c, drop, nil
}

// Billed kinds: how a history event is counted (docs.temporal.io/cloud/actions).
const (
	kindStarted         = "workflow started"
	kindStartedByCAN    = "workflow started by continue-as-new"
	kindChildStarted    = "child workflow started"
	kindActivity        = "activity scheduled"
	kindActivityRetry   = "activity retry (attempt > 1)"
	kindTimer           = "timer started"
	kindSignal          = "signal received"
	kindUpdate          = "update accepted"
	kindSearchAttribute = "search-attribute upsert"
	kindMemo            = "memo upsert"
	kindMarker          = "marker (local activity, side effect)"
)

// CountedActions lists what the run counts as billed actions, for the report.
var CountedActions = []string{
	kindStarted + " (by a client, signal-with-start, continue-as-new or a parent: one per run)",
	kindActivity, kindActivityRetry, kindTimer,
	kindSignal + " (from a client, signal-with-start or another workflow: one per signal)",
	kindUpdate, kindSearchAttribute, kindMemo, kindMarker,
	"activity heartbeat (recorded by the server: the worker's RecordActivityTaskHeartbeat requests, from its SDK metrics)",
	"query (the worker's QueryWorkflow requests, from its SDK metrics; the run makes none)",
}

// billed returns the kinds an event is billed as, with their counts (none for an event
// that is not an action).
func billed(ev *historypb.HistoryEvent) map[string]int {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a := ev.GetWorkflowExecutionStartedEventAttributes()
		switch {
		case a.GetContinuedExecutionRunId() != "":
			return map[string]int{kindStartedByCAN: 1}
		case a.GetParentWorkflowExecution() != nil:
			return map[string]int{kindChildStarted: 1}
		}
		return map[string]int{kindStarted: 1}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return map[string]int{kindActivity: 1}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		if n := ev.GetActivityTaskStartedEventAttributes().GetAttempt(); n > 1 {
			return map[string]int{kindActivityRetry: int(n - 1)}
		}
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		return map[string]int{kindTimer: 1}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		return map[string]int{kindSignal: 1}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		return map[string]int{kindUpdate: 1}
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		return map[string]int{kindSearchAttribute: 1}
	case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
		return map[string]int{kindMemo: 1}
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		return map[string]int{kindMarker: 1}
	}
	return nil
}

// Cost is what a window cost in Temporal history.
type Cost struct {
	// Events counts the history events written in the window (every type).
	Events int `json:"events"`
	// Actions counts the billed actions among them (heartbeats and queries not included).
	Actions int `json:"actions"`
	// ByKind splits Actions by kind.
	ByKind map[string]int `json:"by_kind"`
	// WorkflowTasks counts the workflow tasks completed (not an action, but the server's
	// and the worker's work of each round of a workflow).
	WorkflowTasks int `json:"workflow_tasks"`
}

func (c *Cost) add(ev *historypb.HistoryEvent) {
	c.Events++
	if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
		c.WorkflowTasks++
	}
	for k, n := range billed(ev) {
		if c.ByKind == nil {
			c.ByKind = map[string]int{}
		}
		c.ByKind[k] += n
		c.Actions += n
	}
}

func (c *Cost) merge(o Cost) {
	c.Events += o.Events
	c.Actions += o.Actions
	c.WorkflowTasks += o.WorkflowTasks
	for k, n := range o.ByKind {
		if c.ByKind == nil {
			c.ByKind = map[string]int{}
		}
		c.ByKind[k] += n
	}
}

// costIn counts the events of one history written within [from, to).
func costIn(h []*historypb.HistoryEvent, from, to time.Time) Cost {
	var c Cost
	for _, ev := range h {
		t := ev.GetEventTime().AsTime()
		if !t.Before(from) && t.Before(to) {
			c.add(ev)
		}
	}
	return c
}

// countTemporal reads the history of every workflow run of the namespace and counts the
// events and actions of the idle and load windows.
func (r *run) countTemporal(ctx context.Context, idle, load window) error {
	var idleC, loadC Cost
	err := r.readHistories(ctx, func(events []*historyEvent) {
		idleC.merge(costIn(events, idle.from, idle.to))
		loadC.merge(costIn(events, load.from, load.to))
	})
	if err != nil {
		return err
	}
	r.rep.setIdleCost(idleC, idle, r)
	r.rep.setLoadCost(loadC, load)
	return nil
}

// historyEvent is one event of a workflow history.
type historyEvent = historypb.HistoryEvent

// readHistories reads the history of every workflow run of the namespace and hands each
// to use (one call at a time).
func (r *run) readHistories(ctx context.Context, use func([]*historyEvent)) error {
	began := time.Now()
	type exec struct{ id, run string }
	var execs []exec
	var token []byte
	for {
		resp, err := r.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: r.ns, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		for _, info := range resp.Executions {
			execs = append(execs, exec{info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()})
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	var (
		mu             sync.Mutex
		firstErr       error
		wg             sync.WaitGroup
		jobs           = make(chan exec)
		ctxErr, cancel = context.WithCancel(ctx)
	)
	defer cancel()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				var events []*historypb.HistoryEvent
				it := r.tc.GetWorkflowHistory(ctxErr, e.id, e.run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
				var err error
				for it.HasNext() {
					var ev *historypb.HistoryEvent
					if ev, err = it.Next(); err != nil {
						break
					}
					events = append(events, ev)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("history of %s: %w", e.id, err)
					}
					cancel()
				} else {
					use(events)
				}
				mu.Unlock()
			}
		}()
	}
	for _, e := range execs {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	r.log.Info("histories read", "runs", len(execs), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// sortedKinds lists a ByKind map as "kind n" in a stable order.
func sortedKinds(by map[string]int) []string {
	var out []string
	for k, n := range by {
		out = append(out, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(out)
	return out
}

// withParams sets run-time parameters on a PostgreSQL URL or key=value DSN.
func withParams(base string, params map[string]string) (string, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !strings.Contains(base, "://") {
		out := base
		for _, k := range keys {
			out += " " + k + "=" + params[k]
		}
		return out, nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("database URL does not parse (not shown: it may hold a password)")
	}
	q := u.Query()
	for _, k := range keys {
		q.Set(k, params[k])
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func httpGet(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}
