package loadtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

func TestParseMetricsCountsRecordedHeartbeatsAndQueries(t *testing.T) {
	body := `# HELP temporal_request_total Temporal requests
# TYPE temporal_request_total counter
temporal_request_total{client_name="temporal_go",namespace="ns",operation="RecordActivityTaskHeartbeat",worker_type="ActivityWorker"} 12
temporal_request_total{namespace="ns",operation="RecordActivityTaskHeartbeatById"} 3
temporal_request_total{namespace="n,s",operation="QueryWorkflow"} 2
temporal_request_total{namespace="ns",operation="PollActivityTaskQueue"} 99
temporal_request_failure_total{namespace="ns",operation="RecordActivityTaskHeartbeat",status_code="NOT_FOUND"} 1
temporal_request_latency_seconds_bucket{operation="RecordActivityTaskHeartbeat",le="0.1"} 15
go_goroutines 42
`
	m, ok := parseMetrics([]byte(body))
	if !ok || m.heartbeats != 14 || m.queries != 2 {
		t.Fatalf("parsed %+v %v, want 14 heartbeats (12+3-1 failed) and 2 queries", m, ok)
	}
	if _, ok := parseMetrics([]byte("go_goroutines 1\n")); ok {
		t.Fatal("a scrape without the SDK's request counter counts as read")
	}
}

func TestProcParsers(t *testing.T) {
	stat := "4242 (my (odd) worker) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 200000 3000"
	if s, err := parseStatCPU([]byte(stat)); err != nil || s != 3.25 {
		t.Fatalf("cpu %v %v, want 3.25 s (325 ticks)", s, err)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1")); err == nil {
		t.Fatal("short stat parsed")
	}
	status := "Name:\tworker\nVmPeak:\t  900000 kB\nVmRSS:\t   46336 kB\nThreads:\t12\n"
	if kb, err := parseVmRSS([]byte(status)); err != nil || kb != 46336 {
		t.Fatalf("rss %v %v", kb, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tzombie\n")); err == nil {
		t.Fatal("status without VmRSS parsed")
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	sortDurations(d)
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 1: time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Fatalf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 || percentile(d[:1], 99) != time.Millisecond {
		t.Fatal("empty or single-element percentile")
	}
}

func TestWithParamsSetsSchemaAndApplicationName(t *testing.T) {
	u, err := withParams("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", map[string]string{"search_path": "s1", "application_name": "app"})
	if err != nil || u != "postgres://postgres@127.0.0.1:5432/test?application_name=app&search_path=s1&sslmode=disable" {
		t.Fatalf("url: %q %v", u, err)
	}
	d, err := withParams("host=localhost dbname=test", map[string]string{"search_path": "s1"})
	if err != nil || d != "host=localhost dbname=test search_path=s1" {
		t.Fatalf("dsn: %q %v", d, err)
	}
}

func event(typ enumspb.EventType, at time.Time, attrs func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	ev := &historypb.HistoryEvent{EventType: typ, EventTime: timestamppb.New(at)}
	if attrs != nil {
		attrs(ev)
	}
	return ev
}

func TestCostCountsBilledEventsOfTheWindowOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	in := t0.Add(time.Second)
	h := []*historypb.HistoryEvent{
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, t0.Add(-time.Second), nil), // before the window
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, in, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ContinuedExecutionRunId: "r0"}}
		}),
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, in, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ParentWorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "p"}}}
		}),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, in, nil), // an event, not an action
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, in, nil),
		event(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, in, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 3}}
		}),
		event(enumspb.EVENT_TYPE_TIMER_STARTED, in, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, in, nil),
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, in, nil),
		event(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, in, nil),
		event(enumspb.EVENT_TYPE_MARKER_RECORDED, in, nil),
		event(enumspb.EVENT_TYPE_TIMER_STARTED, t0.Add(time.Minute), nil), // at the window's end: outside
	}
	c := costIn(h, t0, t0.Add(time.Minute))
	want := map[string]int{kindStartedByCAN: 1, kindChildStarted: 1, kindActivity: 1, kindActivityRetry: 2, kindTimer: 1,
		kindSignal: 1, kindUpdate: 1, kindSearchAttribute: 1, kindMarker: 1}
	if c.Events != 11-1 || c.Actions != 10 {
		t.Fatalf("cost %+v, want 10 events and 10 actions", c)
	}
	for k, n := range want {
		if c.ByKind[k] != n {
			t.Fatalf("%s: %d, want %d (all: %v)", k, c.ByKind[k], n, c.ByKind)
		}
	}
}

func TestRepliesAreMatchedByContextToken(t *testing.T) {
	b := &loadBot{}
	m1 := &message{n: 1, bot: b, text: "load test message 1", token: "t1", injected: time.Now()}
	m2 := &message{n: 2, bot: b, text: "load test message 2", token: "t2", injected: time.Now()}
	b.waiting = m2
	st := &loadState{byToken: map[string]*message{"t1": m1, "t2": m2}, msgs: []*message{m1, m2}}
	at := time.Now()
	st.record(ilinksim.SentMessage{ContextToken: "t2", Outcome: ilinksim.OutcomeAccepted, Text: "echo: load test message 2", Received: at})
	st.record(ilinksim.SentMessage{ContextToken: "t2", Outcome: ilinksim.OutcomeAccepted, Text: "echo: load test message 2"})
	st.record(ilinksim.SentMessage{ContextToken: "t1", Outcome: ilinksim.OutcomeRefused, Reason: ilinksim.ReasonQuota})
	st.record(ilinksim.SentMessage{ContextToken: "zz", Outcome: ilinksim.OutcomeAccepted})
	if m2.replies != 2 || !m2.textOK || !m2.firstReply.Equal(at) || b.waiting != nil || !b.lastReply.Equal(at) {
		t.Fatalf("message 2: %+v, bot %+v", m2, b)
	}
	if m1.replies != 0 || st.refused != 1 || st.unmatched != 1 {
		t.Fatalf("message 1 %+v, refused %d, unmatched %d", m1, st.refused, st.unmatched)
	}
	rep := &Report{Messages: 2}
	rep.setLoad(st, window{from: at, to: at.Add(time.Second)}, Config{Messages: 2, AnswerWithin: time.Minute})
	if l := rep.Load; l.Injected != 2 || l.Answered != 1 || l.Lost != 1 || l.Doubled != 1 || l.Unmatched != 1 || l.Refused != 1 {
		t.Fatalf("load result %+v", l)
	}
	err := rep.Verdict()
	if !errors.Is(err, ErrRuleBroken) || !strings.Contains(err.Error(), "1 messages lost") || !strings.Contains(err.Error(), "1 messages answered more than once") {
		t.Fatalf("verdict: %v", err)
	}
	if err := (&Report{PGConnBound: 4, PGConnsMax: 5}).Verdict(); !errors.Is(err, ErrRuleBroken) {
		t.Fatalf("over the connection bound: %v", err)
	}
	if err := (&Report{PGConnBound: 4, PGConnsMax: 4}).Verdict(); err != nil {
		t.Fatalf("a clean run: %v", err)
	}
}

func TestPickWaitsForTheReplyAndTheThinkTime(t *testing.T) {
	r := &run{cfg: Config{Think: time.Hour, AnswerWithin: time.Hour}}
	now := time.Now()
	busy := &loadBot{remaining: 1, waiting: &message{injected: now}}
	thinking := &loadBot{remaining: 1, lastReply: now}
	done := &loadBot{}
	st := &loadState{bots: []*loadBot{busy, thinking, done}}
	if b, _ := r.pick(st); b != nil {
		t.Fatalf("picked %+v while every bot waits", b)
	}
	fresh := &loadBot{remaining: 1}
	st.bots = append(st.bots, fresh)
	if b, _ := r.pick(st); b != fresh {
		t.Fatalf("picked %+v, want the bot that never had a message", b)
	}
	r.cfg.AnswerWithin, r.cfg.Think = time.Nanosecond, 0
	st.bots = []*loadBot{busy}
	unanswered := busy.waiting
	if b, _ := r.pick(st); b != busy || busy.waiting != nil || !unanswered.gaveUp {
		t.Fatalf("a bot whose message went unanswered past the deadline was not freed: %+v", busy)
	}
}

// The saturation of a series is its fastest step within the bound; a lost or doubled
// message anywhere fails the run, and the ratios divide the saturations.
func TestSaturationIsTheFastestStepWithinTheBoundAndALossFailsTheRun(t *testing.T) {
	s := &SatReport{Series: []SatSeries{
		{System: SystemILinkflow, Steps: []SatStep{
			{Bots: 2, PerSecond: 10, WithinBound: true},
			{Bots: 4, PerSecond: 18, WithinBound: true},
			{Bots: 8, PerSecond: 25, WithinBound: false}, // faster, but past the p99 bound
		}},
		{System: SystemEngine, Steps: []SatStep{{Bots: 2, PerSecond: 30, WithinBound: true}, {Bots: 4, PerSecond: 36, WithinBound: true}}},
		{System: SystemStore, Steps: []SatStep{{Bots: 2, PerSecond: 90, WithinBound: true}}},
	}}
	s.finish()
	if got := s.Series[0].Saturation; got == nil || got.Bots != 4 {
		t.Fatalf("ilinkflow saturation %+v, want the 4-bot step", got)
	}
	if s.EngineRatio != 18.0/36 || s.StoreRatio != 18.0/90 {
		t.Fatalf("ratios %v, %v; want %v, %v", s.EngineRatio, s.StoreRatio, 18.0/36, 18.0/90)
	}
	rep := &Report{Saturation: s}
	if err := rep.Verdict(); err != nil {
		t.Fatalf("nothing lost: %v", err)
	}
	s.Series[1].Steps[1].Lost = 1
	if err := rep.Verdict(); !errors.Is(err, ErrRuleBroken) {
		t.Fatalf("a lost engine message: verdict %v, want ErrRuleBroken", err)
	}
	s.Series[1].Steps[1].Lost, s.Series[2].Steps[0].Doubled = 0, 1
	if err := rep.Verdict(); !errors.Is(err, ErrRuleBroken) {
		t.Fatalf("a doubled store message: verdict %v, want ErrRuleBroken", err)
	}
}
