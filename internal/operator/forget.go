package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// ForgetStore is what Forget needs of the store (a *store.Store).
type ForgetStore interface {
	ForgetPeer(ctx context.Context, now time.Time, in store.ForgetInput) (store.ForgetReport, error)
	Installation(ctx context.Context) (wfapi.Installation, error)
}

// ForgetResult is what Forget erased: the store's report and the workflows of the peer
// in Temporal.
type ForgetResult struct {
	store.ForgetReport
	// WorkflowsFound counts the peer's workflows the visibility listing shows (a dry run
	// counts only these).
	WorkflowsFound int
	// WorkflowsTerminated counts the running workflows ended; WorkflowsDeleted the
	// workflows whose history was deleted (one that was gone already is not counted).
	WorkflowsTerminated, WorkflowsDeleted int
}

// forgetTerminateReason is the reason recorded on a workflow the erasure terminates:
// nothing about the person.
const forgetTerminateReason = "the user's data was erased on request (starter forget)"

// Forget erases a WeChat user's data: the store first (the source of truth; see
// store.Store.ForgetPeer), then the user's workflows in Temporal (namespace): the reply
// windows' workflows and the agent workflows of their messages. Running ones are
// terminated, then every one is deleted (DeleteWorkflowExecution), its history with it.
// They are found two ways, since Temporal's visibility lags: by the search attribute
// IlinkPeer (with IlinkAccount when the erasure is limited to one account), restricted
// to this installation's workflow ids, and by the ids the store reported (every window
// of the peer and the agent workflow id of every message). A workflow that is gone
// already counts as done, so a second run deletes nothing and succeeds.
//
// Why deletion and not crypto-shredding: every payload ilinkflow puts in Temporal is
// encrypted by the payload codec with keys derived from the installation's sealing key
// ring, which all users share; no key belongs to one user, so no key can be destroyed to
// make one user's payloads unreadable without making everyone's so. Deleting the
// histories is the only erasure per user. (The poller's history holds no message: a page
// is committed inside its activity; the window references it may return name the peer.)
//
// A dry run counts in the store and lists in Temporal; it changes neither.
func Forget(ctx context.Context, st ForgetStore, tc client.Client, namespace string, in store.ForgetInput) (ForgetResult, error) {
	rep, err := st.ForgetPeer(ctx, time.Now(), in)
	if err != nil {
		return ForgetResult{}, err
	}
	out := ForgetResult{ForgetReport: rep}
	if tc == nil {
		return out, wfclient.ErrNoTemporal
	}
	inst, err := st.Installation(ctx)
	if err != nil {
		return out, err
	}
	listed, err := listPeerWorkflows(ctx, tc, namespace, inst, in)
	if err != nil {
		return out, err
	}
	out.WorkflowsFound = len(listed)
	if in.DryRun {
		return out, nil
	}
	// Every workflow id to delete, with the runs the listing showed ("": the latest run).
	runs := map[string][]string{}
	var ids []string
	add := func(id, runID string) {
		if _, ok := runs[id]; !ok {
			ids = append(ids, id)
		}
		if !slices.Contains(runs[id], runID) {
			runs[id] = append(runs[id], runID)
		}
	}
	running := map[string]string{}
	for _, w := range listed {
		add(w.id, w.runID)
		if w.running {
			running[w.id] = w.runID
		}
	}
	for _, id := range rep.Windows {
		add(inst.WindowWorkflowID(id), "")
	}
	for _, key := range rep.MessageKeys {
		add(inst.AgentWorkflowID(key), "")
	}
	// The windows the store just ended may still run, whatever the listing showed.
	for _, id := range rep.OpenWindows {
		if _, ok := running[inst.WindowWorkflowID(id)]; !ok {
			running[inst.WindowWorkflowID(id)] = ""
		}
	}
	for _, id := range slices.Sorted(maps.Keys(running)) {
		err := tc.TerminateWorkflow(ctx, id, running[id], forgetTerminateReason)
		switch {
		case err == nil:
			out.WorkflowsTerminated++
		case !wfclient.IsNotFound(err):
			return out, fmt.Errorf("terminate workflow %s: %w", id, err)
		}
	}
	for _, id := range ids {
		deleted := false
		for _, runID := range runs[id] {
			_, err := tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
				Namespace: namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}})
			switch {
			case err == nil:
				deleted = true
			case !wfclient.IsNotFound(err):
				return out, fmt.Errorf("delete workflow %s: %w", id, err)
			}
		}
		if deleted {
			out.WorkflowsDeleted++
		}
	}
	return out, nil
}

// peerWorkflow is a workflow of the peer as the visibility listing shows it.
type peerWorkflow struct {
	id, runID string
	running   bool
}

// PeerWorkflowsQuery is the visibility query of the peer's workflows of an installation
// (its reply windows and agent workflows), on one account when accountKey is not "".
func PeerWorkflowsQuery(inst wfapi.Installation, peerID, accountKey string) string {
	q := fmt.Sprintf("%s = %q AND (WorkflowId STARTS_WITH %q OR WorkflowId STARTS_WITH %q)", wfapi.SearchAttributePeer, peerID,
		wfapi.ReplyWindowIDPrefix(inst.ID), inst.AgentWorkflowID(""))
	if accountKey != "" {
		q += fmt.Sprintf(" AND %s = %q", wfapi.SearchAttributeAccount, accountKey)
	}
	return q
}

// listPeerWorkflows lists the peer's workflows through Temporal's visibility (every run,
// open or closed).
func listPeerWorkflows(ctx context.Context, tc client.Client, namespace string, inst wfapi.Installation, in store.ForgetInput) ([]peerWorkflow, error) {
	query := PeerWorkflowsQuery(inst, in.PeerID, in.AccountKey)
	var out []peerWorkflow
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query,
			PageSize: 1000, NextPageToken: token})
		if err != nil {
			// The query holds the peer id: the error names the step, not the query.
			return nil, fmt.Errorf("list the user's workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, peerWorkflow{id: e.GetExecution().GetWorkflowId(), runID: e.GetExecution().GetRunId(),
				running: e.GetCloseTime() == nil})
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}
