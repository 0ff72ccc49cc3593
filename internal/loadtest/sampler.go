package loadtest

import (
	"context"
	"sync"
	"time"
)

// Phases of a run, as the samples are tagged.
const (
	phaseStartup = "startup"
	phaseIdle    = "idle"
	phaseLoad    = "load"
	phaseOther   = "between"
)

// sample is one periodic reading of the worker and the simulator.
type sample struct {
	phase    string
	at       time.Time
	rssKB    int64 // -1: unreadable
	conns    int   // -1: unreadable
	held     int   // getupdates calls held at the simulator; -1: unreadable
	botsHeld int
}

// sampler reads the worker's RSS, its PostgreSQL connections and the held long polls
// every period until stopped.
type sampler struct {
	r       *run
	mu      sync.Mutex
	phase   string
	samples []sample
	done    chan struct{}
	over    chan struct{}
	once    sync.Once
}

func newSampler(r *run) *sampler {
	return &sampler{r: r, phase: phaseStartup, done: make(chan struct{}), over: make(chan struct{})}
}

func (s *sampler) setPhase(p string) {
	if p == "" {
		p = phaseOther
	}
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
	s.take() // a reading at each phase boundary, whatever the period
}

func (s *sampler) run(period time.Duration) {
	defer close(s.over)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s.take()
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) take() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sm := sample{at: time.Now(), rssKB: -1, conns: -1, held: -1}
	if kb, err := procRSSKB(s.r.worker.pid); err == nil {
		sm.rssKB = kb
	}
	if n, err := s.r.workerConns(ctx); err == nil {
		sm.conns = n
	}
	if st, err := s.r.ctl.Stats(ctx); err == nil {
		sm.held, sm.botsHeld = st.HeldGetUpdates, st.BotsHeld
	}
	s.mu.Lock()
	sm.phase = s.phase
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

func (s *sampler) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.over
}

func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

// summarizeSamples puts the samples' extremes in the report.
func (r *run) summarizeSamples() {
	if r.sampler == nil {
		return
	}
	rep := r.rep
	first := map[string]bool{}
	for _, sm := range r.sampler.all() {
		rep.Samples++
		if sm.rssKB >= 0 {
			mb := float64(sm.rssKB) / 1024
			rep.RSSMaxMB = max(rep.RSSMaxMB, mb)
			switch sm.phase {
			case phaseIdle:
				rep.RSSIdleMaxMB = max(rep.RSSIdleMaxMB, mb)
			case phaseLoad:
				rep.RSSLoadMaxMB = max(rep.RSSLoadMaxMB, mb)
			}
		}
		if sm.conns >= 0 {
			rep.PGConnsMax = max(rep.PGConnsMax, sm.conns)
			switch sm.phase {
			case phaseIdle:
				rep.PGConnsIdleMax = max(rep.PGConnsIdleMax, sm.conns)
			case phaseLoad:
				rep.PGConnsLoadMax = max(rep.PGConnsLoadMax, sm.conns)
			}
		}
		if sm.phase == phaseIdle && sm.held >= 0 {
			if !first[phaseIdle] {
				first[phaseIdle] = true
				rep.HeldIdleMin, rep.HeldIdleMax, rep.BotsHeldIdleMin = sm.held, sm.held, sm.botsHeld
			}
			rep.HeldIdleMin = min(rep.HeldIdleMin, sm.held)
			rep.HeldIdleMax = max(rep.HeldIdleMax, sm.held)
			rep.BotsHeldIdleMin = min(rep.BotsHeldIdleMin, sm.botsHeld)
		}
	}
}
