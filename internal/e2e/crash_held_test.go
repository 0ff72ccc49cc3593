package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
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
		acct, err := st.RegisterAccount(s.ctx, time.Now(), store.RegisterInput{ProviderAccountID: bot.BotID,
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

// heldCrashRun is what the conversations share.
type heldCrashRun struct {
	t     *testing.T
	ctl   *ilinksim.Control
	pool  *pgxpool.Pool
	agent *heldCrashAgent
	pages *heldCrashPages
	w     *crashWorker
}

// converse: the user writes, waits until the agent finished answering (or the message
// was lost in flight at a kill), pauses, and writes again, while going holds.
func (h *heldCrashRun) converse(ctx context.Context, c *heldCrashConv, going func() bool) error {
	for k := 1; going(); k++ {
		if err := h.say(ctx, c, fmt.Sprintf("bot %d: message %d", c.index, k)); err != nil {
			return err
		}
		if err := crashPause(ctx, crashRandDur(c.r, heldCrashPauseMax)); err != nil {
			return err
		}
	}
	return nil
}

// say injects one message of the conversation's user and waits for the agent's answer.
func (h *heldCrashRun) say(ctx context.Context, c *heldCrashConv, text string) error {
	in, err := h.ctl.InjectText(ctx, c.bot.BotID, "", text)
	if err != nil {
		return err
	}
	c.msgs = append(c.msgs, in)
	if strings.Contains(text, "drain") {
		c.drain++
	}
	said := time.Now()
	lost, err := h.awaitAnswer(ctx, c, in.MessageID)
	if err == nil && !lost {
		took := time.Since(said)
		c.took = append(c.took, took)
		if took > 40*time.Second {
			h.t.Logf("bot %d: message %d (%q) was answered %v after it was written: %s", c.index, in.MessageID, text,
				took.Round(time.Millisecond), h.timeline(ctx, in.MessageID, said))
		}
	}
	if lost {
		c.lost = append(c.lost, in.MessageID)
		h.t.Logf("bot %d: message %d (%q) was lost in flight at a kill; the user writes again", c.index, in.MessageID, text)
	}
	return err
}

// awaitAnswer waits until the agent finished answering message id (lost false), or the
// message is known lost in flight at a kill (lost true): handed out in the last getupdates
// response of a killed worker process to that bot's poller, not in the inbox, with the
// next process ready (the dead one's commit cannot come any more).
func (h *heldCrashRun) awaitAnswer(ctx context.Context, c *heldCrashConv, id uint64) (lost bool, err error) {
	pid := strconv.FormatUint(id, 10)
	deadline := time.Now().Add(heldCrashAnswerWithin)
	for {
		if h.agent.answered(pid) {
			return false, nil
		}
		if err := h.workerDied(); err != nil {
			return false, err
		}
		if page, ok := h.pages.pageOf(id); ok && h.w.killedEpochs()[page.epoch] {
			last, _ := h.pages.lastOf(c.bot.BotID, page.epoch)
			cur := h.w.current()
			if last.seq == page.seq && cur.index > page.epoch && heldCrashProcReady(cur) {
				var n int
				if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM inbound_messages WHERE provider_message_id = $1", pid).Scan(&n); err != nil {
					return false, err
				}
				if n == 0 {
					return true, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("message %s not answered within %v: %s", pid, heldCrashAnswerWithin, h.describe(ctx, pid))
		}
		if err := crashPause(ctx, 100*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// timeline says when, after since, a message was handed out, stored, and its window taken
// up by the agent (for a slow answer: a bot whose poll was dispatched to a worker killed
// before the poll took the bot's lease is polled again only when that activity times out,
// its poll session plus 2 minutes: workflows/options.go, pollOptionsFor).
func (h *heldCrashRun) timeline(ctx context.Context, id uint64, since time.Time) string {
	pid := strconv.FormatUint(id, 10)
	out := "never handed out"
	if page, ok := h.pages.pageOf(id); ok {
		out = fmt.Sprintf("handed out in getupdates #%d of worker process #%d (a request that arrived %v after the message was written)",
			page.seq, page.epoch, page.at.Sub(since).Round(time.Millisecond))
	}
	var stored time.Time
	if err := h.pool.QueryRow(ctx, "SELECT created_at FROM inbound_messages WHERE provider_message_id = $1", pid).Scan(&stored); err != nil {
		return out + fmt.Sprintf(", not in the inbox (%v)", err)
	}
	return out + fmt.Sprintf(", stored after %v, its window taken up by the agent after %v",
		stored.Sub(since).Round(time.Millisecond), h.agent.seenAfter(pid, since))
}

// describe says where a message stands (for a failure message).
func (h *heldCrashRun) describe(ctx context.Context, pid string) string {
	var key, status string
	err := h.pool.QueryRow(ctx, "SELECT message_key, status FROM inbound_messages WHERE provider_message_id = $1", pid).Scan(&key, &status)
	if err != nil {
		p, ok := h.pages.pageOf(heldCrashUint(pid))
		return fmt.Sprintf("not in the inbox (%v); handed out: %v (getupdates #%d, worker process #%d)", err, ok, p.seq, p.epoch)
	}
	var windows []string
	rows, err := h.pool.Query(ctx, "SELECT reply_window_id, state FROM reply_windows WHERE source_message_key = $1", key)
	if err == nil {
		for rows.Next() {
			var id int64
			var state string
			if rows.Scan(&id, &state) == nil {
				windows = append(windows, fmt.Sprintf("%d %s: %s", id, state, h.agent.describe(ctx, id)))
			}
		}
		rows.Close()
	}
	return fmt.Sprintf("message %s is %s, windows %v; agent: %v", key, status, windows, h.agent.idle(nil))
}

func heldCrashUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// workerDied is an error when the running worker process exited without being killed.
func (h *heldCrashRun) workerDied() error {
	p := h.w.current()
	h.w.mu.Lock()
	killed := p.killed
	h.w.mu.Unlock()
	if p.hasExited() && !killed {
		return fmt.Errorf("worker process #%d (pid %d) exited by itself: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	}
	return nil
}

// heldCrashProcReady reports whether a worker process reached its ready point.
func heldCrashProcReady(p *crashProc) bool {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return p.log.isReady
}

func (h *heldCrashRun) injected(convs []*heldCrashConv) int {
	n := 0
	for _, c := range convs {
		n += len(c.msgs)
	}
	return n
}

func (h *heldCrashRun) drains(convs []*heldCrashConv) int {
	n := 0
	for _, c := range convs {
		n += c.drain
	}
	return n
}

// killLoop kills the worker at random moments and restarts it each time, while the
// stream goes on (going): after heldCrashMinUp of uptime plus a random part, or a few
// milliseconds after the next page hand-out (before, during or just after its commit: a
// page of one message commits within milliseconds), sendmessage, or (two kills in five)
// sendmessage that carries a held reply: just before its outcome is recorded (the attempt
// is found sending by the retry, completed unknown, never sent again) or just after (the
// next held reply of the window is being started). A triggered kill whose moment does not
// come within 10 s more comes anyway. Once the stream stops, the last process stands.
func (h *heldCrashRun) killLoop(ctx context.Context, r *mrand.Rand, going func() bool, streamOver <-chan struct{}) error {
	w := h.w
	for going() {
		up := heldCrashMinUp + crashRandDur(r, heldCrashUpRand)
		kind := []string{crashOnTimer, crashOnPage, crashOnSend, heldCrashOnHeldSend, heldCrashOnHeldSend}[r.IntN(5)]
		var offset time.Duration
		switch kind {
		case crashOnPage:
			offset = crashRandDur(r, 20*time.Millisecond)
		case crashOnSend:
			offset = crashRandDur(r, 3*time.Millisecond)
		case heldCrashOnHeldSend:
			offset = crashRandDur(r, 3*time.Millisecond)
			if r.IntN(2) == 0 {
				offset += crashRandDur(r, 100*time.Millisecond)
			}
		}
		if kind != crashOnTimer {
			up += 10 * time.Second
		}
		started := time.Now()
		select {
		case <-streamOver:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(heldCrashMinUp):
		}
		moment, err := w.awaitKillMoment(ctx, kind, up-heldCrashMinUp, offset, streamOver)
		if err != nil || moment == momentStopped || !going() {
			return err
		}
		how := fmt.Sprintf("after %v up", up.Round(time.Millisecond))
		if moment == momentTriggered {
			how = fmt.Sprintf("%v after a %s, %v up", offset, kind, time.Since(started).Round(time.Millisecond))
		}
		if err := w.killAndRestart(ctx, r, how); err != nil {
			return err
		}
	}
	return nil
}

// quiet is nil when the system is quiet: the simulator holds no message for any bot, no
// attempt is pending or sending, no held reply waits, and the agent is idle with every
// open window answered.
func (h *heldCrashRun) quiet(ctx context.Context, convs []*heldCrashConv) error {
	for _, c := range convs {
		bs, err := h.ctl.BotState(ctx, c.bot.BotID)
		if err != nil {
			return err
		}
		if bs.Queued > 0 {
			return fmt.Errorf("the simulator still holds %d messages of bot %d", bs.Queued, c.index)
		}
	}
	var busy, waiting int
	if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM send_attempts WHERE status IN ('pending', 'sending')").Scan(&busy); err != nil {
		return err
	}
	if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM held_replies WHERE status IN ('held', 'sending')").Scan(&waiting); err != nil {
		return err
	}
	if busy > 0 || waiting > 0 {
		return fmt.Errorf("%d attempts in flight, %d held replies waiting", busy, waiting)
	}
	open, err := h.agent.st.ListWindows(ctx, store.WindowFilter{State: vocab.WindowOpen})
	if err != nil {
		return err
	}
	var ids []int64
	for _, w := range open {
		ids = append(ids, w.ReplyWindowID)
	}
	return h.agent.idle(ids)
}

// heldCrashWaiting lists, per account, the held replies still to send (held or sending).
func heldCrashWaiting(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT account_key, held_id, status FROM held_replies WHERE status IN ('held', 'sending') ORDER BY held_seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var acct, id, status string
		if err := rows.Scan(&acct, &id, &status); err != nil {
			t.Fatal(err)
		}
		out[acct] = append(out[acct], id+" "+status)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ---------------------------------------------------------------------------------------
// The getupdates responses of each bot.

type heldCrashEpoch struct {
	bot   string
	epoch int
}

// heldCrashPages records, in front of the crash tap, which getupdates response of which bot's
// poller went to which worker process: the crash tap's own record does not tell bots
// apart, and the allowance for a message lost in flight is about the last response one
// poller of a killed process received.
type heldCrashPages struct {
	tap *crashTap

	mu        sync.Mutex
	tokens    map[string]string // bot token → bot id
	isHeld    func(text string) bool
	heldSends int // sendmessage calls that carried a held reply
	seq       int
	last      map[heldCrashEpoch]crashPage // per bot and process, the response to its latest request
	handed    map[uint64][]crashPage       // per message id, the responses that carried it
	pages     map[string][]crashPage       // per bot, the non-empty responses
}

func (p *heldCrashPages) addBot(token, botID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens[token] = botID
}

// setHeld tells the recorder which texts are held replies (the agent's answers say so
// before the next window sends them).
func (p *heldCrashPages) setHeld(isHeld func(text string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isHeld = isHeld
}

func (p *heldCrashPages) heldSendCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldSends
}

func (p *heldCrashPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ilink/bot/getupdates":
	case "/ilink/bot/sendmessage":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Msg struct {
				ItemList []struct {
					TextItem *struct {
						Text string `json:"text"`
					} `json:"text_item"`
				} `json:"item_list"`
			} `json:"msg"`
		}
		if json.Unmarshal(body, &req) == nil && len(req.Msg.ItemList) > 0 && req.Msg.ItemList[0].TextItem != nil {
			p.mu.Lock()
			held := p.isHeld != nil && p.isHeld(req.Msg.ItemList[0].TextItem.Text)
			if held {
				p.heldSends++
			}
			p.mu.Unlock()
			if held {
				p.tap.fire(heldCrashOnHeldSend) // the request is in: the simulator handles it whatever happens next
			}
		}
		p.tap.ServeHTTP(w, r)
		return
	default:
		p.tap.ServeHTTP(w, r)
		return
	}
	p.tap.mu.Lock()
	epoch := p.tap.epoch
	p.tap.mu.Unlock()
	p.mu.Lock()
	p.seq++
	page := crashPage{seq: p.seq, epoch: epoch, at: time.Now()}
	bot := p.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	p.mu.Unlock()
	rec := &crashBody{ResponseWriter: w}
	p.tap.ServeHTTP(rec, r)
	page.ids = pageMessageIDs(rec.buf.Bytes())
	p.mu.Lock()
	defer p.mu.Unlock()
	k := heldCrashEpoch{bot, epoch}
	if prev, ok := p.last[k]; !ok || page.seq > prev.seq {
		p.last[k] = page
	}
	if len(page.ids) > 0 {
		if p.pages == nil {
			p.pages = map[string][]crashPage{}
		}
		p.pages[bot] = append(p.pages[bot], page)
		for _, id := range page.ids {
			p.handed[id] = append(p.handed[id], page)
		}
	}
}

// pageOf is the latest response that carried message id.
func (p *heldCrashPages) pageOf(id uint64) (crashPage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.handed[id]
	if len(ps) == 0 {
		return crashPage{}, false
	}
	return ps[len(ps)-1], true
}

// lastOf is the response to the latest getupdates request of a bot's poller in a worker
// process.
func (p *heldCrashPages) lastOf(bot string, epoch int) (crashPage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pg, ok := p.last[heldCrashEpoch{bot, epoch}]
	return pg, ok
}

// heldCrashAssertInbox is crashAssertInbox per bot: every message the simulator handed out is
// in the inbox exactly once, except the messages of the last getupdates response a killed
// process's poller of that bot received (iLink never replays them); each response is
// committed whole or not at all. It returns the excused messages.
func heldCrashAssertInbox(t *testing.T, convs []*heldCrashConv, inbox map[string]string, p *heldCrashPages, killed map[int]bool) (excused []uint64) {
	t.Helper()
	injected := map[string]bool{}
	var missing []string
	for _, c := range convs {
		for _, m := range c.msgs {
			id := strconv.FormatUint(m.MessageID, 10)
			injected[id] = true
			if _, ok := inbox[id]; ok {
				continue
			}
			page, ok := p.pageOf(m.MessageID)
			if !ok {
				missing = append(missing, fmt.Sprintf("%s of bot %d (never in a getupdates response)", id, c.index))
				continue
			}
			last, _ := p.lastOf(c.bot.BotID, page.epoch)
			switch {
			case killed[page.epoch] && last.seq == page.seq:
				excused = append(excused, m.MessageID)
			case !killed[page.epoch]:
				missing = append(missing, fmt.Sprintf("%s of bot %d (handed out in getupdates #%d to worker process #%d, which was not killed)",
					id, c.index, page.seq, page.epoch))
			default:
				missing = append(missing, fmt.Sprintf("%s of bot %d (handed out in getupdates #%d to worker process #%d, whose poller fetched again in #%d before the kill)",
					id, c.index, page.seq, page.epoch, last.seq))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("inbox: %d messages the simulator handed out are not in the inbox: %v", len(missing), missing)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ps := range p.handed {
		if len(ps) > 1 {
			t.Errorf("simulator: message %d was handed out %d times (the simulator never replays)", id, len(ps))
		}
	}
	for id, status := range inbox {
		if !injected[id] {
			t.Errorf("inbox: message %s (%s) was never injected", id, status)
		}
	}
	for bot, ps := range p.pages {
		for _, pg := range ps {
			in := 0
			for _, id := range pg.ids {
				if _, ok := inbox[strconv.FormatUint(id, 10)]; ok {
					in++
				}
			}
			if in != 0 && in != len(pg.ids) {
				t.Errorf("inbox: getupdates #%d of bot %s handed out %d messages, %d are in the inbox: a page was half committed", pg.seq, bot, len(pg.ids), in)
			}
		}
	}
	return excused
}

// ---------------------------------------------------------------------------------------
// The agent.

// heldCrashAgent answers every window that gets an agent session: a number of text replies
// (heldCrashReplies; one while draining), one at a time through send Updates, the last
// marked final, then its verdict handled through the finish Update. Update ids and
// request ids are derived from the window and the reply's number, so a call repeated
// after a kill is the same reply.
type heldCrashAgent struct {
	tc    client.Client
	st    *store.Store
	inst  wfapi.Installation
	botOf map[string]int // account key → bot number
	logf  func(format string, args ...any)

	mu        sync.Mutex
	r         *mrand.Rand
	draining  bool
	seen      map[int64]bool
	seenAt    map[string]time.Time       // by provider message id: when the agent took up its window
	answers   map[string]heldCrashAnswer // by provider message id, once finished
	replies   []heldCrashReply
	heldTexts map[string]bool // texts of the replies answered held
	lastErr   map[int64]string
	inflight  int
	wg        sync.WaitGroup
}

// heldCrashReply is one reply of the agent and the answer its send Update got.
type heldCrashReply struct {
	bot                  int
	window               int64
	messageKey, provider string
	index, of            int
	final                bool
	requestID, text      string
	outcome              string // "ok" or why not (see update)
	result               wfapi.SendResult
}

// heldCrashAnswer is the agent's whole answer to one window.
type heldCrashAnswer struct {
	window  int64
	replies int
	finish  string // "ok: <status>" or why not
}

func (a *heldCrashAgent) drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
}

func (a *heldCrashAgent) run(ctx context.Context) {
	defer a.wg.Wait()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		open, err := a.st.ListWindows(ctx, store.WindowFilter{State: vocab.WindowOpen})
		if err != nil {
			continue
		}
		for _, w := range open {
			a.mu.Lock()
			seen := a.seen[w.ReplyWindowID]
			a.mu.Unlock()
			if seen || !a.hasSession(ctx, w.ReplyWindowID) {
				continue
			}
			a.mu.Lock()
			a.seen[w.ReplyWindowID] = true
			a.seenAt[w.ProviderMessageID] = time.Now()
			a.inflight++
			a.mu.Unlock()
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.answer(ctx, w)
			}()
		}
	}
}

func (a *heldCrashAgent) hasSession(ctx context.Context, windowID int64) bool {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := a.tc.QueryWorkflow(cctx, a.inst.WindowWorkflowID(windowID), "", wfapi.QueryWindowState)
	if err != nil {
		return false
	}
	var ws wfapi.WindowState
	return v.Get(&ws) == nil && ws.SessionID != ""
}

// answer sends the window's replies one after the other, then the verdict.
func (a *heldCrashAgent) answer(ctx context.Context, w store.Window) {
	a.mu.Lock()
	n := 1
	if !a.draining {
		n = heldCrashReplies[a.r.IntN(len(heldCrashReplies))]
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.inflight--
		delete(a.lastErr, w.ReplyWindowID)
	}()
	bot := a.botOf[w.AccountKey]
	for i := 1; i <= n; i++ {
		r := heldCrashReply{bot: bot, window: w.ReplyWindowID, messageKey: w.SourceMessageKey, provider: w.ProviderMessageID,
			index: i, of: n, final: i == n, requestID: fmt.Sprintf("reply-%d-%d", w.ReplyWindowID, i),
			text: fmt.Sprintf("bot %d, message %s: reply %d of %d", bot, w.ProviderMessageID, i, n)}
		if r.final {
			r.text += " (final)"
		}
		req := wfapi.SendRequest{Type: "text", Text: r.text, RequestID: r.requestID, Final: r.final}
		r.outcome = a.update(ctx, w.ReplyWindowID, r.requestID, wfapi.UpdateSend, req, &r.result)
		if r.outcome == "" {
			return // stopped
		}
		a.mu.Lock()
		a.replies = append(a.replies, r)
		if r.outcome == "ok" && r.result.Status == wfapi.SendHeld {
			a.heldTexts[r.text] = true
		}
		a.mu.Unlock()
	}
	var fin wfapi.FinishResult
	finish := a.update(ctx, w.ReplyWindowID, fmt.Sprintf("finish-%d", w.ReplyWindowID), wfapi.UpdateFinish, wfapi.FinishRequest{Handled: true}, &fin)
	if finish == "" {
		return
	}
	if finish == "ok" {
		finish += ": " + fin.Status
	}
	a.mu.Lock()
	a.answers[w.ProviderMessageID] = heldCrashAnswer{window: w.ReplyWindowID, replies: n, finish: finish}
	a.mu.Unlock()
}

// update runs one Update of a window until it has an answer, retrying while the worker is
// down or the call times out; it returns "ok", why the answer is not one ("refused:<code>",
// "window workflow closed", "activity failed: ..."), or "" when ctx ended.
func (a *heldCrashAgent) update(ctx context.Context, windowID int64, updateID, name string, arg, res any) string {
	began, tries, lastErr := time.Now(), 0, ""
	defer func() {
		if d := time.Since(began); d > 20*time.Second && a.logf != nil {
			a.logf("agent: window %d, update %s took %v (%d tries; last error: %s)", windowID, updateID, d.Round(time.Millisecond), tries, lastErr)
		}
	}()
	for ctx.Err() == nil {
		tries++
		cctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
		h, err := a.tc.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
			UpdateID: updateID, WorkflowID: a.inst.WindowWorkflowID(windowID), UpdateName: name,
			Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(cctx, res)
		}
		cancel()
		var nf *serviceerror.NotFound
		var act *temporal.ActivityError
		switch {
		case err == nil:
			return "ok"
		case refusalCode(err) != "":
			return "refused:" + refusalCode(err)
		case errors.As(err, &nf):
			return "window workflow closed"
		case errors.As(err, &act):
			return "activity failed: " + err.Error()
		}
		lastErr = err.Error()
		a.mu.Lock()
		a.lastErr[windowID] = updateID + ": " + err.Error()
		a.mu.Unlock()
		if crashPause(ctx, 200*time.Millisecond) != nil {
			break
		}
	}
	return ""
}

// seenAfter is how long after since the agent took up the message's window.
func (a *heldCrashAgent) seenAfter(provider string, since time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seenAt[provider].Sub(since).Round(time.Millisecond)
}

// wasHeld reports whether a reply with this text was answered held.
func (a *heldCrashAgent) wasHeld(text string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heldTexts[text]
}

// answered reports whether the agent finished answering the message.
func (a *heldCrashAgent) answered(provider string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.answers[provider]
	return ok
}

// idle reports whether no answer is in flight and every given window was answered.
func (a *heldCrashAgent) idle(open []int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight > 0 {
		var retrying []string
		for id, e := range a.lastErr {
			retrying = append(retrying, fmt.Sprintf("window %d: %s", id, e))
		}
		sort.Strings(retrying)
		return fmt.Errorf("%d answers in flight (retrying: %v)", a.inflight, retrying)
	}
	answered := map[int64]bool{}
	for _, an := range a.answers {
		answered[an.window] = true
	}
	for _, id := range open {
		if !answered[id] {
			return fmt.Errorf("open window %d not answered by the agent yet", id)
		}
	}
	return nil
}

// describe says what the agent can see of a window's workflow (for a failure message).
func (a *heldCrashAgent) describe(ctx context.Context, windowID int64) string {
	ca := &crashAgent{tc: a.tc, inst: a.inst}
	return ca.describe(ctx, windowID)
}

func (a *heldCrashAgent) results() ([]heldCrashReply, map[string]heldCrashAnswer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	answers := make(map[string]heldCrashAnswer, len(a.answers))
	for k, v := range a.answers {
		answers[k] = v
	}
	return slices.Clone(a.replies), answers
}

// ---------------------------------------------------------------------------------------
// The final state and the assertions.

// heldCrashAttempt is a send attempt with what tells a held reply's attempts apart.
type heldCrashAttempt struct {
	crashAttempt
	source, requestID, heldID, heldFor, messageKey string
}

func heldCrashAttempts(t *testing.T, pool *pgxpool.Pool) []heldCrashAttempt {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT attempt_id, client_message_id, status, fail_type, error_code, reply_window_id, source,
       coalesce(request_id, ''), coalesce(metadata->>'held_id', ''), coalesce(metadata->>'held_for', ''), source_message_key
FROM send_attempts ORDER BY attempt_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []heldCrashAttempt
	for rows.Next() {
		var a heldCrashAttempt
		if err := rows.Scan(&a.id, &a.clientID, &a.status, &a.failType, &a.errorCode, &a.window, &a.source,
			&a.requestID, &a.heldID, &a.heldFor, &a.messageKey); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldCrashRow is a held reply as the store has it at the end.
type heldCrashRow struct {
	id, account, messageKey, requestID, reason, status, attemptID, dropReason string
	seq, window                                                               int64
	final                                                                     bool
}

func heldCrashRows(t *testing.T, pool *pgxpool.Pool) []heldCrashRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT held_id, held_seq, account_key, source_message_key, reply_window_id, request_id, final, reason, status,
       coalesce(attempt_id, ''), drop_reason
FROM held_replies ORDER BY held_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []heldCrashRow
	for rows.Next() {
		var h heldCrashRow
		if err := rows.Scan(&h.id, &h.seq, &h.account, &h.messageKey, &h.window, &h.requestID, &h.final, &h.reason,
			&h.status, &h.attemptID, &h.dropReason); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldCrashCounts are the numbers of the final state.
type heldCrashCounts struct {
	outcomes, held, drops, attempts map[string]int
	perWindow                       map[int]int // accepted sends per context token → tokens
	accepted, textDoubles           int
	maxPerWindow                    int
	// unknown outcomes (direct replies and held replies) that did and did not reach the
	// user: a kill between the transmission and the record of its outcome, or before
	// the transmission.
	unknownReached, unknownNot int
}

// heldCrashAssert checks the held replies and the agent's replies against what the simulator
// accepted (the numbered rules of the test's comment).
func heldCrashAssert(t *testing.T, sent []ilinksim.SentMessage, windows []crashWindow, attempts []heldCrashAttempt, rows []heldCrashRow,
	replies []heldCrashReply, answers map[string]heldCrashAnswer) heldCrashCounts {
	t.Helper()
	c := heldCrashCounts{outcomes: map[string]int{}, held: map[string]int{}, drops: map[string]int{}, attempts: map[string]int{}, perWindow: map[int]int{}}

	// What the simulator did, by text and by context token.
	accepted := map[string][]ilinksim.SentMessage{} // by text
	refusedClient := map[string]bool{}
	perToken := map[string]int{}
	for _, m := range sent {
		switch m.Outcome {
		case ilinksim.OutcomeAccepted:
			c.accepted++
			accepted[m.Text] = append(accepted[m.Text], m)
			perToken[m.ContextToken]++
		default:
			refusedClient[m.ClientID] = true
			// 3: nothing here may refuse a send (no throttle, tokens valid, the sim clock
			// still): a refusal is the gateway trying what it must not.
			t.Errorf("simulator: send #%d (client id %q, %q) refused: %s", m.Index, m.ClientID, m.Text, m.Reason)
		}
	}
	for _, n := range perToken {
		c.perWindow[n]++
		c.maxPerWindow = max(c.maxPerWindow, n)
		if n > heldCrashQuota {
			t.Errorf("simulator: %d accepted sends under one context token, over the quota of %d", n, heldCrashQuota)
		}
	}
	for _, w := range windows {
		if w.maxSends != heldCrashQuota {
			t.Errorf("window %d has max_sends %d, want the worker's %d", w.id, w.maxSends, heldCrashQuota)
		}
	}
	for text, ms := range accepted {
		if len(ms) > 1 {
			c.textDoubles++
			var how []string
			for _, m := range ms {
				how = append(how, fmt.Sprintf("#%d client id %q", m.Index, m.ClientID))
			}
			t.Errorf("the user got %q %d times: %v", text, len(ms), how)
		}
	}
	for _, a := range attempts {
		c.attempts[a.source+"/"+a.status]++
	}

	byRequest := map[string]heldCrashReply{}
	for _, r := range replies {
		byRequest[r.requestID] = r
	}
	known := map[string]bool{}
	for _, r := range replies {
		known[r.text] = true
	}
	for text, ms := range accepted {
		if !known[text] {
			t.Errorf("the simulator accepted %q (client id %q), which no reply of the agent has", text, ms[0].ClientID)
		}
	}

	// 1 and 2: each held reply is settled, reached the user at most once, exactly once
	// when it is sent, never when it was dropped; its attempts agree.
	carriers := map[string][]heldCrashAttempt{}
	for _, a := range attempts {
		if a.source == "held" {
			carriers[a.heldID] = append(carriers[a.heldID], a)
		} else if a.heldID != "" {
			t.Errorf("attempt %s (source %s) names held reply %s", a.id, a.source, a.heldID)
		}
	}
	heldByID := map[string]heldCrashRow{}
	for _, h := range rows {
		heldByID[h.id] = h
		c.held[h.status]++
		r, ok := byRequest[h.requestID]
		if !ok {
			t.Errorf("held reply %s (request %s) is no reply of the agent", h.id, h.requestID)
			continue
		}
		if r.messageKey != h.messageKey || r.window != h.window || r.final != h.final {
			t.Errorf("held reply %s is of message %s window %d (final %v), the agent's reply %s of message %s window %d (final %v)",
				h.id, h.messageKey, h.window, h.final, r.requestID, r.messageKey, r.window, r.final)
		}
		n := len(accepted[r.text])
		var live []string
		for _, a := range carriers[h.id] {
			if !strings.HasPrefix(a.requestID, "held/"+h.id+"/") || a.heldFor != h.messageKey {
				t.Errorf("attempt %s carries held reply %s with request id %q, held for %q; want held/%s/<index>, held for %s",
					a.id, h.id, a.requestID, a.heldFor, h.id, h.messageKey)
			}
			if a.status == vocab.AttemptSent || a.status == vocab.AttemptUnknown {
				live = append(live, a.id+" "+a.status)
			}
		}
		if len(live) > 1 {
			t.Errorf("held reply %s was carried by %d attempts that were sent or may have been: %v", h.id, len(live), live)
		}
		carrier := func() (heldCrashAttempt, bool) {
			for _, a := range carriers[h.id] {
				if a.id == h.attemptID {
					return a, true
				}
			}
			return heldCrashAttempt{}, false
		}
		switch h.status {
		case vocab.HeldWaiting, vocab.HeldSending:
			t.Errorf("held reply %s (%q) is left %s once nothing waits", h.id, r.text, h.status)
		case vocab.HeldSent:
			a, ok := carrier()
			if !ok || a.status != vocab.AttemptSent {
				t.Errorf("held reply %s is sent, its attempt %q is %+v", h.id, h.attemptID, a)
			}
			if n != 1 {
				t.Errorf("held reply %s (%q) is sent; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldUnknown:
			if n == 1 {
				c.unknownReached++
			} else {
				c.unknownNot++
			}
			if a, ok := carrier(); !ok || a.status != vocab.AttemptUnknown {
				t.Errorf("held reply %s is unknown, its attempt %q is %+v", h.id, h.attemptID, a)
			}
			if n > 1 {
				t.Errorf("held reply %s (%q) is unknown; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldFailed:
			// Only a rejection (or a dead token) fails a held reply; the simulator refusing
			// it is reported above.
			a, ok := carrier()
			if !ok || a.status != vocab.AttemptFailed || (a.failType != vocab.FailRejected && a.failType != vocab.FailStaleToken) || !refusedClient[a.clientID] {
				t.Errorf("held reply %s is failed, its attempt %q is %+v (refused by the simulator: %v)", h.id, h.attemptID, a, refusedClient[a.clientID])
			}
			if n != 0 {
				t.Errorf("held reply %s (%q) is failed; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldDropped:
			c.drops[h.dropReason]++
			if h.dropReason != store.HeldDropExpired {
				t.Errorf("held reply %s was dropped for %q; only the age rule drops here", h.id, h.dropReason)
			}
			if n != 0 || len(live) > 0 {
				t.Errorf("held reply %s (%q) was dropped; the user got it %d times, attempts sent or unknown: %v", h.id, r.text, n, live)
			}
		default:
			t.Errorf("held reply %s has status %q", h.id, h.status)
		}
	}

	// 4: every reply of the agent is sent, unknown or held (and its held reply settled
	// as above).
	for _, r := range replies {
		n := len(accepted[r.text])
		key := r.outcome
		if r.outcome == "ok" {
			key = r.result.Status
		}
		c.outcomes[key]++
		switch {
		case r.outcome != "ok":
			t.Errorf("reply %s (%q) was answered %s: neither sent, unknown nor held", r.requestID, r.text, r.outcome)
		case r.result.Status == vocab.AttemptSent:
			if n != 1 {
				t.Errorf("reply %s (%q) was answered sent; the user got it %d times", r.requestID, r.text, n)
			}
		case r.result.Status == vocab.AttemptUnknown:
			if n == 1 {
				c.unknownReached++
			} else {
				c.unknownNot++
			}
			if n > 1 {
				t.Errorf("reply %s (%q) was answered unknown; the user got it %d times", r.requestID, r.text, n)
			}
		case r.result.Status == wfapi.SendHeld:
			h, ok := heldByID[r.result.HeldID]
			switch {
			case !ok:
				t.Errorf("reply %s (%q) was answered held as %q, which the store does not have: lost", r.requestID, r.text, r.result.HeldID)
			case h.requestID != r.requestID:
				t.Errorf("reply %s was answered held as %s, which holds request %s", r.requestID, h.id, h.requestID)
			}
			if !heldCrashHoldReason(r.result.ErrorCode) {
				t.Errorf("reply %s was held for %q", r.requestID, r.result.ErrorCode)
			}
		default:
			t.Errorf("reply %s (%q) was answered %+v: neither sent, unknown nor held", r.requestID, r.text, r.result)
		}
	}
	for provider, an := range answers {
		if !strings.HasPrefix(an.finish, "ok") {
			t.Errorf("the agent's verdict on message %s (window %d) was answered %s", provider, an.window, an.finish)
		}
	}

	// In order: a conversation's held replies reach the user in the order they were
	// held, and before the replies of the window that carries them.
	heldSeqOf := map[string]int64{} // by text
	for _, h := range rows {
		if r, ok := byRequest[h.requestID]; ok {
			heldSeqOf[r.text] = h.seq
		}
	}
	lastSeq := map[string]int64{}  // by bot
	ownSeen := map[string]string{} // by context token: the first own reply
	for _, m := range sent {
		if m.Outcome != ilinksim.OutcomeAccepted {
			continue
		}
		seq, isHeld := heldSeqOf[m.Text]
		if !isHeld {
			if _, ok := ownSeen[m.ContextToken]; !ok {
				ownSeen[m.ContextToken] = m.Text
			}
			continue
		}
		if own, ok := ownSeen[m.ContextToken]; ok {
			t.Errorf("held reply %q reached the user (#%d) after %q, a reply of the window that carried it", m.Text, m.Index, own)
		}
		if seq < lastSeq[m.BotID] {
			t.Errorf("held reply %q (held #%d) reached the user (#%d) after a reply held later (held #%d)", m.Text, seq, m.Index, lastSeq[m.BotID])
		}
		lastSeq[m.BotID] = max(lastSeq[m.BotID], seq)
	}
	return c
}

// heldCrashHoldReason reports whether a held reply's reason is one a window gives.
func heldCrashHoldReason(code string) bool {
	switch vocab.Code(code) {
	case vocab.CodeReplyQuotaExhausted, vocab.CodeReplySlotsReserved, vocab.CodeReplyWindowExpired:
		return true
	}
	return false
}

// heldCrashAssertMessages: once no reply waits, no message is left held (its held replies all
// settled), received or processing (the agent finished every message). It returns the
// messages by status.
func heldCrashAssertMessages(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT provider_message_id, status FROM inbound_messages ORDER BY inbox_seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	var bad []string
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		out[status]++
		if status != vocab.MessageHandled && status != vocab.MessageFailed {
			bad = append(bad, id+" "+status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d messages are neither handled nor failed once nothing waits: %v", len(bad), bad)
	}
	return out
}
