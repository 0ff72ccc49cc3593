package e2e_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// pollWatch records, per bot (its token), the getupdates requests in flight and the
// longest time the bot went without one while watching: a bot whose long poll ended and
// whose next one has not arrived is not being polled.
type pollWatch struct {
	next http.Handler

	mu        sync.Mutex
	watching  bool
	inflight  map[string]int
	idleSince map[string]time.Time // when the bot's last request in flight ended
	worst     map[string]time.Duration
	events    map[string][]string // by bot: "15:04:05.000 start" and "… end" of each getupdates
}

func newPollWatch(next http.Handler) *pollWatch {
	return &pollWatch{next: next, inflight: map[string]int{}, idleSince: map[string]time.Time{}, worst: map[string]time.Duration{}}
}

func (p *pollWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ilink/bot/getupdates" {
		p.next.ServeHTTP(w, r)
		return
	}
	bot := r.Header.Get("Authorization")
	p.mu.Lock()
	if p.events == nil {
		p.events = map[string][]string{}
	}
	p.events[bot] = append(p.events[bot], time.Now().Format("15:04:05.000")+" start")
	if p.inflight[bot] == 0 {
		p.gapEnds(bot, time.Now())
	}
	p.inflight[bot]++
	p.mu.Unlock()
	// A long poll ends when its answer is written or when the worker went away (its
	// connection closed), whichever comes first.
	var once sync.Once
	end := func() {
		once.Do(func() {
			p.mu.Lock()
			p.inflight[bot]--
			p.events[bot] = append(p.events[bot], time.Now().Format("15:04:05.000")+" end")
			if p.inflight[bot] == 0 {
				p.idleSince[bot] = time.Now()
			}
			p.mu.Unlock()
		})
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-r.Context().Done():
			end()
		case <-done:
		}
	}()
	p.next.ServeHTTP(w, r)
	end()
	close(done)
}

// timeline is the bot's getupdates starts and ends, as seen at the simulator.
func (p *pollWatch) timeline(bot string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events[bot])
}

// gapEnds records the gap of a bot whose next request arrives at now (p.mu held).
func (p *pollWatch) gapEnds(bot string, now time.Time) {
	since, ok := p.idleSince[bot]
	if !ok || !p.watching {
		return
	}
	if gap := now.Sub(since); gap > p.worst[bot] {
		p.worst[bot] = gap
	}
}

// watch starts measuring gaps (only those that end from now count, from their start).
func (p *pollWatch) watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watching = true
}

// stop ends the measurement: a bot idle now counts its gap so far. It returns the worst
// gap of each bot that was polled.
func (p *pollWatch) stop() map[string]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for bot, n := range p.inflight {
		if n == 0 {
			p.gapEnds(bot, now)
		}
	}
	p.watching = false
	out := make(map[string]time.Duration, len(p.inflight))
	for bot := range p.inflight {
		out[bot] = p.worst[bot]
	}
	return out
}

// polled reports how many of the bots have a long poll in flight.
func (p *pollWatch) polled(tokens []string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, tok := range tokens {
		if p.inflight["Bearer "+tok] > 0 {
			n++
		}
	}
	return n
}

// rounds sends every bot one message per round and waits until each is answered before
// the next round, until stopped; it records the texts sent.
type rounds struct {
	r    *procRig
	bots []ilinksim.BotInfo
	mu   sync.Mutex
	sent []string
	err  error
	stop chan struct{}
	done chan struct{}
}

func startRounds(r *procRig, bots []ilinksim.BotInfo) *rounds {
	c := &rounds{r: r, bots: bots, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *rounds) run() {
	defer close(c.done)
	for round := 1; ; round++ {
		select {
		case <-c.stop:
			return
		default:
		}
		var texts []string
		for _, b := range c.bots {
			text := fmt.Sprintf("%s round %d", b.BotID[:8], round)
			if _, err := c.r.ctl.InjectText(c.r.ctx, b.BotID, "", text); err != nil {
				c.fail(fmt.Errorf("inject %q: %w", text, err))
				return
			}
			texts = append(texts, text)
			c.mu.Lock()
			c.sent = append(c.sent, text)
			c.mu.Unlock()
		}
		// Every message of the round answered: 2 minutes covers a restart on a busy machine.
		if err := crashAwait(c.r.ctx, 2*time.Minute, func() bool {
			sent, err := c.r.ctl.Sent(c.r.ctx, "")
			if err != nil {
				return false
			}
			echoes := map[string]bool{}
			for _, m := range sent {
				echoes[m.Text] = true
			}
			for _, text := range texts {
				if !echoes["echo: "+text] {
					return false
				}
			}
			return true
		}); err != nil {
			c.fail(fmt.Errorf("round %d not answered within 2 minutes", round))
			return
		}
	}
}

func (c *rounds) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// finish stops after the current round is answered and returns every text sent.
func (c *rounds) finish() ([]string, error) {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent), c.err
}

var adminRE = regexp.MustCompile(`msg="serving admin HTTP" .*\baddr=(\S+)`)

// adminAddr is the address the worker's log says it serves the admin endpoints on.
func (p *proc) adminAddr(tb testing.TB) string {
	tb.Helper()
	m := adminRE.FindStringSubmatch(p.out.String())
	if m == nil {
		tb.Fatalf("the worker logged no admin address:\n%s", crashTail(p.out.String(), 40))
	}
	return m[1]
}

// restartWithin is the bound of a rolling restart on a bot's polling: no bot goes without
// a long poll in flight for longer (docs/poll-leases.md). A draining worker lets each long
// poll it holds end by itself and then returns the poll, whose next one another worker
// takes at once (the chain: the poll's completion, the poller's workflow task, the next
// poll's dispatch, the lease, the getupdates); a lease left behind moves at the draining
// worker's exit, when its liveness session ends.
const restartWithin = 5 * time.Second

// A rolling restart of three worker processes serving 20 bots, as Kubernetes does it (each
// process sent SIGTERM in turn, a new one started and ready before the next goes), leaves
// no bot without a long poll in flight for more than 5 s. Messages sent to every bot all
// along are each answered exactly once.
//
// It runs alone in this binary (not in parallel): its bound is on a chain of Temporal
// round trips that eight other end-to-end tests on the shared dev server would stretch on
// a 2-core machine.
func TestARollingRestartHandsPollLeasesOverAndAnswersEveryMessageOnce(t *testing.T) {
	var watch *pollWatch
	r := newProcRigWith(t, 5*time.Second, store.DefaultLimits(), procRigOptions{Wrap: func(h http.Handler) http.Handler {
		watch = newPollWatch(h)
		return watch
	}})
	ctx := r.ctx
	bots := []ilinksim.BotInfo{r.bot}
	for len(bots) < 20 {
		bot, err := r.ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.RegisterAccount(ctx, r.store, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
			OwnerPeerID: bot.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(bot.Token)}); err != nil {
			t.Fatal(err)
		}
		bots = append(bots, bot)
	}
	tokens := make([]string, len(bots))
	names := map[string]string{}
	for i, b := range bots {
		tokens[i] = b.Token
		names["Bearer "+b.Token] = b.BotID
	}
	env := r.baseEnv(map[string]string{
		"ILINKFLOW_HANDLER":        "echo",
		"ILINKFLOW_SEND_GAP":       "5ms",
		"ILINKFLOW_ADMIN_ADDR":     "127.0.0.1:0",
		"ILINKFLOW_SHUTDOWN_GRACE": "10s",
		"TEMPORAL_CONFIG_FILE":     emptyConfigFile,
	})
	start := func(name string) *proc {
		t.Helper()
		p := startProc(t, name, r.bin, env)
		p.waitLog(t, workerReady, 3*time.Minute)
		admin := "http://" + p.adminAddr(t)
		testkit.Eventually(t, name+" ready", 2*time.Minute, func() (bool, error) {
			resp, err := http.Get(admin + "/readyz")
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Errorf("/readyz %d", resp.StatusCode)
		})
		return p
	}
	allPolled := func(what string) {
		t.Helper()
		testkit.Eventually(t, what, 3*time.Minute, func() (bool, error) {
			n := watch.polled(tokens)
			return n == len(bots), fmt.Errorf("%d of %d bots have a long poll in flight", n, len(bots))
		})
	}
	workers := []*proc{start("worker A"), start("worker B"), start("worker C")}
	allPolled("every bot polled before the restart")
	chat := startRounds(r, bots)
	finished := false
	defer func() {
		if !finished {
			_, _ = chat.finish()
		}
	}()

	watch.watch()
	began := time.Now()
	for i, name := range []string{"worker A", "worker B", "worker C"} {
		old := workers[i]
		stopAt := time.Now()
		old.stop()
		if old.exitErr != nil {
			t.Fatalf("%s exited %v after SIGTERM, want 0:\n%s", name, old.exitErr, crashTail(old.out.String(), 40))
		}
		if !strings.Contains(old.out.String(), "worker draining") {
			t.Fatalf("%s did not drain:\n%s", name, crashTail(old.out.String(), 40))
		}
		t.Logf("%s stopped %v after SIGTERM", name, old.ended.Sub(stopAt).Round(time.Millisecond))
		workers[i] = start(name + " (restarted)")
	}
	allPolled("every bot polled after the restart")
	gaps := watch.stop()
	took := time.Since(began)
	sent, err := chat.finish()
	finished = true
	if err != nil {
		t.Fatal(err)
	}

	var worst time.Duration
	var worstBot string
	all := make([]time.Duration, 0, len(gaps))
	for bot, g := range gaps {
		if _, ours := names[bot]; !ours {
			continue
		}
		all = append(all, g)
		if g > worst {
			worst, worstBot = g, names[bot]
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	t.Logf("rolling restart of 3 workers serving %d bots took %v; worst gap without a long poll in flight: %v (bot %s); median of the bots' worst gaps %v",
		len(bots), took.Round(time.Millisecond), worst.Round(time.Millisecond), worstBot, all[len(all)/2].Round(time.Millisecond))
	if len(all) != len(bots) {
		t.Fatalf("%d bots were polled, want %d", len(all), len(bots))
	}
	if worst > restartWithin {
		for bot, name := range names {
			if name == worstBot {
				t.Logf("bot %s's getupdates (start and end at the simulator): %v", name, watch.timeline(bot))
			}
		}
		t.Fatalf("bot %s went %v without a long poll in flight, want at most %v", worstBot, worst, restartWithin)
	}

	// Every message sent across the restart answered exactly once.
	log, err := r.ctl.Sent(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	echoes := map[string]int{}
	for _, m := range log {
		echoes[m.Text]++
	}
	for _, text := range sent {
		if n := echoes["echo: "+text]; n != 1 {
			t.Fatalf("%q was answered %d times, want once", text, n)
		}
	}
	testkit.Eventually(t, "every message handled", time.Minute, func() (bool, error) {
		var notHandled int
		err := r.pool.QueryRow(ctx, "SELECT count(*) FROM inbound_messages WHERE status NOT IN ('handled', 'absorbed')").Scan(&notHandled)
		if err == nil && notHandled != 0 {
			err = fmt.Errorf("%d messages not handled", notHandled)
		}
		return err == nil, err
	})
	t.Logf("%d messages across the rolling restart: each answered once", len(sent))
}
