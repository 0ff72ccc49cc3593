package loadtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// message is one injected user message and what came back for it.
type message struct {
	n          int
	bot        *loadBot
	text       string
	token      string // the context token the simulator issued with it
	injected   time.Time
	replies    int // accepted sendmessage calls with its context token
	firstReply time.Time
	textOK     bool // the first reply is the echo of this message alone
	gaveUp     bool // no reply within AnswerWithin: its bot moved on
}

// loadBot is one active bot's conversation: at most one message waits for its reply.
type loadBot struct {
	b         bot
	remaining int
	waiting   *message
	lastReply time.Time
}

// loadState is shared by the injector and the reply watcher.
type loadState struct {
	mu        sync.Mutex
	bots      []*loadBot
	msgs      []*message
	byToken   map[string]*message
	unmatched int // accepted replies with a context token of no injected message
	refused   int // sendmessage calls the simulator refused
	changed   chan struct{}
}

func (s *loadState) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// load injects cfg.Messages messages over cfg.Active random bots and waits for their
// replies.
func (r *run) load(ctx context.Context) (window, error) {
	if r.cfg.Messages == 0 {
		w := r.begin(ctx, phaseLoad)
		r.end(ctx, &w)
		return w, nil
	}
	st := &loadState{byToken: map[string]*message{}, changed: make(chan struct{}, 1)}
	perm := r.rng.Perm(len(r.bots))[:r.cfg.Active]
	for _, i := range perm {
		st.bots = append(st.bots, &loadBot{b: r.bots[i]})
	}
	for i := range r.cfg.Messages {
		st.bots[i%len(st.bots)].remaining++
	}
	stats, err := r.ctl.Stats(ctx)
	if err != nil {
		return window{}, err
	}
	r.log.Info("load", "messages", r.cfg.Messages, "bots", len(st.bots), "max_rate", r.cfg.Rate, "think", r.cfg.Think)

	w := r.begin(ctx, phaseLoad)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.cfg.LoadWithin > 0 {
		var c2 context.CancelFunc
		lctx, c2 = context.WithTimeout(lctx, r.cfg.LoadWithin)
		defer c2()
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchErr := make(chan error, 1)
	go func() { watchErr <- r.watchReplies(watchCtx, st, stats.Sent) }()
	finishWatch := func() error {
		stopWatch()
		return <-watchErr
	}

	injectErr := r.inject(lctx, st)
	if injectErr == nil {
		injectErr = r.awaitReplies(lctx, st)
	}
	timedOut := injectErr != nil && lctx.Err() != nil && ctx.Err() == nil
	if injectErr != nil && !timedOut {
		_ = finishWatch()
		return w, injectErr
	}
	if timedOut {
		r.rep.Problems = append(r.rep.Problems, fmt.Sprintf("the load phase did not finish within %v", r.cfg.LoadWithin))
	}
	// Keep watching for a while: a second reply to a message would come now.
	if err := r.settle(ctx); err != nil {
		_ = finishWatch()
		return w, err
	}
	if err := finishWatch(); err != nil {
		return w, err
	}
	r.end(ctx, &w)
	r.rep.setLoad(st, w, r.cfg)
	return w, nil
}

// waitChange waits until the load's state changes, wake passes or ctx ends (its error).
func (s *loadState) waitChange(ctx context.Context, wake time.Time) error {
	tm := time.NewTimer(time.Until(wake))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.changed:
	case <-tm.C:
	}
	return nil
}

// inject sends the messages: at most cfg.Rate a second, each to a bot whose previous
// message was answered (or given up) at least cfg.Think ago.
func (r *run) inject(ctx context.Context, st *loadState) error {
	var gap time.Duration
	if r.cfg.Rate > 0 {
		gap = time.Duration(float64(time.Second) / r.cfg.Rate)
	}
	next := time.Now()
	for n := 1; n <= r.cfg.Messages; n++ {
		if err := waitUntil(ctx, next); err != nil {
			return err
		}
		for {
			b, wake := r.pick(st)
			if b != nil {
				if err := r.injectOne(ctx, st, b, n); err != nil {
					return err
				}
				break
			}
			if err := st.waitChange(ctx, wake); err != nil {
				return err
			}
		}
		next = maxTime(next.Add(gap), time.Now().Add(-gap)) // no burst to catch up after a wait
	}
	return nil
}

// pick returns a bot that may get its next message now, or the time to look again.
func (r *run) pick(st *loadState) (*loadBot, time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	wake := now.Add(100 * time.Millisecond)
	var best *loadBot
	for _, b := range st.bots {
		if b.remaining == 0 {
			continue
		}
		if m := b.waiting; m != nil {
			if giveUp := m.injected.Add(r.cfg.AnswerWithin); now.Before(giveUp) {
				wake = minTime(wake, giveUp)
				continue
			}
			m.gaveUp, b.waiting, b.lastReply = true, nil, now
		}
		if free := b.lastReply.Add(r.cfg.Think); now.Before(free) {
			wake = minTime(wake, free)
			continue
		}
		if best == nil || b.lastReply.Before(best.lastReply) {
			best = b
		}
	}
	return best, wake
}

// injectOne injects message n for b. It holds the state's lock across the call, so the
// reply watcher knows the message's context token before its reply can be seen.
func (r *run) injectOne(ctx context.Context, st *loadState, b *loadBot, n int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := &message{n: n, bot: b, text: fmt.Sprintf("load test message %d", n), injected: time.Now()}
	in, err := r.ctl.InjectText(ctx, b.b.id, "", m.text)
	if err != nil {
		return fmt.Errorf("inject message %d: %w", n, err)
	}
	if in.ContextToken == "" || st.byToken[in.ContextToken] != nil {
		return fmt.Errorf("inject message %d: the simulator issued no fresh context token (%q)", n, in.ContextToken)
	}
	m.token = in.ContextToken
	st.byToken[m.token] = m
	st.msgs = append(st.msgs, m)
	b.remaining--
	b.waiting = m
	return nil
}

// watchReplies reads the simulator's send log (entries after index from) until ctx
// ends, matching each accepted reply to its message by context token. A final read
// after ctx ends catches what came last.
func (r *run) watchReplies(ctx context.Context, st *loadState, from int) error {
	return r.followSendLog(ctx, from, 20*time.Millisecond, func(sent []ilinksim.SentMessage) {
		st.mu.Lock()
		for _, s := range sent {
			st.record(s)
		}
		st.mu.Unlock()
		st.notify()
	})
}

// followSendLog reads the simulator's send log every period, from the entry after index
// after, until ctx ends, then once more; take gets each read's new entries (none: not
// called).
func (r *run) followSendLog(ctx context.Context, after int, period time.Duration, take func([]ilinksim.SentMessage)) error {
	tick := time.NewTicker(period)
	defer tick.Stop()
	read := func(rctx context.Context) error {
		sent, err := r.ctl.SentAfter(rctx, "", after)
		if err != nil {
			return err
		}
		if len(sent) == 0 {
			return nil
		}
		for _, s := range sent {
			after = max(after, s.Index)
		}
		take(sent)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return read(fctx)
		case <-tick.C:
		}
		if err := read(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("read the simulator's send log: %w", err)
		}
	}
}

// record takes one sendmessage call into account (st.mu held).
func (st *loadState) record(s ilinksim.SentMessage) {
	if s.Outcome != ilinksim.OutcomeAccepted {
		st.refused++
		return
	}
	m := st.byToken[s.ContextToken]
	if m == nil {
		st.unmatched++
		return
	}
	m.replies++
	if m.replies > 1 {
		return
	}
	m.firstReply = s.Received
	m.textOK = s.Text == handoff.EchoPrefix+m.text
	if m.bot.waiting == m {
		m.bot.waiting = nil
		m.bot.lastReply = s.Received
	}
}

// awaitReplies waits until every injected message has its reply or was given up.
func (r *run) awaitReplies(ctx context.Context, st *loadState) error {
	for {
		st.mu.Lock()
		open := 0
		wake := time.Now().Add(time.Second)
		for _, m := range st.msgs {
			if m.replies == 0 && !m.gaveUp {
				giveUp := m.injected.Add(r.cfg.AnswerWithin)
				if time.Now().After(giveUp) {
					m.gaveUp = true
					continue
				}
				open++
				wake = minTime(wake, giveUp)
			}
		}
		st.mu.Unlock()
		if open == 0 {
			return nil
		}
		if err := st.waitChange(ctx, wake); err != nil {
			return err
		}
	}
}

// settle keeps the reply watcher running for cfg.Settle after the last answer (a
// measurement window for late second replies, not a wait for a condition).
func (r *run) settle(ctx context.Context) error {
	if r.cfg.Settle <= 0 {
		return nil
	}
	tm := time.NewTimer(r.cfg.Settle)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.worker.exited:
		return r.worker.exitError()
	case <-tm.C:
		return nil
	}
}

func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}
