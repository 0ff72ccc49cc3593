package e2e_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Shape of the held-reply crash run. Five bots (five conversations: a bot talks to its
// owner only) each run a conversation whose user writes again once the agent finished
// answering the previous message, 0 to 0.3 s later, for at least heldCrashStreamMin and
// until heldCrashMinKills kills happened (at most heldCrashStreamMax). The agent answers
// each message with one of heldCrashReplies replies, the last marked final; with a quota of
// heldCrashQuota sends and the last one kept for a final reply (FinalSlots 1), a window
// carries at most two replies that are not final, held replies of earlier messages
// included: the rest is held. The reply counts keep the backlog from growing (five, four,
// three, one, one: on average 1.6 replies that are not final beside the final one, less
// than the two a window carries), so that it keeps moving. A held reply older than
// heldCrashMaxAge is dropped when a window comes to it: a kill stalls a conversation for
// up to half a minute (the dead worker's activities time out), so some are.
//
// The kills (heldCrashRun.killLoop) come after at least heldCrashMinUp of uptime, so that the
// conversations move between two kills in spite of those stalls, and mostly after a new
// process replaced the dead one's polls (its lease supervisor does so once their leases
// expire, 6 s): a kill just after a replacement, or just after a poll ended its session,
// before the next poll took its bot's lease, leaves that bot unpolled until that poll
// activity times out (its session plus two minutes, by design: workflows/options.go,
// pollOptionsFor). That still happens at times; the bounds allow for it.
//
// Every wait has a generous bound: one message's answer heldCrashAnswerWithin, the drain
// and the quiet end crashQuietWithin each.
const (
	heldCrashBots         = 5
	heldCrashQuota        = 3
	heldCrashMaxAge       = 30 * time.Second
	heldCrashStreamMin    = time.Minute
	heldCrashStreamMax    = 150 * time.Second
	heldCrashMinKills     = 5
	heldCrashMinUp        = 10 * time.Second
	heldCrashUpRand       = 12 * time.Second
	heldCrashPauseMax     = 300 * time.Millisecond
	heldCrashAnswerWithin = 5 * time.Minute // one message, kills and a loaded machine included
)

// heldCrashOnHeldSend is the kill trigger of a sendmessage that carries a held reply.
const heldCrashOnHeldSend = "held sendmessage"

var heldCrashReplies = []int{5, 4, 3, 1, 1}

// TestCrashKilledWorkerDeliversEveryHeldReplyOnceAndNeverPassesTheQuota: a real worker
// process (no hand-off handler: the test's agent answers every message through send
// Updates) is SIGKILLed at random moments (after a random uptime, or a few milliseconds
// after a page hand-out, a sendmessage, or most often a sendmessage carrying a held reply)
// and restarted, while five conversations run with a reply quota of three per message, in
// the worker and in the simulator alike, and an agent that often replies more than a
// window can carry, so that many replies are held and sent first in the next window.
// After the stream, with the worker left running, the users write until no reply waits.
// Then:
//
//  1. no held reply is left held or sending: each is sent, unknown (a kill cut its
//     transmission: never sent again), failed (the simulator rejected it) or dropped by
//     the age rule;
//  2. no held reply reached the user twice (by client message id and by its unique text),
//     one that is sent reached the user exactly once, a dropped one never;
//  3. no window passed the quota: in the store, at the simulator (accepted sends per
//     context token, i.e. per user message, at most three) and no send was refused by the
//     simulator at all (for its quota or for anything else: the gateway never tried);
//  4. no reply is lost: every reply of the agent was answered sent (the simulator
//     accepted it exactly once), unknown (accepted at most once: a kill between the
//     transmission and the record of its outcome; the gateway never sends it again), or
//     held, and then its held reply is settled as in 1 and 2. Any other answer (a refusal,
//     failed, a window gone) fails the test.
//
// Besides: held replies reach a conversation in the order they were held and before the
// replies of the window that carries them, no message is left held once nothing waits,
// and every message the simulator handed out is in the inbox, except the crash test's one
// allowance (the last getupdates response of a killed process, which iLink never
// replays), judged per bot.
//
// The users write one message at a time: the simulator, like iLink, counts a peer's sends
// since its last inbound message, while the gateway counts per window; a message arriving
// while the previous window still sends would let both count the same sends differently.
// Waiting for the agent to finish keeps each window's sends inside its message's count.
func TestCrashKilledWorkerDeliversEveryHeldReplyOnceAndNeverPassesTheQuota(t *testing.T) {
	t.Parallel()
	began := time.Now()
	streamRand, killRand := crashRands(t)

	limits := store.DefaultLimits()
	limits.WindowLifetime = crashWindowLife
	limits.MaxSends = heldCrashQuota
	limits.FinalSlots = 1
	limits.MaxHeldReplies = 1000
	limits.MaxHeldAge = heldCrashMaxAge

	// The rig's simulator, with iLink's quota set to the worker's: the rig's tap is kept
	// (it knows the running worker process and triggers kills), the simulator behind it
	// replaced before anything is served, and a recorder of each bot's getupdates
	// responses put in front.
	pages := &heldCrashPages{tokens: map[string]string{}, last: map[heldCrashEpoch]crashPage{}, handed: map[uint64][]crashPage{}}
	rig := newProcRigWith(t, 500*time.Millisecond, limits, procRigOptions{Wrap: func(h http.Handler) http.Handler {
		tap := h.(*crashTap)
		cfg := ilinksim.DefaultConfig()
		cfg.ThrottleBurst = 0
		cfg.LongPollHold = 500 * time.Millisecond
		cfg.ReplyQuota = heldCrashQuota
		tap.next = ilinksim.New(cfg).Handler()
		pages.tap = tap
		return pages
	}})
	s, pool, st, ctl := rig.system, rig.pool, rig.store, rig.ctl

	convs := []*heldCrashConv{{index: 1, bot: rig.bot, acct: rig.acct}}
	for i := 2; i <= heldCrashBots; i++ {
		bot, err := ctl.CreateBot(s.ctx, ilinksim.CreateBotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		acct, err := storetest.RegisterAccount(s.ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
			OwnerPeerID: bot.Owner, BaseURL: rig.srv.URL, BotToken: sealing.NewSecret(bot.Token)})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, &heldCrashConv{index: i, bot: bot, acct: acct})
	}
	botOf := map[string]int{}
	for _, c := range convs {
		pages.addBot(c.bot.Token, c.bot.BotID)
		botOf[c.acct.AccountKey] = c.index
		c.r = mrand.New(mrand.NewPCG(streamRand.Uint64(), uint64(c.index)))
	}

	agent := &heldCrashAgent{tc: s.tc, st: st, inst: s.installation(), botOf: botOf, logf: t.Logf,
		r: mrand.New(mrand.NewPCG(streamRand.Uint64(), 3)), seen: map[int64]bool{}, seenAt: map[string]time.Time{},
		answers: map[string]heldCrashAnswer{}, lastErr: map[int64]string{}, heldTexts: map[string]bool{}}
	pages.setHeld(agent.wasHeld)
	agentCtx, stopAgent := context.WithCancel(context.Background())

	w := &crashWorker{t: t, bin: rig.bin, tap: rig.tap, env: rig.baseEnv(map[string]string{
		"ILINKFLOW_SEND_GAP": "5ms",
		// A poll activity hands the bot's lease to the next one at the end of its session;
		// a kill between the two leaves the bot unpolled until the next one times out
		// (session plus two minutes, by design): rarely, with a session of 30 s.
		"ILINKFLOW_POLL_SESSION":     "30s",
		"ILINKFLOW_HEARTBEAT":        "1s",
		"ILINKFLOW_WINDOW_LIFETIME":  crashWindowLife.String(),
		"ILINKFLOW_MAX_SENDS":        strconv.Itoa(heldCrashQuota),
		"ILINKFLOW_FINAL_SLOTS":      "1",
		"ILINKFLOW_MAX_HELD_REPLIES": "1000", // the backlog's limit is not what this test is about
		"ILINKFLOW_MAX_HELD_AGE":     heldCrashMaxAge.String(),
		"ILINKFLOW_SHUTDOWN_GRACE":   "2s",
		"ILINKFLOW_LOG_LEVEL":        "info",
		"ILINKFLOW_THROTTLE_PENALTY": "1m",
		// No hand-off handler: the hand-off opens the agent session and the test's agent
		// gives every reply and the verdict through Updates.
		"ILINKFLOW_HANDLER":        "none",
		"ILINKFLOW_POLL_LEASE_TTL": "6s",
	})}
	w.launch()
	s.eventually("the accounts' pollers running", 30*time.Second, func() (bool, error) {
		for _, c := range convs {
			if !s.running(s.pollerWF(c.acct.AccountKey)) {
				return false, fmt.Errorf("the poller of bot %d is not running", c.index)
			}
		}
		return true, nil
	})
	ready := time.Now()

	agentDone := make(chan struct{})
	go func() { defer close(agentDone); agent.run(agentCtx) }()
	defer func() { stopAgent(); <-agentDone }()

	run := &heldCrashRun{t: t, ctl: ctl, pool: pool, agent: agent, pages: pages, w: w}

	// The conversations and the killer run together.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	var stopMu sync.Mutex
	var stopped time.Time // when the stream stopped taking new messages
	going := func() bool {
		el := time.Since(ready)
		on := el < heldCrashStreamMin || (w.killCount() < heldCrashMinKills && el < heldCrashStreamMax)
		stopMu.Lock()
		defer stopMu.Unlock()
		if !on && stopped.IsZero() {
			stopped = time.Now()
		}
		return on
	}
	streamOver := make(chan struct{})
	convErrs := make(chan error, len(convs))
	var convsDone sync.WaitGroup
	for _, c := range convs {
		convsDone.Add(1)
		go func() {
			defer convsDone.Done()
			if err := run.converse(streamCtx, c, going); err != nil {
				convErrs <- fmt.Errorf("bot %d: %w", c.index, err)
				stopStream()
			}
		}()
	}
	go func() { convsDone.Wait(); close(streamOver) }()
	killErr := make(chan error, 1)
	go func() { killErr <- run.killLoop(streamCtx, killRand, going, streamOver) }()
	<-streamOver
	select {
	case err := <-convErrs:
		stopStream()
		<-killErr
		t.Fatalf("conversation: %v", err)
	default:
	}
	if err := <-killErr; err != nil {
		t.Fatalf("killer: %v", err)
	}
	streamed := time.Now()
	kills := w.killCount()
	stopMu.Lock()
	tail := streamed.Sub(stopped)
	stopMu.Unlock()
	t.Logf("stream over after %v (the last answers %v after it stopped taking messages): %d messages, %d kills, worker process #%d running; "+
		"%d sendmessage calls carried a held reply; %s", streamed.Sub(ready).Round(time.Millisecond), tail.Round(time.Millisecond),
		run.injected(convs), kills, w.current().index, pages.heldSendCount(), heldCrashLatencies(convs))

	// The quiet end, the worker left running: while replies wait, each user whose
	// conversation holds some writes again (the agent answers with a final reply only).
	agent.drain()
	drainRounds := 0
	drainCtx, stopDrain := context.WithTimeout(context.Background(), crashQuietWithin)
	defer stopDrain()
	for {
		waiting := heldCrashWaiting(t, pool)
		if len(waiting) == 0 {
			break
		}
		if drainCtx.Err() != nil {
			t.Fatalf("replies still wait after %d rounds of new messages (%v): %v", drainRounds, crashQuietWithin, waiting)
		}
		drainRounds++
		var wg sync.WaitGroup
		errs := make(chan error, len(convs))
		for _, c := range convs {
			if len(waiting[c.acct.AccountKey]) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := run.say(drainCtx, c, fmt.Sprintf("bot %d: drain message %d", c.index, drainRounds)); err != nil {
					errs <- fmt.Errorf("bot %d, drain round %d: %w", c.index, drainRounds, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	drained := time.Now()

	s.eventually("a quiet system", crashQuietWithin, func() (bool, error) {
		if err := run.workerDied(); err != nil {
			t.Fatal(err)
		}
		err := run.quiet(s.ctx, convs)
		return err == nil, err
	})
	quieted := time.Now()
	stopAgent()
	<-agentDone

	// The final state.
	var sent []ilinksim.SentMessage
	for _, c := range convs {
		got, err := ctl.Sent(s.ctx, c.bot.BotID)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, got...)
	}
	sort.Slice(sent, func(i, j int) bool { return sent[i].Index < sent[j].Index })
	inbox := crashInbox(t, pool)
	windows := crashWindows(t, pool)
	attempts := heldCrashAttempts(t, pool)
	plain := make([]crashAttempt, len(attempts))
	for i, a := range attempts {
		plain[i] = a.crashAttempt
	}
	rows := heldCrashRows(t, pool)
	replies, answers := agent.results()

	excused := heldCrashAssertInbox(t, convs, inbox, pages, w.killedEpochs())
	doubles := crashAssertClientIDs(t, sent, plain)
	crashAssertNothingInFlight(t, plain)
	crashAssertQuota(t, windows, plain, sent, heldCrashQuota)
	counts := heldCrashAssert(t, sent, windows, attempts, rows, replies, answers)
	statuses := heldCrashAssertMessages(t, pool)

	lost := 0
	for _, c := range convs {
		lost += len(c.lost)
	}
	if lost != len(excused) {
		t.Errorf("the conversations took %d messages for lost at a kill, the inbox check excused %d", lost, len(excused))
	}
	t.Logf("messages: %d injected (%d in %d drain rounds), %d in the inbox %v, %d lost in flight at a kill",
		run.injected(convs), run.drains(convs), drainRounds, len(inbox), statuses, len(excused))
	t.Logf("replies: %d by the agent %v; held replies %d %v (dropped: %v); windows %d, accepted sends per window %v",
		len(replies), counts.outcomes, len(rows), counts.held, counts.drops, len(windows), counts.perWindow)
	t.Logf("simulator: %d sendmessage calls, %d accepted; attempts %d %v; unknown outcomes: %d reached the user, %d did not",
		len(sent), counts.accepted, len(attempts), counts.attempts, counts.unknownReached, counts.unknownNot)
	t.Logf("timings: build+setup %v, stream %v, drain %v, quiet after %v, total %v", ready.Sub(began).Round(time.Millisecond),
		streamed.Sub(ready).Round(time.Millisecond), drained.Sub(streamed).Round(time.Millisecond),
		quieted.Sub(drained).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("COUNTS: %d messages, %d kills, %d lost in flight, %d replies (%d held: %d sent, %d unknown, %d failed, %d dropped), "+
		"%d accepted sends, %d client ids twice, %d texts twice, max %d accepted sends in a window; total %v",
		run.injected(convs), kills, len(excused), len(replies), len(rows), counts.held[vocab.HeldSent], counts.held[vocab.HeldUnknown],
		counts.held[vocab.HeldFailed], counts.held[vocab.HeldDropped], counts.accepted, doubles, counts.textDoubles, counts.maxPerWindow,
		time.Since(began).Round(time.Second))
	if len(rows) == 0 || counts.held[vocab.HeldSent] == 0 {
		t.Errorf("the run held %d replies and sent %d of them: it did not test held replies", len(rows), counts.held[vocab.HeldSent])
	}
}

// ---------------------------------------------------------------------------------------
// The conversations.

// heldCrashConv is one bot's conversation: its owner writes, the agent answers.
type heldCrashConv struct {
	index int
	bot   ilinksim.BotInfo
	acct  store.Account
	r     *mrand.Rand

	// Written by the conversation's own goroutine only, read once it is over.
	msgs  []ilinksim.Injected
	drain int             // of msgs, drain messages
	lost  []uint64        // messages lost in flight at a kill (never in the inbox)
	took  []time.Duration // per answered message, from its injection to the agent's verdict
}

// heldCrashLatencies describes how long the agent took to answer the messages, the wait for
// the worker after a kill included.
func heldCrashLatencies(convs []*heldCrashConv) string {
	var all []time.Duration
	for _, c := range convs {
		all = append(all, c.took...)
	}
	if len(all) == 0 {
		return "no message answered"
	}
	slices.Sort(all)
	over := 0
	for _, d := range all {
		if d > 10*time.Second {
			over++
		}
	}
	return fmt.Sprintf("answers took %v (median), %v (90th percentile), %v (longest); %d took over 10s",
		all[len(all)/2].Round(time.Millisecond), all[len(all)*9/10].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond), over)
}

// ---------------------------------------------------------------------------------------
// The getupdates responses of each bot.

// ---------------------------------------------------------------------------------------
// The agent.

// ---------------------------------------------------------------------------------------
// The final state and the assertions.
