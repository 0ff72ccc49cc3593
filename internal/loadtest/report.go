package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured. Durations are in milliseconds (…MS) or seconds (…S).
type Report struct {
	Bots       int    `json:"bots"`
	ActiveBots int    `json:"active_bots"`
	Messages   int    `json:"messages"`
	Seed       uint64 `json:"seed"`

	Temporal  string `json:"temporal"`
	Namespace string `json:"namespace"`
	Schema    string `json:"schema"`
	// Database is the database the run created for itself (saturation runs; "" otherwise).
	Database  string `json:"database,omitempty"`
	WorkerPID int    `json:"worker_pid"`
	WorkerLog string `json:"worker_log"`
	WorkDir   string `json:"work_dir"`

	LongPollHoldMS   float64 `json:"long_poll_hold_ms"`
	IdleMS           float64 `json:"idle_ms"`
	PollLeaseTTLMS   float64 `json:"poll_lease_ttl_ms"`
	HeartbeatEveryMS float64 `json:"heartbeat_every_ms"`
	PollSessionMS    float64 `json:"poll_session_ms"`
	SendGapMS        float64 `json:"send_gap_ms"`
	// DBMaxConns is the pool bound passed to the worker (0: none passed).
	DBMaxConns int `json:"db_max_conns"`
	// PGConnBound is the most connections the worker's pool may open, and where that
	// number comes from.
	PGConnBound       int    `json:"pg_conn_bound"`
	PGConnBoundSource string `json:"pg_conn_bound_source"`

	EnrollMS        float64 `json:"enroll_ms"`
	Ready           bool    `json:"ready"`
	ReadyMS         float64 `json:"ready_ms"` // from the worker's start to every bot holding a long poll
	BotsHeldAtReady int     `json:"bots_held_at_ready"`

	Samples        int     `json:"samples"`
	RSSMaxMB       float64 `json:"rss_max_mb"`
	RSSIdleMaxMB   float64 `json:"rss_idle_max_mb"`
	RSSLoadMaxMB   float64 `json:"rss_load_max_mb"`
	PGConnsMax     int     `json:"pg_conns_max"`
	PGConnsIdleMax int     `json:"pg_conns_idle_max"`
	PGConnsLoadMax int     `json:"pg_conns_load_max"`
	IdleCPUPercent float64 `json:"idle_cpu_percent"` // of one core
	LoadCPUPercent float64 `json:"load_cpu_percent"`
	// HeldIdleMin and HeldIdleMax are the getupdates calls held at the simulator during
	// the idle window; BotsHeldIdleMin the fewest bots holding one.
	HeldIdleMin     int `json:"held_idle_min"`
	HeldIdleMax     int `json:"held_idle_max"`
	BotsHeldIdleMin int `json:"bots_held_idle_min"`

	IdleWindowS float64 `json:"idle_window_s"`
	// HistoryCounted is set once the workflow histories were read (the run got that far).
	HistoryCounted        bool    `json:"history_counted"`
	IdleCost              Cost    `json:"idle_cost"`
	IdleEventsPerBotHour  float64 `json:"idle_events_per_bot_hour"`
	IdleActionsPerBotHour float64 `json:"idle_actions_per_bot_hour"` // from history
	// IdleHeartbeats are the heartbeats recorded in the idle window: measured from the
	// worker's metrics when HeartbeatsMeasured, else the estimate.
	IdleHeartbeats               float64 `json:"idle_heartbeats"`
	HeartbeatsMeasured           bool    `json:"heartbeats_measured"`
	IdleHeartbeatsPerBotHour     float64 `json:"idle_heartbeats_per_bot_hour"`
	HeartbeatsEstimatePerBotHour float64 `json:"heartbeats_estimate_per_bot_hour"`
	IdleQueries                  float64 `json:"idle_queries"`
	// IdleBilledPerBotHour is history actions + heartbeats + queries per idle bot per hour.
	IdleBilledPerBotHour float64 `json:"idle_billed_per_bot_hour"`

	Load LoadResult `json:"load"`
	// Saturation is the saturation run's result (nil when not asked for).
	Saturation *SatReport `json:"saturation,omitempty"`

	WorkerExit string   `json:"worker_exit"`
	Problems   []string `json:"problems,omitempty"`
	Failure    string   `json:"failure,omitempty"`
}

// LoadResult is what the load phase measured.
type LoadResult struct {
	Injected    int `json:"injected"`
	NotInjected int `json:"not_injected"`
	// Answered messages got at least one reply; Lost none (within AnswerWithin or at all);
	// Doubled more than one; Late their first only after AnswerWithin.
	Answered int `json:"answered"`
	Lost     int `json:"lost"`
	Doubled  int `json:"doubled"`
	Late     int `json:"late"`
	// Mismatched first replies are not the echo of their message alone.
	Mismatched int `json:"mismatched"`
	// Unmatched are accepted sends with a context token of no injected message; Refused
	// are sends the simulator refused.
	Unmatched int `json:"unmatched"`
	Refused   int `json:"refused"`

	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	LatencyMaxMS float64 `json:"latency_max_ms"`
	DurationS    float64 `json:"duration_s"`
	RatePerS     float64 `json:"rate_per_s"`

	Cost              Cost    `json:"cost"`
	ActionsPerMessage float64 `json:"actions_per_message"` // from history, over injected messages
	Heartbeats        float64 `json:"heartbeats"`
}

// Verdict is nil when every injected message got exactly one reply, every message was
// injected, and the worker stayed within its PostgreSQL connection bound; otherwise an
// error wrapping ErrRuleBroken that says what broke.
func (r *Report) Verdict() error {
	var broke []string
	if r.Load.Lost > 0 {
		broke = append(broke, fmt.Sprintf("%d messages lost (no reply)", r.Load.Lost))
	}
	if r.Load.Doubled > 0 {
		broke = append(broke, fmt.Sprintf("%d messages answered more than once", r.Load.Doubled))
	}
	if r.Load.NotInjected > 0 {
		broke = append(broke, fmt.Sprintf("%d messages not injected", r.Load.NotInjected))
	}
	if r.Saturation != nil {
		lost, doubled := r.Saturation.lostOrDoubled()
		if lost > 0 {
			broke = append(broke, fmt.Sprintf("%d saturation messages lost (no reply)", lost))
		}
		if doubled > 0 {
			broke = append(broke, fmt.Sprintf("%d saturation messages answered more than once", doubled))
		}
	}
	if r.PGConnBound > 0 && r.PGConnsMax > r.PGConnBound {
		broke = append(broke, fmt.Sprintf("the worker used %d PostgreSQL connections, over its bound of %d", r.PGConnsMax, r.PGConnBound))
	}
	if len(broke) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRuleBroken, strings.Join(broke, "; "))
}

func perBotHour(n float64, bots int, seconds float64) float64 {
	if bots == 0 || seconds <= 0 {
		return 0
	}
	return n / float64(bots) / (seconds / 3600)
}

func (r *Report) setIdleCost(c Cost, w window, rn *run) {
	secs := w.seconds()
	r.IdleWindowS = secs
	r.HistoryCounted = true
	r.IdleCost = c
	r.IdleEventsPerBotHour = perBotHour(float64(c.Events), r.Bots, secs)
	r.IdleActionsPerBotHour = perBotHour(float64(c.Actions), r.Bots, secs)
	r.HeartbeatsEstimatePerBotHour = 0 // poll activities are scheduled without a heartbeat timeout: liveness is the poll lease
	if w.metricsOK {
		r.HeartbeatsMeasured = true
		r.IdleHeartbeats = w.metTo.heartbeats - w.metFrom.heartbeats
		r.IdleQueries = w.metTo.queries - w.metFrom.queries
		r.IdleHeartbeatsPerBotHour = perBotHour(r.IdleHeartbeats, r.Bots, secs)
	} else {
		r.IdleHeartbeatsPerBotHour = r.HeartbeatsEstimatePerBotHour
		r.IdleHeartbeats = r.HeartbeatsEstimatePerBotHour * float64(r.Bots) * secs / 3600
		r.Problems = append(r.Problems, "the worker's /metrics could not be read: heartbeats are an estimate from its settings, queries not counted")
	}
	r.IdleBilledPerBotHour = r.IdleActionsPerBotHour + r.IdleHeartbeatsPerBotHour + perBotHour(r.IdleQueries, r.Bots, secs)
	if session := rn.workCfg.PollSession; session > 0 && secs < session.Seconds() {
		r.Problems = append(r.Problems, fmt.Sprintf("the idle window (%v) is shorter than the worker's poll session (%v): the restart of each bot's "+
			"PollAccount activity at the end of a session (1 action, about 5 history events) may fall outside it; that is %.0f actions per bot per hour "+
			"more than the history figure shows when it does. Use -idle longer than the poll session, or a shorter ILINKFLOW_POLL_SESSION, to measure it",
			w.to.Sub(w.from).Round(time.Second), session, float64(time.Hour)/float64(session)))
	}
}

func (r *Report) setLoadCost(c Cost, w window) {
	r.Load.Cost = c
	if r.Load.Injected > 0 {
		r.Load.ActionsPerMessage = float64(c.Actions) / float64(r.Load.Injected)
	}
	if w.metricsOK {
		r.Load.Heartbeats = w.metTo.heartbeats - w.metFrom.heartbeats
	}
}

func (r *Report) setLoad(st *loadState, w window, cfg Config) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := &r.Load
	l.Injected = len(st.msgs)
	l.NotInjected = cfg.Messages - l.Injected
	l.Unmatched, l.Refused = st.unmatched, st.refused
	var lat []time.Duration
	for _, m := range st.msgs {
		switch {
		case m.replies == 0:
			l.Lost++
			continue
		case m.replies > 1:
			l.Doubled++
		}
		l.Answered++
		d := m.firstReply.Sub(m.injected)
		if d > cfg.AnswerWithin {
			l.Late++
		}
		if !m.textOK {
			l.Mismatched++
		}
		lat = append(lat, d)
	}
	sortDurations(lat)
	l.LatencyP50MS = ms(percentile(lat, 50))
	l.LatencyP99MS = ms(percentile(lat, 99))
	l.LatencyMaxMS = ms(percentile(lat, 100))
	l.DurationS = w.seconds()
	if l.DurationS > 0 {
		l.RatePerS = float64(l.Injected) / l.DurationS
	}
	r.LoadCPUPercent = cpuPercent(w)
	if l.Late > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d messages were answered only after %v", l.Late, cfg.AnswerWithin))
	}
	if l.Mismatched > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d first replies were not the echo of their message alone (merged deliveries?)", l.Mismatched))
	}
	if l.Unmatched > 0 || l.Refused > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d accepted sends matched no message, %d sends were refused by the simulator", l.Unmatched, l.Refused))
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as a plain text table.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	fmt.Fprintf(tw, "ilinkflow scale test: %d bots on one worker process (pid %d)\n", r.Bots, r.WorkerPID)
	schema := r.Schema
	if r.Database != "" {
		schema = r.Database + "." + schema
	}
	fmt.Fprintf(tw, "temporal %s, namespace %s; PostgreSQL schema %s; simulator long-poll hold %v\n",
		r.Temporal, r.Namespace, schema, dur(r.LongPollHoldMS))
	fmt.Fprintf(tw, "worker: poll lease ttl %v, heartbeat every %v, poll session %v, send gap %v, pool bound %d (%s)\n\n",
		dur(r.PollLeaseTTLMS), dur(r.HeartbeatEveryMS), dur(r.PollSessionMS), dur(r.SendGapMS), r.PGConnBound, r.PGConnBoundSource)
	fmt.Fprintln(tw, "figure\tvalue")
	ready := fmt.Sprintf("%d of %d", r.BotsHeldAtReady, r.Bots)
	if r.Ready {
		ready += fmt.Sprintf(" (all %v after the worker started; enrollment took %v)", dur(r.ReadyMS), dur(r.EnrollMS))
	} else {
		ready += " (NOT all)"
	}
	row("bots holding a long poll", "%s", ready)
	if r.IdleWindowS > 0 {
		row("worker RSS, max during run", "%.1f MB (idle max %.1f MB, load max %.1f MB)", r.RSSMaxMB, r.RSSIdleMaxMB, r.RSSLoadMaxMB)
		row("worker PostgreSQL connections, max sampled", "%d (idle max %d, load max %d; bound %d)", r.PGConnsMax, r.PGConnsIdleMax, r.PGConnsLoadMax, r.PGConnBound)
	} else {
		row("worker RSS, max during run", "%.1f MB", r.RSSMaxMB)
		row("worker PostgreSQL connections, max sampled", "%d (bound %d)", r.PGConnsMax, r.PGConnBound)
	}
	if r.IdleWindowS == 0 {
		row("idle and load phases", "not reached")
	} else {
		row("worker CPU while idle", "%.2f %% of one core (load: %.1f %%)", r.IdleCPUPercent, r.LoadCPUPercent)
		row("getupdates held while idle", "min %d, max %d (fewest bots holding one: %d)", r.HeldIdleMin, r.HeldIdleMax, r.BotsHeldIdleMin)
		row("idle window", "%.1f s", r.IdleWindowS)
		if !r.HistoryCounted {
			row("Temporal cost while idle", "not counted: the run failed before the histories were read")
		}
		row("history events per idle bot per hour", "%.2f (%d events in the window)", r.IdleEventsPerBotHour, r.IdleCost.Events)
		hb := "measured from the worker's SDK metrics"
		if !r.HeartbeatsMeasured {
			hb = "ESTIMATED from the worker's settings"
		}
		row("billed actions per idle bot per hour", "%.1f = history %.2f + heartbeats %.1f (%s; estimate %.1f) + queries %.0f in the window",
			r.IdleBilledPerBotHour, r.IdleActionsPerBotHour, r.IdleHeartbeatsPerBotHour, hb, r.HeartbeatsEstimatePerBotHour, r.IdleQueries)
		if len(r.IdleCost.ByKind) > 0 {
			row("  idle actions by kind", "%s", strings.Join(sortedKinds(r.IdleCost.ByKind), ", "))
		}
	}
	if r.Saturation != nil {
		row("idle and load phases", "not run: a saturation run")
	} else if r.Load.Injected == 0 && r.Load.NotInjected == 0 {
		row("load phase", "not reached or no messages")
	} else {
		l := r.Load
		row("messages injected / answered", "%d / %d over %d bots in %.1f s (%.1f msg/s)", l.Injected, l.Answered, r.ActiveBots, l.DurationS, l.RatePerS)
		row("latency inject -> reply p50 / p99 / max", "%v / %v / %v", dur(l.LatencyP50MS), dur(l.LatencyP99MS), dur(l.LatencyMaxMS))
		row("lost / doubled", "%d / %d", l.Lost, l.Doubled)
		row("actions per message under load", "%.2f (history; %d heartbeats in the load window)", l.ActionsPerMessage, int(l.Heartbeats))
		if len(l.Cost.ByKind) > 0 {
			row("  load actions by kind", "%s", strings.Join(sortedKinds(l.Cost.ByKind), ", "))
		}
	}
	row("worker exit", "%s", r.WorkerExit)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Saturation != nil {
		if err := r.Saturation.writeText(w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\ncounted as billed actions: %s\n", strings.Join(CountedActions, "; "))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "note: %s\n", p)
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "FAILED: %s\n", r.Failure)
	} else if err := r.Verdict(); err != nil {
		fmt.Fprintf(w, "FAILED: %v\n", err)
	} else {
		fmt.Fprintln(w, "PASSED: every message answered exactly once")
		if r.Saturation != nil && r.Saturation.series(SystemILinkflow) != nil && r.Saturation.series(SystemILinkflow).Saturation == nil {
			fmt.Fprintln(w, "note: no ilinkflow step stayed within the p99 bound: lower the first step")
		}
	}
	return nil
}

func dur(msv float64) time.Duration {
	return time.Duration(msv * float64(time.Millisecond)).Round(time.Millisecond)
}
