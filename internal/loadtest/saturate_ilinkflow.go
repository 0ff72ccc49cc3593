package loadtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// ilinkflowSystem drives the worker through the simulator: a message is injected at the
// simulator (the bot's getupdates hands it to the worker) and its reply read from the
// simulator's send log.
type ilinkflowSystem struct {
	r       *run
	mu      sync.Mutex
	byToken map[string]*satMsg
	twice   atomic.Int64
	wrong   atomic.Int64 // first replies that are not the echo of their message
}

// satMsg is one message of the ilinkflow system.
type satMsg struct {
	text     string
	injected time.Time
	replies  int
	received time.Time
	answered chan struct{}
}

func (r *run) newILinkflowSystem(ctx context.Context) (satSystem, func(), error) {
	if r.cfg.Bots < slices.Max(r.cfg.SatSteps) {
		return nil, nil, fmt.Errorf("%d bots enrolled, the largest step needs %d", r.cfg.Bots, slices.Max(r.cfg.SatSteps))
	}
	stats, err := r.ctl.Stats(ctx)
	if err != nil {
		return nil, nil, err
	}
	s := &ilinkflowSystem{r: r, byToken: map[string]*satMsg{}}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.watch(wctx, stats.Sent) }()
	return s, func() {
		// Later replies (doubles) are looked for until the series ends.
		cancel()
		if err := <-done; err != nil {
			r.rep.Problems = append(r.rep.Problems, "ilinkflow: "+err.Error())
		}
		if n := s.wrong.Load(); n > 0 {
			r.rep.Problems = append(r.rep.Problems, fmt.Sprintf("ilinkflow: %d replies were not the echo of their message", n))
		}
	}, nil
}

func (s *ilinkflowSystem) exchange(ctx context.Context, b, n int) error {
	_, err := s.exchangeTimed(ctx, b, n)
	return err
}

func (s *ilinkflowSystem) exchangeTimed(ctx context.Context, b, n int) (time.Duration, error) {
	m := &satMsg{text: fmt.Sprintf("saturation message %d", n), answered: make(chan struct{})}
	// The lock is held across the injection so the watcher knows the token before it can
	// see the reply.
	s.mu.Lock()
	m.injected = time.Now()
	in, err := s.r.ctl.InjectText(ctx, s.r.bots[b].id, "", m.text)
	if err == nil && (in.ContextToken == "" || s.byToken[in.ContextToken] != nil) {
		err = fmt.Errorf("the simulator issued no fresh context token (%q)", in.ContextToken)
	}
	if err == nil {
		s.byToken[in.ContextToken] = m
	}
	s.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("inject: %w", err)
	}
	select {
	case <-m.answered:
		return m.received.Sub(m.injected), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (s *ilinkflowSystem) doubled() int { return int(s.twice.Load()) }

// watch reads the simulator's send log every 10 ms until ctx ends, then once more.
func (s *ilinkflowSystem) watch(ctx context.Context, after int) error {
	return s.r.followSendLog(ctx, after, 10*time.Millisecond, func(sent []ilinksim.SentMessage) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range sent {
			s.record(e)
		}
	})
}

// record takes one sendmessage call into account (s.mu held).
func (s *ilinkflowSystem) record(e ilinksim.SentMessage) {
	m := s.byToken[e.ContextToken]
	if e.Outcome != ilinksim.OutcomeAccepted || m == nil {
		return
	}
	m.replies++
	if m.replies > 1 {
		if m.replies == 2 {
			s.twice.Add(1)
		}
		return
	}
	if e.Text != handoff.EchoPrefix+m.text {
		s.wrong.Add(1)
	}
	m.received = e.Received
	close(m.answered)
}
