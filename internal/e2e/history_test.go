package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// execution is one workflow run with its full history.
type execution struct {
	workflowType, workflowID, runID string
	history                         *historypb.History
}

// executions reads every workflow run of the test's namespace with its history.
func (s *system) executions() []execution {
	s.t.Helper()
	var out []execution
	var token []byte
	for {
		resp, err := s.tc.ListWorkflow(s.ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.ns, NextPageToken: token})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, info := range resp.Executions {
			e := execution{workflowType: info.GetType().GetName(), workflowID: info.GetExecution().GetWorkflowId(),
				runID: info.GetExecution().GetRunId(), history: &historypb.History{}}
			it := s.tc.GetWorkflowHistory(s.ctx, e.workflowID, e.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					s.t.Fatal(err)
				}
				e.history.Events = append(e.history.Events, ev)
			}
			out = append(out, e)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].workflowID+out[i].runID < out[j].workflowID+out[j].runID })
	return out
}

// assertNoSecretInHistory reads every event of every workflow the test ran and fails if
// any secret the simulator issued or the agent received appears in it.
func (s *system) assertNoSecretInHistory(secrets []string) {
	s.t.Helper()
	secrets = nonEmpty(secrets)
	execs := s.executions()
	if len(execs) < 5 {
		s.t.Fatalf("only %d workflow runs found", len(execs))
	}
	events := 0
	for _, e := range execs {
		events += len(e.history.Events)
		// Payloads are bytes (JSON inside protobuf): read every string and bytes field of
		// every event as it is, so nothing hides behind an encoding.
		var b strings.Builder
		collectText(e.history.ProtoReflect(), &b)
		text := b.String()
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				s.t.Errorf("a secret (%d bytes) appears in the history of %s (%s)", len(secret), e.workflowID, e.workflowType)
			}
		}
	}
	s.t.Logf("no secret in history: %d secrets checked against %d events of %d workflow runs", len(secrets), events, len(execs))
}

// recordHistories writes every history as JSON under workflows/testdata/histories when
// ILINKFLOW_RECORD_HISTORIES is set, for the replay tests: as <type>-<n>.json when it is
// 1 (the baseline), else as <value>-<type>-<n>.json. It never overwrites a recorded
// history: every later change of a workflow must replay the ones there (see the replay
// paragraph of docs/architecture.md), so new recordings go beside them under a new name.
func (s *system) recordHistories() {
	s.t.Helper()
	label := os.Getenv("ILINKFLOW_RECORD_HISTORIES")
	if label == "" {
		return
	}
	prefix := ""
	if label != "1" {
		if strings.ContainsAny(label, `/\`) {
			s.t.Fatalf("ILINKFLOW_RECORD_HISTORIES=%q: a name prefix may not hold a path separator", label)
		}
		prefix = label + "-"
	}
	dir := filepath.Join("..", "..", "workflows", "testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	seen := map[string]int{}
	execs := s.executions()
	for _, e := range execs {
		seen[e.workflowType]++
		raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(e.history)
		if err != nil {
			s.t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("%s%s-%d.json", prefix, e.workflowType, seen[e.workflowType]))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			s.t.Fatalf("record %s: %v (recorded histories are never overwritten: set ILINKFLOW_RECORD_HISTORIES to a new name prefix)", name, err)
		}
		_, err = f.Write(raw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			s.t.Fatal(err)
		}
	}
	s.t.Logf("recorded %d histories of %d workflow types in %s", len(execs), len(seen), dir)
}

// actionEvents are the history events that Temporal Cloud bills as one action each
// (docs.temporal.io/cloud/actions). Retries are billed too: an ActivityTaskStarted with
// attempt n adds n-1. Not in history, so not counted here: heartbeats, queries and
// rejected updates (the product's own paths make no queries; the test below makes none).
var actionEvents = map[enumspb.EventType]bool{
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:                   true,
	enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:                      true,
	enumspb.EVENT_TYPE_TIMER_STARTED:                                true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:                  true,
	enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: true,
	enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:     true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:           true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:          true,
	enumspb.EVENT_TYPE_MARKER_RECORDED:                              true, // local activities, side effects
}

// actions counts the billed actions in the histories of every workflow run, by
// "workflow type: event[:activity type]".
func actions(execs []execution) (total int, by map[string]int) {
	by = map[string]int{}
	for _, e := range execs {
		for _, ev := range e.history.Events {
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
				by[e.workflowType+": activity retry"] += int(a.GetAttempt() - 1)
				total += int(a.GetAttempt() - 1)
			}
			if !actionEvents[ev.EventType] {
				continue
			}
			name := e.workflowType + ": " + ev.EventType.String()
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				name += ":" + a.GetActivityType().GetName()
			}
			by[name]++
			total++
		}
	}
	return total, by
}

// reportActions logs the actions in the history of one window's workflow.
func (s *system) reportActions(windowID int64) {
	s.t.Helper()
	var mine []execution
	for _, e := range s.executions() {
		if e.workflowID == s.windowWF(windowID) {
			mine = append(mine, e)
		}
	}
	total, by := actions(mine)
	s.t.Logf("actions of window %d (one inbound message, one reply, expired on its timer): %d %v", windowID, total, by)
}

// collectText appends every string and bytes field of m, recursively, to b.
func collectText(m protoreflect.Message, b *strings.Builder) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				collectValue(fd, l.Get(i), b)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				b.WriteString(k.String())
				b.WriteByte(0)
				collectValue(fd.MapValue(), mv, b)
				return true
			})
		default:
			collectValue(fd, v, b)
		}
		return true
	})
}

func collectValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, b *strings.Builder) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		b.WriteString(v.String())
	case protoreflect.BytesKind:
		b.Write(v.Bytes())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		collectText(v.Message(), b)
		return
	default:
		return
	}
	b.WriteByte(0)
}

// TestSecretScanSeesInsidePayloads proves the history scan reads payload bytes: a
// secret put in a payload is found, though protojson would show it base64-encoded.
func TestSecretScanSeesInsidePayloads(t *testing.T) {
	t.Parallel()
	h := &historypb.History{Events: []*historypb.HistoryEvent{{
		Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
			ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
				Result: &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(`{"token":"CKsecret-context-token"}`)}}},
			},
		},
	}}}
	var b strings.Builder
	collectText(h.ProtoReflect(), &b)
	if !strings.Contains(b.String(), "CKsecret-context-token") {
		t.Fatal("the scan does not see inside payloads")
	}
	raw, _ := protojson.Marshal(h)
	if strings.Contains(string(raw), "CKsecret-context-token") {
		t.Fatal("protojson shows payloads in clear; the test premise changed")
	}
}
