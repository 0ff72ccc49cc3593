package operator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

// reportingStore is a store whose erasure reports a fixed report.
type reportingStore struct {
	inst   wfapi.Installation
	report store.ForgetReport
	calls  []store.ForgetInput
}

func (s *reportingStore) ForgetPeer(_ context.Context, _ time.Time, in store.ForgetInput) (store.ForgetReport, error) {
	s.calls = append(s.calls, in)
	return s.report, nil
}

func (s *reportingStore) Installation(context.Context) (wfapi.Installation, error) {
	return s.inst, nil
}

// Forget ends and deletes the peer's workflows of the installation, found by the ids the
// store reported even where the visibility listing does not show them yet, and leaves
// another peer's and another installation's alone; a second run finds them gone and
// deletes nothing.
func TestForgetDeletesThePeersWorkflowsByTheStoresIdsAndTheListing(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	inst := wfapi.Installation{ID: hex.EncodeToString(raw[:])}
	otherInst := wfapi.Installation{ID: "0" + inst.ID[1:]}
	if otherInst.ID == inst.ID {
		otherInst.ID = "1" + inst.ID[1:]
	}
	queue := devserver.TaskQueue(t) // no worker: the workflows stay running until ended
	const peer, otherPeer, account = "o9cq8forget@im.wechat", "o9cq8keep@im.wechat", "ilk_0123456789abcdef0123456789abcdef"
	start := func(id, peerID string) {
		t.Helper()
		opts := wfapi.StartOptions(client.StartWorkflowOptions{ID: id, TaskQueue: queue}, account, peerID)
		if _, err := srv.Client.ExecuteWorkflow(ctx, opts, "ReplyWindow"); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	const messageKey = "im_0123456789abcdef0123456789abcdef"
	closed, open, agent := inst.WindowWorkflowID(6), inst.WindowWorkflowID(7), inst.AgentWorkflowID(messageKey)
	kept, elsewhere := inst.WindowWorkflowID(9), otherInst.WindowWorkflowID(7)
	for _, id := range []string{closed, open, agent, elsewhere} {
		start(id, peer)
	}
	start(kept, otherPeer)
	if err := srv.Client.TerminateWorkflow(ctx, closed, "", "test: a window that ended"); err != nil {
		t.Fatal(err)
	}
	st := &reportingStore{inst: inst, report: store.ForgetReport{Accounts: []string{account}, Messages: 3,
		OpenWindows: []int64{7}, Windows: []int64{6, 7, 8}, MessageKeys: []string{messageKey}}}
	in := store.ForgetInput{PeerID: peer, RequestedBy: "dpo"}

	dry, err := operator.Forget(ctx, st, srv.Client, srv.Namespace, store.ForgetInput{PeerID: peer, RequestedBy: "dpo", DryRun: true})
	if err != nil || dry.WorkflowsDeleted != 0 || dry.WorkflowsTerminated != 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	for _, id := range []string{closed, open, agent} {
		if _, err := srv.Client.DescribeWorkflow(ctx, id, ""); err != nil {
			t.Fatalf("after a dry run %s: %v", id, err)
		}
	}

	res, err := operator.Forget(ctx, st, srv.Client, srv.Namespace, in)
	if err != nil {
		t.Fatal(err)
	}
	// Window 8 never ran: not found, not counted.
	if res.WorkflowsDeleted != 3 || res.WorkflowsTerminated < 1 || res.Messages != 3 {
		t.Fatalf("result %+v, want 3 workflows deleted, the open window's terminated at least", res)
	}
	testkit.Eventually(t, "the peer's workflows deleted", time.Minute, func() (bool, error) {
		for _, id := range []string{closed, open, agent} {
			if _, err := srv.Client.DescribeWorkflow(ctx, id, ""); !wfclient.IsNotFound(err) {
				return false, err
			}
		}
		resp, err := srv.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: operator.PeerWorkflowsQuery(inst, peer, "")})
		return err == nil && len(resp.GetExecutions()) == 0, err
	})
	for _, id := range []string{kept, elsewhere} {
		if d, err := srv.Client.DescribeWorkflow(ctx, id, ""); err != nil || d.Status.String() != "Running" {
			t.Fatalf("%s, not the peer's or not this installation's, was touched: %v %v", id, d, err)
		}
	}
	again, err := operator.Forget(ctx, st, srv.Client, srv.Namespace, in)
	if err != nil || again.WorkflowsDeleted != 0 || again.WorkflowsTerminated != 0 {
		t.Fatalf("a second run: %+v %v", again, err)
	}
}
