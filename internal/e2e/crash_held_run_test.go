package e2e_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

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

type heldCrashEpoch struct {
	bot   string
	epoch int
}
