package loadtest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// chaosMsg is one user message of a chaos run and what came back for it.
type chaosMsg struct {
	n          int
	bot        int
	text       string
	token      string
	messageID  uint64
	injected   time.Time
	replies    int // accepted sendmessage calls with its context token (or merged: one)
	firstReply time.Time
	textOK     bool
	// merged: it was answered within the reply to a later message of its bot, which
	// absorbed it (a backlog no agent answered is merged into the next delivery).
	merged bool
	gaveUp bool // no reply within AnswerWithin: its bot moved on
}

// chaosBot is one bot's conversation: at most one message waits for its reply.
type chaosBot struct {
	waiting *chaosMsg
	readyAt time.Time // its next message may go from then
}

// chaosLoad is the stream of user messages: every bot, each next message a think time
// (with jitter) after the reply to the previous one (or, with Every, Every after the
// previous one), at most Rate a second overall.
type chaosLoad struct {
	c   *chaosRun
	rng *mrand.Rand // think times (guarded by mu)

	mu        sync.Mutex
	bots      []*chaosBot
	msgs      []*chaosMsg
	byToken   map[string]*chaosMsg
	byText    map[string]*chaosMsg
	unmatched int
	refused   int
	changed   chan struct{}
}

func newChaosLoad(c *chaosRun, rng *mrand.Rand) *chaosLoad {
	l := &chaosLoad{c: c, rng: rng, byToken: map[string]*chaosMsg{}, byText: map[string]*chaosMsg{}, changed: make(chan struct{}, 1)}
	now := time.Now()
	spread := c.cfg.Think
	if c.cc.Every > 0 {
		spread = c.cc.Every
	}
	for range c.bots {
		// First messages spread over one think time (or one period of an open stream).
		l.bots = append(l.bots, &chaosBot{readyAt: now.Add(time.Duration(rng.Float64() * float64(spread)))})
	}
	return l
}

func (l *chaosLoad) notify() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// think is a bot's pause after an answer: Think × [0.5, 1.5) (l.mu held).
func (l *chaosLoad) think() time.Duration {
	return time.Duration((0.5 + l.rng.Float64()) * float64(l.c.cfg.Think))
}

// drive injects messages until stop is closed or ctx ends.
func (l *chaosLoad) drive(ctx context.Context, stop <-chan struct{}) error {
	var gap time.Duration
	if l.c.cfg.Rate > 0 {
		gap = time.Duration(float64(time.Second) / l.c.cfg.Rate)
	}
	next := time.Now()
	for n := 1; ; n++ {
		if err := waitUntil(ctx, next); err != nil {
			return err
		}
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			b, wake := l.pick()
			if b >= 0 {
				if err := l.inject(ctx, b, n); err != nil {
					return err
				}
				break
			}
			tm := time.NewTimer(time.Until(wake))
			select {
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			case <-stop:
				tm.Stop()
				return nil
			case <-l.changed:
			case <-tm.C:
			}
			tm.Stop()
		}
		next = maxTime(next.Add(gap), time.Now().Add(-gap))
	}
}

// pick returns the bot whose next message has waited longest (-1: none may go yet, look
// again at wake). A message without a reply after AnswerWithin is given up.
func (l *chaosLoad) pick() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	wake := now.Add(time.Second)
	best := -1
	for i, b := range l.bots {
		if m := b.waiting; m != nil && l.c.cc.Every == 0 {
			if giveUp := m.injected.Add(l.c.cfg.AnswerWithin); now.Before(giveUp) {
				wake = minTime(wake, giveUp)
				continue
			}
			m.gaveUp, b.waiting, b.readyAt = true, nil, now.Add(l.think())
		}
		if now.Before(b.readyAt) {
			wake = minTime(wake, b.readyAt)
			continue
		}
		if best < 0 || b.readyAt.Before(l.bots[best].readyAt) {
			best = i
		}
	}
	return best, wake
}

// inject sends message n to bot b, holding the lock across the call so that the reply
// watcher knows its context token before its reply can be seen.
func (l *chaosLoad) inject(ctx context.Context, b, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := &chaosMsg{n: n, bot: b, text: fmt.Sprintf("chaos message %d", n), injected: time.Now()}
	in, err := l.c.ctl.InjectText(ctx, l.c.bots[b].id, "", m.text)
	if err != nil {
		return fmt.Errorf("inject message %d: %w", n, err)
	}
	if in.ContextToken == "" || l.byToken[in.ContextToken] != nil {
		return fmt.Errorf("inject message %d: the simulator issued no fresh context token (%q)", n, in.ContextToken)
	}
	m.token, m.messageID = in.ContextToken, in.MessageID
	l.byToken[m.token] = m
	l.byText[m.text] = m
	l.msgs = append(l.msgs, m)
	if every := l.c.cc.Every; every > 0 {
		l.bots[b].readyAt = m.injected.Add(every) // an open stream: answered or not
	} else {
		l.bots[b].waiting = m
	}
	return nil
}

// watchReplies follows the simulator's send log from index from until ctx ends.
func (l *chaosLoad) watchReplies(ctx context.Context, from int) error {
	return l.c.followSendLog(ctx, from, 50*time.Millisecond, func(sent []ilinksim.SentMessage) {
		l.mu.Lock()
		for _, s := range sent {
			l.record(s)
		}
		l.mu.Unlock()
		l.notify()
	})
}

// record takes one sendmessage call into account (l.mu held).
func (l *chaosLoad) record(s ilinksim.SentMessage) {
	if s.Outcome != ilinksim.OutcomeAccepted {
		l.refused++
		return
	}
	m := l.byToken[s.ContextToken]
	if m == nil {
		l.unmatched++
		return
	}
	m.replies++
	if m.replies > 1 {
		return
	}
	m.firstReply = s.Received
	// The echo of one message, or of a merged delivery: the texts of the messages it
	// absorbed (oldest first, one a line) and its own last.
	body, echo := strings.CutPrefix(s.Text, handoff.EchoPrefix)
	lines := strings.Split(body, "\n")
	m.textOK = echo && lines[len(lines)-1] == m.text
	if m.textOK {
		for _, line := range lines[:len(lines)-1] {
			if e := l.byText[line]; e != nil && e.bot == m.bot && e.n < m.n && e.replies == 0 {
				e.replies, e.merged, e.firstReply, e.textOK = 1, true, s.Received, true
			}
		}
	}
	if b := l.bots[m.bot]; b.waiting == m {
		b.waiting = nil
		b.readyAt = s.Received.Add(l.think())
	}
}

// awaitAnswers waits until every message has its reply or AnswerWithin passed since its
// injection.
func (l *chaosLoad) awaitAnswers(ctx context.Context) error {
	for {
		l.mu.Lock()
		open := 0
		wake := time.Now().Add(time.Second)
		for _, m := range l.msgs {
			if m.replies == 0 && !m.gaveUp {
				giveUp := m.injected.Add(l.c.cfg.AnswerWithin)
				if !time.Now().Before(giveUp) {
					m.gaveUp = true
					continue
				}
				open++
				wake = minTime(wake, giveUp)
			}
		}
		l.mu.Unlock()
		if open == 0 {
			return nil
		}
		tm := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-l.changed:
		case <-tm.C:
		}
		tm.Stop()
	}
}
