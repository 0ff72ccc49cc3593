package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Two installations (two databases, two workers on their own task queues) share one
// namespace. Each enrolls a bot, and both bots get a message at the same moment; both
// fresh databases give its window serial 1. Each message is delivered, answered and
// finished by its own installation, every workflow in the namespace belongs to one
// installation and runs on its task queue, and neither installation's reconcile
// touches the other's workflows.
func TestTwoInstallationsShareANamespaceWithoutTouchingEachOthersWorkflows(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	dev := devserver.Start(t)
	ns, tc := newNamespace(t, dev)
	queue := devserver.TaskQueue(t)
	sys := map[string]*system{"A": startIn(t, ns, tc, queue+"-a", limits), "B": startIn(t, ns, tc, queue+"-b", limits)}
	instA, instB := sys["A"].installation(), sys["B"].installation()
	if instA.ID == instB.ID {
		t.Fatalf("two databases share installation id %s", instA.ID)
	}

	keys, bots := map[string]string{}, map[string]string{}
	for name, s := range sys {
		owner := "o9cq8e2einstallation00000" + name + "@im.wechat"
		key, bot := s.enrolledBot("qo_e2e_installation_"+name, owner)
		keys[name], bots[name] = key, bot.BotID
	}
	var wg sync.WaitGroup
	for name, s := range sys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.ctl.InjectText(s.ctx, bots[name], "", "hello installation "+name); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	windows := map[string]store.Window{}
	for name, s := range sys {
		w, ws := s.openWindow(keys[name], 0)
		if w.ReplyWindowID != 1 || ws.ReplyWindowID != 1 {
			t.Fatalf("installation %s: window %d (workflow says %d), want serial 1 in both databases", name, w.ReplyWindowID, ws.ReplyWindowID)
		}
		windows[name] = w
	}
	if sys["A"].windowWF(1) == sys["B"].windowWF(1) {
		t.Fatalf("both installations' window 1 have workflow id %s", sys["A"].windowWF(1))
	}

	// Each installation's agent got its own message, with its own window's workflow id,
	// and answers and finishes it through that window.
	for name, s := range sys {
		d := s.onlyDelivery()
		if d.Message.MessageKey != windows[name].SourceMessageKey || d.Message.Payload == nil ||
			d.Message.Payload.Summary != "hello installation "+name || d.WindowWorkflowID != s.windowWF(1) {
			t.Fatalf("installation %s delivered %s %+v to %s", name, d.Message.MessageKey, d.Message.Payload, d.WindowWorkflowID)
		}
		res, err := agent.Reply(s.ctx, s.tc, d.WindowWorkflowID, "answer of installation "+name, "answer-"+name)
		if err != nil || res.Status != vocab.AttemptSent {
			t.Fatalf("installation %s reply: %+v %v", name, res, err)
		}
		if err := agent.Finish(s.ctx, s.tc, d.WindowWorkflowID, true, ""); err != nil {
			t.Fatalf("installation %s finish: %v", name, err)
		}
		s.messageReaches(d.Message.MessageKey, vocab.MessageHandled, 30*time.Second)
	}
	for name, s := range sys {
		sent, err := s.ctl.Sent(s.ctx, bots[name])
		if err != nil || len(sent) != 1 || sent[0].Text != "answer of installation "+name {
			t.Fatalf("installation %s's bot sent %+v (%v), want its own installation's one answer", name, sent, err)
		}
	}

	// Every workflow belongs to one installation and runs on its task queue.
	owner := func(id string) string {
		switch {
		case strings.Contains(id, "/"+instA.ID+"/") || strings.HasSuffix(id, "_A"):
			return "A"
		case strings.Contains(id, "/"+instB.ID+"/") || strings.HasSuffix(id, "_B"):
			return "B"
		}
		return ""
	}
	var before map[string]run
	sys["A"].eventually("the namespace lists the runs", 30*time.Second, func() (bool, error) {
		before = namespaceRuns(t, sys["A"])
		return len(before) >= 6, nil // per installation: enrollment, poller, window
	})
	for key, r := range before {
		name := owner(r.id)
		if name == "" || r.queue != sys[name].tq {
			t.Fatalf("workflow %s on task queue %s belongs to no installation, or runs on another's queue", key, r.queue)
		}
	}

	// Each reconcile (as at a restart) finds its own workflows running, starts nothing and
	// signals none of the other installation's workflows.
	for name, s := range sys {
		rep, err := gateway.Reconcile(s.ctx, s.store, s.tc, s.tq, limits)
		want := gateway.ReconcileReport{Accounts: 1, PollersSignalled: 1, Windows: 1, WindowsRunning: 1}
		if err != nil || rep.Accounts != want.Accounts || rep.PollersSignalled != want.PollersSignalled || rep.PollersStarted != 0 ||
			rep.Windows != want.Windows || rep.WindowsRunning != want.WindowsRunning || rep.WindowsStarted != 0 {
			t.Fatalf("installation %s's reconcile: %+v %v, want %+v", name, rep, err, want)
		}
		after := namespaceRuns(t, s)
		for key, r := range after {
			b, ok := before[key]
			if !ok {
				t.Fatalf("installation %s's reconcile started %s", name, key)
			}
			signalled := r.signals - b.signals
			switch mine := owner(r.id) == name; {
			case !mine && signalled != 0:
				t.Fatalf("installation %s's reconcile signalled %s of the other installation", name, key)
			case mine && strings.HasPrefix(r.id, "ilink-account/") && signalled != 1:
				t.Fatalf("installation %s's reconcile signalled its poller %d times, want once", name, signalled)
			}
		}
		before = after
	}
}

// A window opened before installation ids (simulated: the installation's migration
// marked windows up to 1000 legacy) has its workflow under its legacy id: the agent's
// replies and verdict reach it through the reply API and the agent package, and the
// reconcile finds it running there instead of starting a second workflow.
func TestALegacyWindowIsRepliedToFinishedAndReconciledUnderItsLegacyID(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	s := start(t, limits, func(_ *gateway.Config, o *gateway.Options) {
		// Before the gateway (and the test's store) first read the installation.
		if _, err := o.Pool.Exec(t.Context(), "UPDATE installation SET legacy_windows_through = 1000, legacy_pollers = true"); err != nil {
			t.Fatal(err)
		}
	})
	inst := s.installation()
	if inst.LegacyWindowsThrough != 1000 {
		t.Fatalf("installation %+v", inst)
	}
	const owner = "o9cq8e2elegacywindow00001@im.wechat"
	key, bot := s.enrolledBot("qo_e2e_legacy_window", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", "hello legacy window"); err != nil {
		t.Fatal(err)
	}
	w, _ := s.openWindow(key, 0)
	legacy := wfapi.LegacyReplyWindowID(w.ReplyWindowID)
	if s.windowWF(w.ReplyWindowID) != legacy || !s.running(legacy) {
		t.Fatalf("window %d's workflow: %s (running %v), want %s", w.ReplyWindowID, s.windowWF(w.ReplyWindowID), s.running(legacy), legacy)
	}
	if _, err := s.tc.DescribeWorkflow(s.ctx, wfapi.ReplyWindowID(inst.ID, w.ReplyWindowID), ""); err == nil {
		t.Fatal("the legacy window also has a workflow under the installation's id")
	}
	d := s.onlyDelivery()
	if d.WindowWorkflowID != legacy {
		t.Fatalf("delivery names window workflow %s, want %s", d.WindowWorkflowID, legacy)
	}

	// A reply through the reply API and one through the agent package.
	api := httptest.NewServer(replyapi.New(replyapi.Config{Store: s.store, Temporal: s.tc}))
	t.Cleanup(api.Close)
	post := func(path string, body any) (int, string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, api.URL+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.SessionToken.Reveal())
		resp, err := api.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/v1/reply", replyapi.ReplyRequest{Type: "text", Text: "through the reply API"}); code != http.StatusOK {
		t.Fatalf("reply API: %d %s", code, body)
	}
	if res, err := agent.Reply(s.ctx, s.tc, d.WindowWorkflowID, "through the agent package", "legacy-2"); err != nil || res.Status != vocab.AttemptSent {
		t.Fatalf("agent reply: %+v %v", res, err)
	}
	sent, err := s.ctl.Sent(s.ctx, bot.BotID)
	if err != nil || len(sent) != 2 {
		t.Fatalf("simulator received %d sends (%v), want 2", len(sent), err)
	}

	// The reconcile finds the legacy window's workflow running.
	rep, err := gateway.Reconcile(s.ctx, s.store, s.tc, s.tq, limits)
	if err != nil || rep.Windows != 1 || rep.WindowsRunning != 1 || rep.WindowsStarted != 0 || len(rep.WindowsClosed) != 0 ||
		rep.PollersSignalled != 1 || rep.PollersStarted != 0 {
		t.Fatalf("reconcile: %+v %v, want the legacy window's workflow found running", rep, err)
	}
	if _, err := s.tc.DescribeWorkflow(s.ctx, wfapi.ReplyWindowID(inst.ID, w.ReplyWindowID), ""); err == nil {
		t.Fatal("the reconcile started a second workflow for the legacy window")
	}

	// The verdict through the reply API reaches the legacy window too.
	if code, body := post("/v1/done", replyapi.DoneRequest{Status: vocab.MessageHandled}); code != http.StatusOK {
		t.Fatalf("done: %d %s", code, body)
	}
	s.messageReaches(w.SourceMessageKey, vocab.MessageHandled, 30*time.Second)
	if v := s.windowState(w.ReplyWindowID).Verdict; v != vocab.MessageHandled {
		t.Fatalf("legacy window's verdict %q, want handled", v)
	}
}

// onlyDelivery waits for the system's agent to have been handed one message and returns
// that delivery.
func (s *system) onlyDelivery() handoff.Delivery {
	s.t.Helper()
	var d handoff.Delivery
	s.eventually("one delivery", time.Minute, func() (bool, error) {
		s.handler.mu.Lock()
		defer s.handler.mu.Unlock()
		if len(s.handler.deliveries) == 1 {
			d = s.handler.deliveries[0]
			return true, nil
		}
		return false, nil
	})
	return d
}

// run is one workflow run of a namespace: its id, task queue and how many signals it got.
type run struct {
	id, queue string
	signals   int
}

// namespaceRuns lists every workflow run of the system's namespace by id and run id.
func namespaceRuns(t *testing.T, s *system) map[string]run {
	t.Helper()
	out := map[string]run{}
	var token []byte
	for {
		resp, err := s.tc.ListWorkflow(s.ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.ns, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range resp.Executions {
			id, runID := info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()
			r := run{id: id, queue: info.GetTaskQueue()}
			it := s.tc.GetWorkflowHistory(s.ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
					r.signals++
				}
			}
			out[id+"@"+runID] = r
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out
		}
	}
}
