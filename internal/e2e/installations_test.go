package e2e_test

import (
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
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
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
	// signals none: neither its own running poller nor the other installation's workflows.
	for name, s := range sys {
		rep, err := gateway.Reconcile(s.ctx, s.store, s.tc, s.tq)
		want := gateway.ReconcileReport{Accounts: 1, PollersRunning: 1, Windows: 1, WindowsRunning: 1}
		if err != nil || rep.Accounts != want.Accounts || rep.PollersRunning != want.PollersRunning || rep.PollersStarted != 0 ||
			rep.Windows != want.Windows || rep.WindowsRunning != want.WindowsRunning || rep.WindowsStarted != 0 {
			t.Fatalf("installation %s's reconcile: %+v %v, want %+v", name, rep, err, want)
		}
		after := namespaceRuns(t, s)
		for key, r := range after {
			b, ok := before[key]
			if !ok {
				t.Fatalf("installation %s's reconcile started %s", name, key)
			}
			if signalled := r.signals - b.signals; signalled != 0 {
				t.Fatalf("installation %s's reconcile signalled %s (%d times); want no signal", name, key, signalled)
			}
		}
		before = after
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
