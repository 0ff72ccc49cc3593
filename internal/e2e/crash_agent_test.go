package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func (a *crashAgent) run(ctx context.Context) {
	defer a.wg.Wait()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		open, err := a.st.ListWindows(ctx, store.WindowFilter{AccountKey: a.account, State: vocab.WindowOpen})
		if err != nil {
			continue
		}
		for _, w := range open {
			a.mu.Lock()
			seen := a.seen[w.ReplyWindowID]
			a.mu.Unlock()
			if seen || !a.hasSession(ctx, w.ReplyWindowID) {
				continue
			}
			a.mu.Lock()
			a.seen[w.ReplyWindowID] = true
			a.inflight++
			a.mu.Unlock()
			a.wg.Add(1)
			go func(id int64) {
				defer a.wg.Done()
				a.reply(ctx, id)
			}(w.ReplyWindowID)
		}
	}
}

// windowWF is the workflow id of a reply window of the agent's installation.
func (a *crashAgent) windowWF(windowID int64) string { return a.inst.WindowWorkflowID(windowID) }

func (a *crashAgent) hasSession(ctx context.Context, windowID int64) bool {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := a.tc.QueryWorkflow(cctx, a.windowWF(windowID), "", wfapi.QueryWindowState)
	if err != nil {
		return false
	}
	var ws wfapi.WindowState
	return v.Get(&ws) == nil && ws.SessionID != ""
}

// reply sends the window's one reply, retrying while the worker is down.
func (a *crashAgent) reply(ctx context.Context, windowID int64) {
	id := fmt.Sprintf("reply-%d", windowID)
	outcome := ""
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.inflight--
		if outcome != "" {
			a.done[windowID] = outcome
			delete(a.lastErr, windowID)
		}
	}()
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
		var res wfapi.SendResult
		h, err := a.tc.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
			UpdateID: id, WorkflowID: a.windowWF(windowID), UpdateName: wfapi.UpdateSend,
			Args:         []any{wfapi.SendRequest{Type: "text", Text: fmt.Sprintf("reply to window %d", windowID), RequestID: id}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(cctx, &res)
		}
		cancel()
		if outcome = crashOutcome(res, err); outcome != "" {
			return
		}
		a.mu.Lock()
		a.lastErr[windowID] = err.Error()
		a.mu.Unlock()
		if crashPause(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// crashOutcome names the final outcome of a reply, or "" when the call must be retried
// (the worker is down, the call timed out).
func crashOutcome(res wfapi.SendResult, err error) string {
	var nf *serviceerror.NotFound
	var act *temporal.ActivityError
	switch {
	case err == nil:
		if res.ErrorCode != "" {
			return res.Status + ":" + res.ErrorCode
		}
		return res.Status
	case refusalCode(err) != "":
		return "refused:" + refusalCode(err)
	case errors.As(err, &nf):
		return "window workflow closed"
	case errors.As(err, &act):
		return "activity failed"
	}
	return ""
}

// idle reports whether no reply is in flight and every given window was answered.
func (a *crashAgent) idle(open []int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight > 0 {
		var retrying []string
		for id, e := range a.lastErr {
			retrying = append(retrying, fmt.Sprintf("window %d: %s", id, e))
		}
		sort.Strings(retrying)
		return fmt.Errorf("%d replies in flight (retrying: %v)", a.inflight, retrying)
	}
	for _, id := range open {
		if _, ok := a.done[id]; !ok {
			return fmt.Errorf("open window %d not answered by the agent yet (no agent session seen)", id)
		}
	}
	return nil
}

// describe says what the agent can see of a window's workflow (for a failure message).
func (a *crashAgent) describe(ctx context.Context, windowID int64) string {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	id := a.windowWF(windowID)
	d, err := a.tc.DescribeWorkflow(cctx, id, "")
	if err != nil {
		return fmt.Sprintf("%s: describe: %v", id, err)
	}
	status := d.RawResponse.GetWorkflowExecutionInfo().GetStatus().String()
	v, err := a.tc.QueryWorkflow(cctx, id, "", wfapi.QueryWindowState)
	if err != nil {
		return fmt.Sprintf("%s: %s, query: %v", id, status, err)
	}
	var ws wfapi.WindowState
	if err := v.Get(&ws); err != nil {
		return fmt.Sprintf("%s: %s, query result: %v", id, status, err)
	}
	return fmt.Sprintf("%s: %s, state %s, session %q", id, status, ws.State, ws.SessionID)
}

func (a *crashAgent) outcomes() map[int64]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int64]string, len(a.done))
	for k, v := range a.done {
		out[k] = v
	}
	return out
}

func (a *crashAgent) summary() map[string]int {
	out := map[string]int{}
	for _, v := range a.outcomes() {
		out[v]++
	}
	return out
}

type crashQuiet struct {
	Open, Attempts int
}

// crashCheckQuiet is nil when the system is quiet: the simulator has nothing queued, the
// poller fetched again after the latest non-empty page (so it committed it), no attempt
// is pending or sending, and the agent is idle with every open window answered.
func crashCheckQuiet(ctx context.Context, ctl *ilinksim.Control, pool *pgxpool.Pool, st *store.Store, tap *crashTap,
	agent *crashAgent, botID, account string) (crashQuiet, error) {
	var q crashQuiet
	bs, err := ctl.BotState(ctx, botID)
	if err != nil {
		return q, err
	}
	if bs.Queued > 0 {
		return q, fmt.Errorf("the simulator still holds %d messages not handed out", bs.Queued)
	}
	if !tap.caughtUp() {
		return q, errors.New("no getupdates since the latest non-empty page (its commit is not confirmed)")
	}
	rows, err := pool.Query(ctx, "SELECT attempt_id, status, reply_window_id FROM send_attempts WHERE status IN ('pending', 'sending') ORDER BY attempt_id")
	if err != nil {
		return q, err
	}
	var busy []string
	for rows.Next() {
		var id, status string
		var win int64
		if err := rows.Scan(&id, &status, &win); err != nil {
			rows.Close()
			return q, err
		}
		busy = append(busy, fmt.Sprintf("%s %s (window %d)", id, status, win))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return q, err
	}
	if len(busy) > 0 {
		return q, fmt.Errorf("attempts still in flight: %v", busy)
	}
	open, err := st.ListWindows(ctx, store.WindowFilter{AccountKey: account, State: vocab.WindowOpen})
	if err != nil {
		return q, err
	}
	var ids []int64
	for _, w := range open {
		ids = append(ids, w.ReplyWindowID)
	}
	if err := agent.idle(ids); err != nil {
		var about []string
		for _, id := range ids {
			about = append(about, agent.describe(ctx, id))
		}
		return q, fmt.Errorf("%w; open windows: %v", err, about)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM send_attempts").Scan(&q.Attempts); err != nil {
		return q, err
	}
	q.Open = len(ids)
	return q, nil
}
