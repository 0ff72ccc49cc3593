package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ChaosReport is what a chaos run measured. Durations are in milliseconds (…MS) or
// seconds (…S); instants (…AtS) are seconds from the start of the chaos phase.
type ChaosReport struct {
	Workers int    `json:"workers"`
	Bots    int    `json:"bots"`
	Seed    uint64 `json:"seed"`

	Temporal  string `json:"temporal"`
	Namespace string `json:"namespace"`
	Schema    string `json:"schema"`
	WorkDir   string `json:"work_dir"`
	WorkerBin string `json:"worker_bin"`

	PollLeaseTTLMS  float64 `json:"poll_lease_ttl_ms"`
	PollSessionMS   float64 `json:"poll_session_ms"`
	ShutdownGraceMS float64 `json:"shutdown_grace_ms"`
	Rate            float64 `json:"rate"`
	ThinkMS         float64 `json:"think_ms"`
	EveryMS         float64 `json:"every_ms,omitempty"`
	AnswerWithinMS  float64 `json:"answer_within_ms"`
	// The bounds: after a kill, after the freeze (lease ttl + slack), per bot in the
	// rolling restart.
	KillBoundMS   float64 `json:"kill_bound_ms"`
	FreezeBoundMS float64 `json:"freeze_bound_ms"`
	RollBoundMS   float64 `json:"roll_bound_ms"`

	// ReadyS is the time from every worker ready to every bot polled.
	ReadyS float64        `json:"ready_s"`
	Plan   []PlannedEvent `json:"plan"`
	// EventsDone counts the planned events done (the rolling restart not included).
	EventsDone int `json:"events_done"`
	// ChaosS is the length of the chaos phase (events and rolling restart).
	ChaosS float64 `json:"chaos_s"`

	Kills []KillResult `json:"kills"`
	// KillMaxMS is the longest time from a kill to an affected bot's next getupdates.
	KillMaxMS float64         `json:"kill_max_ms"`
	Freeze    *FreezeResult   `json:"freeze,omitempty"`
	Rolling   *RollResult     `json:"rolling_restart,omitempty"`
	Messages  ChaosMessages   `json:"messages"`
	Overlaps  OverlapResult   `json:"getupdates_overlaps"`
	Processes []ProcessResult `json:"processes"`

	BoundsMissed []string `json:"bounds_missed,omitempty"`
	Problems     []string `json:"problems,omitempty"`
	Failure      string   `json:"failure,omitempty"`
}

// KillResult is one kill: when, how, which process, and how soon the bots it polled were
// polled again.
type KillResult struct {
	N      int     `json:"n"`
	AtS    float64 `json:"at_s"`
	How    string  `json:"how"`
	Victim string  `json:"victim"`
	PID    int     `json:"pid"`
	// NamedAccount is the account the fault point's line named (fault-point kills).
	NamedAccount string `json:"named_account,omitempty"`
	// Nudges counts the getupdates the simulator answered 502 (one a second once the point
	// was armed) so that a poll activity would be picked up (poll-picked-up kills).
	Nudges int `json:"nudges,omitempty"`
	// Bots are the affected bots: those whose lease the victim held at the kill, plus the
	// named one. Repolled of them got a getupdates after the kill (or had one in flight
	// from another process at the kill); NotRepolled lists the others (by the end of the
	// run), counted in the max and p99 with their time until the run's end.
	Bots        int      `json:"bots"`
	Repolled    int      `json:"repolled"`
	NotRepolled []string `json:"not_repolled,omitempty"`
	MaxMS       float64  `json:"max_ms"`
	P99MS       float64  `json:"p99_ms"`
	WithinBound bool     `json:"within_bound"`
}

// FreezeResult is the freeze: the time from SIGSTOP to the next getupdates of each bot
// the frozen worker held, and what the worker did after SIGCONT.
type FreezeResult struct {
	AtS         float64  `json:"at_s"`
	ForS        float64  `json:"for_s"`
	Victim      string   `json:"victim"`
	PID         int      `json:"pid"`
	Bots        int      `json:"bots"`
	Repolled    int      `json:"repolled"`
	NotRepolled []string `json:"not_repolled,omitempty"`
	MaxMS       float64  `json:"max_ms"`
	BoundMS     float64  `json:"bound_ms"`
	WithinBound bool     `json:"within_bound"`
	// StrayPolls are getupdates the thawed worker sent for bots whose lease it did not
	// hold at that moment.
	StrayPolls int      `json:"stray_polls"`
	Strays     []string `json:"strays,omitempty"`
}

// RollStep is one replacement of the rolling restart.
type RollStep struct {
	Old         string  `json:"old"`
	OldPID      int     `json:"old_pid"`
	New         string  `json:"new"`
	NewPID      int     `json:"new_pid"`
	ReadyAfterS float64 `json:"ready_after_s"`
}

// RollResult is the rolling restart: per bot, the longest time without a getupdates in
// flight from its first SIGTERM until every bot was polled after the last replacement.
type RollResult struct {
	AtS         float64    `json:"at_s"`
	TookS       float64    `json:"took_s"`
	Steps       []RollStep `json:"steps"`
	MaxGapMS    float64    `json:"max_gap_ms"`
	P99GapMS    float64    `json:"p99_gap_ms"`
	WorstBot    string     `json:"worst_bot"`
	WithinBound bool       `json:"within_bound"`
}

// ChaosMessages counts the messages of the stream and what became of them.
type ChaosMessages struct {
	Injected int `json:"injected"`
	Answered int `json:"answered"`
	// Merged of them were answered within the reply to a later message of their bot
	// that absorbed them (an open stream writes faster than the agent answers).
	Merged int `json:"merged"`
	// Lost messages got no reply within the answer bound. LostInFlight of them are the
	// documented loss: handed out by the simulator to a process killed or frozen within
	// the in-flight window after, and not stored. LostBeyond are the rest (Late of them
	// answered after the bound).
	Lost         int `json:"lost"`
	LostInFlight int `json:"lost_in_flight"`
	// LostUnknownSend of them had their reply's send cut by a kill between the attempt's
	// start and its outcome: by the rule, an ambiguous send is never sent again (documented).
	LostUnknownSend int `json:"lost_unknown_send"`
	LostBeyond      int `json:"lost_beyond"`
	Late            int `json:"late"`
	Doubled         int `json:"doubled"`
	// FalseHandled messages are 'handled' in inbound_messages but no reply reached the
	// simulator.
	FalseHandled int `json:"false_handled"`
	Mismatched   int `json:"mismatched"`
	Unmatched    int `json:"unmatched"`
	Refused      int `json:"refused"`

	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	LatencyMaxMS float64 `json:"latency_max_ms"`

	// Details name the messages lost beyond the in-flight pages, doubled or falsely handled
	// (at most 50); InFlightDetails the in-flight losses (at most 20).
	Details         []string `json:"details,omitempty"`
	InFlightDetails []string `json:"in_flight_details,omitempty"`
}

// OverlapResult splits the simulator's getupdates overlaps (a second outstanding
// getupdates of a bot) by when they began: while a worker was frozen (its held poll still
// open at the server: allowed), after a thaw, or outside any freeze (neither allowed).
type OverlapResult struct {
	Total       int      `json:"total"`
	WhileFrozen int      `json:"while_frozen"`
	AfterThaw   int      `json:"after_thaw"`
	Other       int      `json:"outside_freezes"`
	Examples    []string `json:"examples,omitempty"`
}

// ProcessResult is one worker process of the run.
type ProcessResult struct {
	Name     string  `json:"name"`
	PID      int     `json:"pid"`
	Slot     int     `json:"slot"`
	Armed    string  `json:"armed,omitempty"`
	StartedS float64 `json:"started_s"`
	EndedS   float64 `json:"ended_s,omitempty"`
	Fate     string  `json:"fate"`
	Log      string  `json:"log"`
}

// Verdict is nil when no message was lost beyond the in-flight pages, none answered twice
// or falsely handled, every bound held, no getupdates overlapped outside a freeze, the
// thawed worker polled no bot it did not hold and every planned event was done;
// otherwise an error wrapping ErrRuleBroken that says what broke.
func (r *ChaosReport) Verdict() error {
	var broke []string
	m := r.Messages
	if m.LostBeyond > 0 {
		broke = append(broke, fmt.Sprintf("%d messages lost beyond the in-flight pages", m.LostBeyond))
	}
	if m.Doubled > 0 {
		broke = append(broke, fmt.Sprintf("%d messages answered more than once", m.Doubled))
	}
	if m.FalseHandled > 0 {
		broke = append(broke, fmt.Sprintf("%d messages handled without a reply", m.FalseHandled))
	}
	for _, b := range r.BoundsMissed {
		broke = append(broke, "bound missed: "+b)
	}
	if n := r.Overlaps.AfterThaw + r.Overlaps.Other; n > 0 {
		broke = append(broke, fmt.Sprintf("%d getupdates overlapped another of their bot outside a freeze", n))
	}
	if r.Freeze != nil && r.Freeze.StrayPolls > 0 {
		broke = append(broke, fmt.Sprintf("the thawed worker polled a bot it no longer held %d times", r.Freeze.StrayPolls))
	}
	if r.EventsDone < len(r.Plan) {
		broke = append(broke, fmt.Sprintf("%d of %d planned events not done", len(r.Plan)-r.EventsDone, len(r.Plan)))
	}
	if len(broke) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRuleBroken, strings.Join(broke, "; "))
}

// repollTimes returns, sorted, the time from at until each bot was polled again by a
// process other than pid (a bot not polled again by end counts until end), and the ids of
// the bots not polled again.
func (c *chaosRun) repollTimes(bots []int, at time.Time, pid int, end time.Time) ([]time.Duration, []string) {
	var ds []time.Duration
	var missing []string
	for _, b := range bots {
		d, ok := c.watch.repolledAfter(b, at, pid)
		if !ok {
			d = end.Sub(at)
			missing = append(missing, c.bots[b].id)
		}
		ds = append(ds, d)
	}
	sortDurations(ds)
	return ds, missing
}

// analyze fills the report from what the run recorded (also for a run that failed
// part-way).
func (c *chaosRun) analyze() {
	rep := c.rep
	c.mu.Lock()
	kills, freezes, rolling := slices.Clone(c.kills), slices.Clone(c.freezes), c.rolling
	rep.EventsDone = c.done
	stored := c.stored
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		rep.Problems = append(rep.Problems, c.problems...)
		c.mu.Unlock()
	}()
	if c.watch == nil {
		return
	}
	end := c.end
	since := func(t time.Time) float64 { return t.Sub(c.start).Seconds() }

	for _, k := range kills {
		kr := KillResult{N: k.n, AtS: since(k.at), How: k.how, Victim: k.victim, PID: k.pid, NamedAccount: k.named, Nudges: k.nudges, Bots: len(k.bots)}
		ds, missing := c.repollTimes(k.bots, k.at, k.pid, end)
		kr.NotRepolled, kr.Repolled = missing, len(ds)-len(missing)
		kr.MaxMS, kr.P99MS = ms(percentile(ds, 100)), ms(percentile(ds, 99))
		kr.WithinBound = len(missing) == 0 && percentile(ds, 100) <= c.cc.KillBound
		rep.KillMaxMS = max(rep.KillMaxMS, kr.MaxMS)
		if !kr.WithinBound {
			worst := fmt.Sprintf("%v", dur(kr.MaxMS))
			if len(missing) > 0 {
				worst = fmt.Sprintf("%d bots not polled again by the end of the run (%v after the kill)", len(missing), dur(kr.MaxMS))
			}
			rep.BoundsMissed = append(rep.BoundsMissed, fmt.Sprintf("kill #%d (%s of %s): a bot's next getupdates %s after the kill, bound %v",
				k.n, k.how, k.victim, worst, c.cc.KillBound))
		}
		rep.Kills = append(rep.Kills, kr)
	}

	for _, f := range freezes {
		thaw := f.thaw
		if thaw.IsZero() {
			thaw = end
		}
		fr := &FreezeResult{AtS: since(f.at), ForS: thaw.Sub(f.at).Seconds(), Victim: f.victim, PID: f.pid, Bots: len(f.bots),
			BoundMS: ms(c.ttl + c.cc.FreezeSlack)}
		ds, missing := c.repollTimes(f.bots, f.at, f.pid, end)
		fr.NotRepolled, fr.Repolled = missing, len(ds)-len(missing)
		fr.MaxMS = ms(percentile(ds, 100))
		fr.WithinBound = len(missing) == 0 && percentile(ds, 100) <= c.ttl+c.cc.FreezeSlack
		c.watch.mu.Lock()
		for _, s := range c.watch.strays {
			if s.pid == f.pid {
				fr.StrayPolls++
				if len(fr.Strays) < 10 {
					fr.Strays = append(fr.Strays, fmt.Sprintf("bot %s at +%.1fs (lease holder pid %d)", c.bots[s.bot].id, since(s.at), s.holderPID))
				}
			}
		}
		c.watch.mu.Unlock()
		if !fr.WithinBound {
			rep.BoundsMissed = append(rep.BoundsMissed, fmt.Sprintf("the freeze of %s: a bot's next getupdates %v after SIGSTOP, bound lease ttl %v + %v",
				f.victim, dur(fr.MaxMS), c.ttl, c.cc.FreezeSlack))
		}
		rep.Freeze = fr
	}

	if rolling != nil && !rolling.to.IsZero() {
		rr := &RollResult{AtS: since(rolling.from), TookS: rolling.to.Sub(rolling.from).Seconds(), Steps: rolling.steps}
		var gaps []time.Duration
		var worst time.Duration
		for i := range c.bots {
			g := c.watch.longestGap(i, rolling.from, rolling.to)
			gaps = append(gaps, g)
			if g > worst || rr.WorstBot == "" {
				worst, rr.WorstBot = g, c.bots[i].id+" ("+c.bots[i].accountKey+")"
			}
		}
		sortDurations(gaps)
		rr.MaxGapMS, rr.P99GapMS = ms(percentile(gaps, 100)), ms(percentile(gaps, 99))
		rr.WithinBound = percentile(gaps, 100) <= c.cc.RollBound
		if !rr.WithinBound {
			rep.BoundsMissed = append(rep.BoundsMissed, fmt.Sprintf("the rolling restart: bot %s went %v without a getupdates in flight, bound %v",
				rr.WorstBot, dur(rr.MaxGapMS), c.cc.RollBound))
		}
		rep.Rolling = rr
	}

	if c.load != nil {
		c.analyzeMessages(kills, freezes, stored)
	}
	c.analyzeOverlaps(freezes)
}

// analyzeMessages counts the lost (in flight or beyond), doubled and falsely handled
// messages.
func (c *chaosRun) analyzeMessages(kills []*killRec, freezes []*freezeRec, stored map[string]string) {
	m := &c.rep.Messages
	c.watch.mu.Lock()
	pages := map[string]pageOut{}
	for _, p := range c.watch.pages {
		for _, t := range p.tokens {
			pages[t] = p
		}
	}
	c.watch.mu.Unlock()
	l := c.load
	l.mu.Lock()
	defer l.mu.Unlock()
	m.Injected, m.Unmatched, m.Refused = len(l.msgs), l.unmatched, l.refused
	detail := func(format string, a ...any) {
		if len(m.Details) < 50 {
			m.Details = append(m.Details, fmt.Sprintf(format, a...))
		}
	}
	var lat []time.Duration
	for _, msg := range l.msgs {
		bot := c.bots[msg.bot].id
		status, isStored := stored[c.storedKey(msg)]
		if msg.replies > 1 {
			m.Doubled++
			detail("message %d (bot %s) answered %d times", msg.n, bot, msg.replies)
		}
		if msg.replies == 0 && status == "handled" {
			m.FalseHandled++
			detail("message %d (bot %s) is handled in inbound_messages, but no reply reached the simulator", msg.n, bot)
		}
		if msg.replies > 0 {
			m.Answered++
			if msg.merged {
				m.Merged++
			}
			d := msg.firstReply.Sub(msg.injected)
			lat = append(lat, d)
			if !msg.textOK {
				m.Mismatched++
			}
			if d <= c.cc.AnswerWithin {
				continue
			}
			m.Lost++
			m.Late++
			m.LostBeyond++
			detail("message %d (bot %s, injected +%.1fs) answered only after %v", msg.n, bot, msg.injected.Sub(c.start).Seconds(), d.Round(time.Millisecond))
			continue
		}
		m.Lost++
		if status == statusUnknownSend {
			m.LostUnknownSend++
			if len(m.InFlightDetails) < 20 {
				m.InFlightDetails = append(m.InFlightDetails, fmt.Sprintf("message %d (bot %s, injected +%.1fs): its reply's send has an unknown outcome (a kill cut it), so it is never sent again",
					msg.n, bot, msg.injected.Sub(c.start).Seconds()))
			}
			continue
		}
		inFlight, why := c.inFlight(msg, pages, kills, freezes, isStored, status)
		if inFlight {
			m.LostInFlight++
			if len(m.InFlightDetails) < 20 {
				m.InFlightDetails = append(m.InFlightDetails, fmt.Sprintf("message %d (bot %s, injected +%.1fs) lost in flight: %s",
					msg.n, bot, msg.injected.Sub(c.start).Seconds(), why))
			}
			continue
		}
		m.LostBeyond++
		detail("message %d (bot %s, injected +%.1fs) lost BEYOND the in-flight pages: %s", msg.n, bot, msg.injected.Sub(c.start).Seconds(), why)
	}
	sortDurations(lat)
	m.LatencyP50MS, m.LatencyP99MS, m.LatencyMaxMS = ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(percentile(lat, 100))
}

// inFlight tells whether a lost message is the documented loss: handed out to a process
// that was killed (from 2 s before to InFlightWindow after) or frozen (at the hand-out or
// within the window after), and not stored.
func (c *chaosRun) inFlight(msg *chaosMsg, pages map[string]pageOut, kills []*killRec, freezes []*freezeRec, stored bool, status string) (bool, string) {
	p, out := pages[msg.token]
	if !out {
		return false, "never handed out by the simulator"
	}
	at := fmt.Sprintf("+%.3fs", p.at.Sub(c.start).Seconds())
	if stored {
		return false, fmt.Sprintf("handed out to pid %d at %s and stored (status %s), no reply", p.pid, at, status)
	}
	if p.pid == 0 {
		return false, fmt.Sprintf("handed out at %s to a process not known, not stored", at)
	}
	w := c.cc.InFlightWindow
	for _, k := range kills {
		if k.pid == p.pid && !k.at.Before(p.at.Add(-2*time.Second)) && !k.at.After(p.at.Add(w)) {
			when := fmt.Sprintf("killed %v later", k.at.Sub(p.at).Round(time.Millisecond))
			if k.at.Before(p.at) { // the server had not seen the connection close yet
				when = fmt.Sprintf("killed %v before", p.at.Sub(k.at).Round(time.Millisecond))
			}
			return true, fmt.Sprintf("handed out to %s (pid %d) at %s, %s (kill #%d, %s), not stored", k.victim, k.pid, at, when, k.n, k.how)
		}
	}
	for _, f := range freezes {
		if f.pid == p.pid && !f.at.After(p.at.Add(w)) && (f.thaw.IsZero() || !f.thaw.Before(p.at)) {
			return true, fmt.Sprintf("handed out to %s (pid %d) at %s, frozen from %+.3fs, not stored",
				f.victim, f.pid, at, f.at.Sub(p.at).Seconds())
		}
	}
	return false, fmt.Sprintf("handed out to pid %d at %s, which was not killed or frozen within %v; not stored", p.pid, at, w)
}

// analyzeOverlaps splits the simulator's getupdates overlaps by the freezes.
func (c *chaosRun) analyzeOverlaps(freezes []*freezeRec) {
	o := &c.rep.Overlaps
	o.Total = c.sim.Stats().GetUpdatesOverlaps
	counted := 0
	for _, b := range c.bots {
		st, err := c.sim.BotState(b.id)
		if err != nil || st.Overlaps == 0 {
			continue
		}
		for _, t := range st.OverlapsAt {
			counted++
			during, after := false, false
			for _, f := range freezes {
				thaw := f.thaw
				if thaw.IsZero() {
					thaw = c.end
				}
				if !t.Before(f.at) && !t.After(thaw) {
					during = true
				} else if t.After(thaw) {
					after = true
				}
			}
			switch {
			case during:
				o.WhileFrozen++
				continue
			case after:
				o.AfterThaw++
			default:
				o.Other++
			}
			if len(o.Examples) < 10 {
				o.Examples = append(o.Examples, fmt.Sprintf("bot %s at +%.3fs", b.id, t.Sub(c.start).Seconds()))
			}
		}
	}
	if rest := o.Total - counted; rest > 0 { // beyond the times the simulator keeps per bot
		o.Other += rest
		c.note("%d getupdates overlaps have no time kept; counted outside the freezes", rest)
	}
}

// processes lists the worker processes of the run.
func (c *chaosRun) processes() []ProcessResult {
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	var out []ProcessResult
	for _, p := range procs {
		pr := ProcessResult{Name: p.name, PID: p.pid, Slot: p.slot, Armed: p.armed, StartedS: p.started.Sub(c.start).Seconds(), Log: p.logPath}
		if !p.alive() {
			pr.EndedS = p.ended.Sub(c.start).Seconds()
		}
		p.mu.Lock()
		pr.Fate = p.fate
		p.mu.Unlock()
		out = append(out, pr)
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *ChaosReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as plain text tables.
func (r *ChaosReport) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "ilinkflow chaos test: %d workers, %d bots, seed %d\n", r.Workers, r.Bots, r.Seed)
	fmt.Fprintf(ew, "temporal %s, namespace %s; PostgreSQL schema %s\n", r.Temporal, r.Namespace, r.Schema)
	rate := "no bound on the rate"
	if r.Rate > 0 {
		rate = fmt.Sprintf("at most %g/s", r.Rate)
	}
	pace := fmt.Sprintf("think %v (x0.5..1.5) after each answer", dur(r.ThinkMS))
	if r.EveryMS > 0 {
		pace = fmt.Sprintf("one every %v per bot, answered or not", dur(r.EveryMS))
	}
	fmt.Fprintf(ew, "worker: poll lease ttl %v, poll session %v, shutdown grace %v; messages %s, %s, answer bound %v\n",
		dur(r.PollLeaseTTLMS), dur(r.PollSessionMS), dur(r.ShutdownGraceMS), rate, pace, dur(r.AnswerWithinMS))
	var plan []string
	for _, e := range r.Plan {
		plan = append(plan, fmt.Sprintf("%s@%.0fs", e.Kind, e.AtS))
	}
	fmt.Fprintf(ew, "plan: %s\n\n", strings.Join(plan, " "))

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kill\tat\thow\tvictim\tbots\tnext getupdates max\tp99\tbound %v\n", dur(r.KillBoundMS))
	for _, k := range r.Kills {
		bots := fmt.Sprintf("%d", k.Bots)
		if len(k.NotRepolled) > 0 {
			bots += fmt.Sprintf(" (%d not polled again)", len(k.NotRepolled))
		}
		victim := fmt.Sprintf("%s (%d)", k.Victim, k.PID)
		if k.NamedAccount != "" {
			victim += " at " + shortKey(k.NamedAccount)
		}
		if k.Nudges > 0 {
			victim += fmt.Sprintf(", %d nudges", k.Nudges)
		}
		fmt.Fprintf(tw, "%d\t+%.1fs\t%s\t%s\t%s\t%v\t%v\t%s\n", k.N, k.AtS, k.How, victim, bots, dur(k.MaxMS), dur(k.P99MS), okMissed(k.WithinBound))
	}
	if len(r.Kills) == 0 {
		fmt.Fprintln(tw, "-\t\tno kills\t\t\t\t\t")
	}
	_ = tw.Flush()
	fmt.Fprintf(ew, "max over all kills: %v\n\n", dur(r.KillMaxMS))

	if f := r.Freeze; f != nil {
		fmt.Fprintf(ew, "freeze: %s (pid %d) SIGSTOP at +%.1fs for %.1fs, held %d bots; next getupdates after SIGSTOP max %v (bound ttl + slack = %v) %s",
			f.Victim, f.PID, f.AtS, f.ForS, f.Bots, dur(f.MaxMS), dur(f.BoundMS), okMissed(f.WithinBound))
		if len(f.NotRepolled) > 0 {
			fmt.Fprintf(ew, ", %d not polled again", len(f.NotRepolled))
		}
		fmt.Fprintf(ew, "\n  after SIGCONT: getupdates overlaps %d (while frozen: %d); the thawed worker polled a bot it no longer held %d times\n",
			r.Overlaps.AfterThaw, r.Overlaps.WhileFrozen, f.StrayPolls)
		for _, s := range f.Strays {
			fmt.Fprintf(ew, "  stray poll: %s\n", s)
		}
	} else {
		fmt.Fprintln(ew, "freeze: none")
	}
	if rr := r.Rolling; rr != nil {
		var steps []string
		for _, s := range rr.Steps {
			steps = append(steps, fmt.Sprintf("%s->%s ready after %.1fs", s.Old, s.New, s.ReadyAfterS))
		}
		fmt.Fprintf(ew, "rolling restart at +%.1fs, %.1fs (%s); per bot, longest time without a getupdates in flight: max %v (bot %s), p99 %v (bound %v) %s\n",
			rr.AtS, rr.TookS, strings.Join(steps, ", "), dur(rr.MaxGapMS), rr.WorstBot, dur(rr.P99GapMS), dur(r.RollBoundMS), okMissed(rr.WithinBound))
	} else {
		fmt.Fprintln(ew, "rolling restart: not run")
	}
	fmt.Fprintln(ew)

	m := r.Messages
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue")
	fmt.Fprintf(tw, "messages injected / answered (merged into a later one's reply)\t%d / %d (%d)\n", m.Injected, m.Answered, m.Merged)
	fmt.Fprintf(tw, "latency inject -> reply p50 / p99 / max\t%v / %v / %v\n", dur(m.LatencyP50MS), dur(m.LatencyP99MS), dur(m.LatencyMaxMS))
	fmt.Fprintf(tw, "lost (no reply within %v)\t%d: in flight (documented) %d, reply's send of unknown outcome (documented, never re-sent) %d, beyond %d (of which answered late %d)\n",
		dur(r.AnswerWithinMS), m.Lost, m.LostInFlight, m.LostUnknownSend, m.LostBeyond, m.Late)
	fmt.Fprintf(tw, "doubled\t%d\n", m.Doubled)
	fmt.Fprintf(tw, "false handled\t%d\n", m.FalseHandled)
	fmt.Fprintf(tw, "replies not the echo / sends matching no message / refused\t%d / %d / %d\n", m.Mismatched, m.Unmatched, m.Refused)
	fmt.Fprintf(tw, "getupdates overlaps (simulator)\t%d: while a worker was frozen %d, after a thaw %d, outside any freeze %d\n",
		r.Overlaps.Total, r.Overlaps.WhileFrozen, r.Overlaps.AfterThaw, r.Overlaps.Other)
	fmt.Fprintf(tw, "events done\t%d of %d planned (chaos phase %.1fs)\n", r.EventsDone, len(r.Plan), r.ChaosS)
	_ = tw.Flush()

	fmt.Fprintln(ew, "\nprocesses:")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tpid\tstarted\tended\tfate")
	for _, p := range r.Processes {
		ended := "-"
		if p.EndedS != 0 {
			ended = fmt.Sprintf("%+.1fs", p.EndedS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%+.1fs\t%s\t%s\n", p.Name, p.PID, p.StartedS, ended, p.Fate)
	}
	_ = tw.Flush()

	for _, e := range r.Overlaps.Examples {
		fmt.Fprintf(ew, "overlap outside a freeze: %s\n", e)
	}
	for _, d := range m.InFlightDetails {
		fmt.Fprintf(ew, "message: %s\n", d)
	}
	if n := m.LostInFlight - len(m.InFlightDetails); n > 0 {
		fmt.Fprintf(ew, "message: … and %d more lost in flight\n", n)
	}
	for _, d := range m.Details {
		fmt.Fprintf(ew, "message: %s\n", d)
	}
	for _, b := range r.BoundsMissed {
		fmt.Fprintf(ew, "BOUND MISSED: %s\n", b)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(ew, "note: %s\n", p)
	}
	switch err := r.Verdict(); {
	case r.Failure != "":
		fmt.Fprintf(ew, "FAILED: %s\n", r.Failure)
	case err != nil:
		fmt.Fprintf(ew, "FAILED: %v\n", err)
	default:
		fmt.Fprintln(ew, "PASSED: no message lost beyond the in-flight pages, none doubled or falsely handled, every bound held")
	}
	return ew.err
}

func okMissed(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// shortKey shortens an account key for a table.
func shortKey(k string) string {
	if len(k) > 16 {
		return k[:16] + "…"
	}
	return k
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
