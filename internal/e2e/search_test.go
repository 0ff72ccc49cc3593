package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// listIDs lists the workflow ids (every run's) that a visibility query finds.
func (s *system) listIDs(query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := s.tc.ListWorkflow(s.ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.ns, Query: query, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetWorkflowId(); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// TestWorkflowListByAccountSearchAttributeFindsExactlyThatBotsPollerAndWindows is the
// acceptance of `temporal workflow list --query 'IlinkAccount="…"'`: with two bots, the
// query by one account key lists that bot's poller and reply windows (a superseded one
// too) and the enrollment that created it, and nothing of the other bot's; IlinkPeer
// finds the windows of a WeChat user.
func TestWorkflowListByAccountSearchAttributeFindsExactlyThatBotsPollerAndWindows(t *testing.T) {
	t.Parallel()
	s := start(t, store.DefaultLimits())
	owners := []string{"o9cq8e2esearch0000000001@im.wechat", "o9cq8e2esearch0000000002@im.wechat"}
	want := map[string][]string{}
	var keys []string
	for i, owner := range owners {
		offer := fmt.Sprintf("qo_e2e_search_%d", i)
		acct := s.enroll(offer, owner)
		keys = append(keys, acct.AccountKey)
		s.eventually("poller running", 30*time.Second, func() (bool, error) { return s.running(s.pollerWF(acct.AccountKey)), nil })
		bot := s.botOf(owner)
		want[acct.AccountKey] = []string{s.pollerWF(acct.AccountKey), wfapi.EnrollmentID(offer)}
		// The first bot gets two messages: its first window is superseded by the second.
		var last int64
		for m := 0; m <= 1-i; m++ {
			if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", fmt.Sprintf("message %d", m)); err != nil {
				t.Fatal(err)
			}
			w, _ := s.openWindow(acct.AccountKey, last)
			last = w.ReplyWindowID
			want[acct.AccountKey] = append(want[acct.AccountKey], s.windowWF(w.ReplyWindowID))
		}
		slices.Sort(want[acct.AccountKey])
	}
	if len(want[keys[0]]) != 4 || len(want[keys[1]]) != 3 {
		t.Fatalf("workflows expected: %v", want)
	}
	// Visibility is eventually consistent: wait until the lists settle on what is expected
	// (a wrong workflow listed never goes away, so the final comparison catches it).
	for i, key := range keys {
		query := fmt.Sprintf("%s=%q", wfapi.SearchAttributeAccount, key)
		var got []string
		s.eventually("workflows listed by "+query, time.Minute, func() (bool, error) {
			var err error
			got, err = s.listIDs(query)
			return slices.Equal(got, want[key]), err
		})
		windows := want[key][:0:0]
		for _, id := range want[key] {
			if strings.HasPrefix(id, "ilink-window/") {
				windows = append(windows, id)
			}
		}
		peerQuery := fmt.Sprintf("%s=%q", wfapi.SearchAttributePeer, owners[i])
		s.eventually("windows listed by "+peerQuery, time.Minute, func() (bool, error) {
			got, err := s.listIDs(peerQuery)
			return slices.Equal(got, windows), err
		})
	}
}

// TestWorkerRefusesANamespaceWithoutTheSearchAttributesAndNamesTheCommand: a worker on a
// namespace that lacks the search attributes does not start; its error is typed and says
// which attributes are missing and the command that creates them.
func TestWorkerRefusesANamespaceWithoutTheSearchAttributesAndNamesTheCommand(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	ns := "t-nosa-" + hex.EncodeToString(raw[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := dev.Client.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := &system{t: t, ctx: ctx}
	s.eventually("namespace served", 30*time.Second, func() (bool, error) {
		_, err := dev.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		return err == nil, err
	})
	tc, err := dev.Dial(ctx, client.Options{Namespace: ns, DataConverter: codecConverter(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	cfg := gateway.DefaultConfig()
	cfg.Retention = store.RetentionPolicy{} // no retention schedule: its runs would join the namespace's workflows the tests count
	cfg.TaskQueue = devserver.TaskQueue(t)
	cfg.HTTPAddr = ""
	err = gateway.Run(ctx, cfg, gateway.Options{Pool: dbtest.NewPool(t), Keyring: keyring, Temporal: tc})
	var missing *wfapi.SearchAttributesError
	if !errors.As(err, &missing) {
		t.Fatalf("worker on a namespace without search attributes: %v, want a *wfapi.SearchAttributesError", err)
	}
	if missing.Code != wfapi.CodeSearchAttributesMissing || !slices.Equal(missing.Missing, wfapi.SearchAttributeNames()) {
		t.Fatalf("error %+v", missing)
	}
	for _, name := range wfapi.SearchAttributeNames() {
		if cmd := "temporal operator search-attribute create --name " + name + " --type Keyword"; !strings.Contains(err.Error(), cmd) {
			t.Errorf("error does not name the command %q: %v", cmd, err)
		}
	}
	// Once created (as `starter dev` does on its dev server), the check passes.
	if err := wfapi.RegisterSearchAttributes(ctx, dev.Client, ns); err != nil {
		t.Fatal(err)
	}
	s.eventually("search attributes usable", 30*time.Second, func() (bool, error) {
		err := wfapi.CheckSearchAttributes(ctx, tc, ns)
		return err == nil, err
	})
}
