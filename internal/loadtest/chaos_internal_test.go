package loadtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

func TestLongestGapCountsGapsEndingInTheWindowFromTheirStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	span := func(a, b float64) pollSpan {
		s := pollSpan{start: at(a)}
		if b >= 0 {
			s.end = at(b)
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		spans    []pollSpan
		from, to float64
		want     float64
	}{
		{"always in flight", []pollSpan{span(0, 20), span(20, 40)}, 10, 30, 0},
		{"a gap inside", []pollSpan{span(0, 12), span(14.5, 40)}, 10, 30, 2.5},
		{"a gap that began before the window counts whole", []pollSpan{span(0, 8), span(11, 40)}, 10, 30, 3},
		{"a gap that ended before the window does not count", []pollSpan{span(0, 5), span(9, 40)}, 10, 30, 0},
		{"idle at the end counts until to", []pollSpan{span(0, 26)}, 10, 30, 4},
		{"an open span covers until to", []pollSpan{span(0, 12), span(13, -1)}, 10, 30, 1},
		{"overlapping spans merge", []pollSpan{span(0, 15), span(5, 12), span(14, 16), span(18, 40)}, 10, 30, 2},
		{"a span starting after to is ignored", []pollSpan{span(0, 25), span(31, 40)}, 10, 30, 5},
		{"never polled: the whole window", nil, 10, 30, 20},
	} {
		got := longestGap(tc.spans, at(tc.from), at(tc.to))
		if want := time.Duration(tc.want * float64(time.Second)); got != want {
			t.Errorf("%s: %v, want %v", tc.name, got, want)
		}
	}
}

func TestRepolledAfterPutsTheVictimsOwnPollsAsideAndSkipsStrays(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := &simWatch{spans: [][]pollSpan{
		{{start: at(0), end: at(5), pid: 8}, {start: at(6), pid: 8}},                                        // another process polls it (a send-in-flight bot)
		{{start: at(0), pid: 7}, {start: at(13), pid: 8}},                                                   // 7's poll still open at the kill
		{{start: at(0), end: at(5), pid: 7}, {start: at(11), pid: 7, stray: true}, {start: at(16), pid: 9}}, // a stray first
		{{start: at(0), end: at(5), pid: 7}},                                                                // never again
	}}
	for _, tc := range []struct {
		bot  int
		want float64
		ok   bool
	}{{0, 0, true}, {1, 3, true}, {2, 6, true}, {3, 0, false}} {
		d, ok := w.repolledAfter(tc.bot, at(10), 7)
		if ok != tc.ok || d != time.Duration(tc.want*float64(time.Second)) {
			t.Errorf("bot %d: %v %v, want %vs %v", tc.bot, d, ok, tc.want, tc.ok)
		}
	}
}

func TestHolderPIDReadsTheMiddleOfTheHolderName(t *testing.T) {
	for holder, want := range map[string]int{
		"vm/4242/0a1b2c3d4e5f":     4242,
		"a.b.example/17/ffffffff":  17,
		"host-without-pid/x/00":    0,
		"host/0/00":                0,
		"not a holder":             0,
		"":                         0,
		"odd/host/name/31337/beef": 31337,
	} {
		if got := holderPID(holder); got != want {
			t.Errorf("holderPID(%q) = %d, want %d", holder, got, want)
		}
	}
}

func TestParseFaultLineReadsThePointAndTheAccount(t *testing.T) {
	h, ok := parseFaultLine("faultpoint: killing the process at poll-picked-up (account ilk_0123456789abcdef0123456789abcdef)")
	if !ok || h.point != "poll-picked-up" || h.account != "ilk_0123456789abcdef0123456789abcdef" {
		t.Fatalf("%+v %v", h, ok)
	}
	for _, line := range []string{`{"msg":"faultpoint: killing"}`, "faultpoint: killing the process at ", "something else"} {
		if _, ok := parseFaultLine(line); ok {
			t.Errorf("%q parsed as a fault point's line", line)
		}
	}
	l := newChaosLog(io.Discard)
	fmt.Fprint(l, `{"level":"INFO","msg":"serving admin HTTP","addr":"127.0.0.1:4321"}`+"\n"+"faultpoint: killing the process at send-")
	fmt.Fprint(l, "in-flight (account ilk_x)\n")
	select {
	case <-l.faultCh:
	default:
		t.Fatal("the fault point's line split over two writes was not noticed")
	}
	if h := l.hit(); h.point != "send-in-flight" || h.account != "ilk_x" || h.at.IsZero() || l.adminAddr() != "127.0.0.1:4321" {
		t.Fatalf("hit %+v, admin %q", h, l.adminAddr())
	}
}

func TestParseProcNetTCPFindsTheClientSocketsOfAServerPort(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:C351 0100007F:1F91 01 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:C352 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0000000000000000
`
	out := map[int]uint64{}
	parseProcNetTCP(bufio.NewScanner(strings.NewReader(table)), 0x1F90, out)
	if len(out) != 1 || out[0xC350] != 1002 {
		t.Fatalf("%v, want only port %d -> inode 1002 (the server side, another server port and a TIME_WAIT socket left out)", out, 0xC350)
	}
}

func TestPIDResolverFindsTheProcessBehindAConnection(t *testing.T) {
	res := newPIDResolver(func() []int { return []int{os.Getpid()} })
	got := make(chan int, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- res.pidOf(r.RemoteAddr)
	}))
	srv.Config.ConnState = res.connState
	srv.Start()
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	res.simPort = port
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if pid := <-got; pid != os.Getpid() {
		t.Fatalf("pid %d, want this process (%d)", pid, os.Getpid())
	}
	res.mu.Lock()
	cached := len(res.cache)
	res.mu.Unlock()
	if cached != 1 {
		t.Fatalf("%d connections cached, want the one", cached)
	}
}

func TestSimWatchRecordsPollsAndThePagesTheyCarry(t *testing.T) {
	c := &chaosRun{run: &run{bots: []bot{{id: "a@im.bot"}, {id: "b@im.bot"}}}, botByToken: map[string]int{"tok-a": 0, "tok-b": 1}}
	page := `{"ret":0,"msgs":[{"context_token":"CK1"},{"context_token":"CK2"}],"get_updates_buf":"Ck"}`
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer tok-a" {
			_, _ = io.WriteString(w, page)
			return
		}
		_, _ = io.WriteString(w, `{"ret":0,"msgs":[]}`)
	})
	c.watch = newSimWatch(c, next, 2)
	c.watch.pids = newPIDResolver(func() []int { return []int{os.Getpid()} })
	srv := httptest.NewUnstartedServer(c.watch)
	srv.Config.ConnState = c.watch.pids.connState
	srv.Start()
	defer srv.Close()
	c.watch.pids.simPort, _ = strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	before := time.Now()
	for _, tok := range []string{"tok-a", "tok-b", "unknown"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ilink/bot/getupdates", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tok == "tok-a" && string(b) != page {
			t.Fatalf("the page was changed on its way: %s", b)
		}
	}
	if _, err := http.Get(srv.URL + "/_sim/stats"); err != nil {
		t.Fatal(err)
	}
	w := c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for bot, spans := range w.spans {
		if len(spans) != 1 || spans[0].pid != os.Getpid() || spans[0].start.Before(before) || spans[0].end.Before(spans[0].start) || w.inflight[bot] != 0 {
			t.Fatalf("bot %d: spans %+v, in flight %d; want one ended poll of this process", bot, spans, w.inflight[bot])
		}
	}
	if len(w.pages) != 1 || w.pages[0].bot != 0 || w.pages[0].pid != os.Getpid() || !slices.Equal(w.pages[0].tokens, []string{"CK1", "CK2"}) {
		t.Fatalf("pages %+v, want bot a's page with its two tokens", w.pages)
	}
}

func TestPlanChaosIsTheSeedsAndMixesTheKills(t *testing.T) {
	cc := DefaultChaosConfig()
	p1 := planChaos(cc, mrand.New(mrand.NewPCG(42, 1)))
	p2 := planChaos(cc, mrand.New(mrand.NewPCG(42, 1)))
	if !slices.Equal(p1, p2) {
		t.Fatal("the same seed planned two different runs")
	}
	if p3 := planChaos(cc, mrand.New(mrand.NewPCG(43, 1))); slices.Equal(p1, p3) {
		t.Fatal("another seed planned the same run")
	}
	count := map[string]int{}
	for i, e := range p1 {
		count[e.Kind]++
		if e.AtS < 10 || e.AtS >= cc.Duration.Seconds() || (i > 0 && e.AtS < p1[i-1].AtS) {
			t.Fatalf("event %d at %vs: not sorted within [10s, %v)", i, e.AtS, cc.Duration)
		}
	}
	want := map[string]int{KillRandom: 15, KillPollPickedUp: 5, KillPageLeaves: 5, KillSendInFlight: 5, eventFreeze: 1}
	if len(p1) != 31 || !mapsEqual(count, want) {
		t.Fatalf("plan %v: %v, want %v", p1, count, want)
	}
	cc.KillPlan, cc.Freeze = []string{KillPageLeaves, KillRandom}, 0
	p := planChaos(cc, mrand.New(mrand.NewPCG(1, 1)))
	if len(p) != 2 || p[0].Kind != KillPageLeaves || p[1].Kind != KillRandom {
		t.Fatalf("a given kill plan: %v, want it in its order without a freeze", p)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestPageTokensReadsTheMessagesOfAnAnswer(t *testing.T) {
	if got := pageTokens([]byte(`{"ret":0,"msgs":[{"seq":1,"context_token":"CKa"},{"context_token":""}]}`)); !slices.Equal(got, []string{"CKa"}) {
		t.Fatalf("%v", got)
	}
	for _, body := range []string{`{"ret":0,"msgs":[]}`, `{"errcode":-14}`, `{"ret":0,"msgs":[{"context`, ``} {
		if got := pageTokens([]byte(body)); len(got) != 0 {
			t.Fatalf("%q: %v, want none", body, got)
		}
	}
}

func TestChaosVerdictNamesWhatBroke(t *testing.T) {
	ok := ChaosReport{Plan: []PlannedEvent{{Kind: KillRandom}}, EventsDone: 1, Messages: ChaosMessages{Lost: 2, LostInFlight: 2}, Overlaps: OverlapResult{Total: 3, WhileFrozen: 3}}
	if err := ok.Verdict(); err != nil {
		t.Fatalf("in-flight losses and overlaps while frozen only: %v", err)
	}
	for name, tc := range map[string]struct {
		mut  func(*ChaosReport)
		want string
	}{
		"lost":     {func(r *ChaosReport) { r.Messages.LostBeyond = 1 }, "1 messages lost beyond"},
		"doubled":  {func(r *ChaosReport) { r.Messages.Doubled = 2 }, "2 messages answered more than once"},
		"handled":  {func(r *ChaosReport) { r.Messages.FalseHandled = 1 }, "handled without a reply"},
		"bound":    {func(r *ChaosReport) { r.BoundsMissed = []string{"kill #1"} }, "bound missed: kill #1"},
		"overlap":  {func(r *ChaosReport) { r.Overlaps.AfterThaw = 1 }, "1 getupdates overlapped"},
		"stray":    {func(r *ChaosReport) { r.Freeze = &FreezeResult{StrayPolls: 2} }, "no longer held 2 times"},
		"not done": {func(r *ChaosReport) { r.EventsDone = 0 }, "1 of 1 planned events not done"},
	} {
		r := ok
		tc.mut(&r)
		err := r.Verdict()
		if !errors.Is(err, ErrRuleBroken) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrRuleBroken saying %q", name, err, tc.want)
		}
	}
}

// In an open stream a bot's unanswered messages are merged into its next delivery: the
// reply to that one answers them too (once), and a message outside that reply, or of
// another bot, is not answered by it.
func TestAMergedEchoAnswersTheMessagesItAbsorbedOnce(t *testing.T) {
	l := &chaosLoad{byToken: map[string]*chaosMsg{}, byText: map[string]*chaosMsg{}, bots: []*chaosBot{{}, {}}}
	add := func(n, bot int) *chaosMsg {
		m := &chaosMsg{n: n, bot: bot, text: fmt.Sprintf("chaos message %d", n), token: fmt.Sprintf("ct%d", n)}
		l.msgs = append(l.msgs, m)
		l.byToken[m.token], l.byText[m.text] = m, m
		return m
	}
	m1, m2, other, m4, m41 := add(1, 0), add(2, 0), add(3, 1), add(4, 0), add(41, 0)
	l.record(ilinksim.SentMessage{Outcome: ilinksim.OutcomeAccepted, ContextToken: m41.token,
		Text: handoff.EchoPrefix + "chaos message 1\nchaos message 3\nchaos message 41"})
	if !m1.merged || m1.replies != 1 || !m1.textOK {
		t.Fatalf("message 1, absorbed into 41's delivery: %+v", m1)
	}
	if other.replies != 0 || m2.replies != 0 || m4.replies != 0 {
		t.Fatalf("answered by a reply that did not carry them: other bot %d, message 2 %d, message 4 %d",
			other.replies, m2.replies, m4.replies)
	}
	if m41.replies != 1 || !m41.textOK || m41.merged {
		t.Fatalf("message 41: %+v", m41)
	}
	// A second reply to 41 is a double of 41, not of what it absorbed.
	l.record(ilinksim.SentMessage{Outcome: ilinksim.OutcomeAccepted, ContextToken: m41.token,
		Text: handoff.EchoPrefix + "chaos message 1\nchaos message 41"})
	if m41.replies != 2 || m1.replies != 1 {
		t.Fatalf("after a second reply: 41 answered %d times, 1 %d times", m41.replies, m1.replies)
	}
}
