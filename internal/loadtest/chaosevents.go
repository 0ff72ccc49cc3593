package loadtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"
)

// errUntil is until's error when its bound passed.
var errUntil = errors.New("bound passed")

// until waits until ok holds, re-checking whenever the watch changes (and at least every
// 250 ms), bounded by within. It fails at once when a worker exits unexpectedly.
func (c *chaosRun) until(ctx context.Context, within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for {
		if ok() {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errUntil
		}
		tm := time.NewTimer(min(left, 250*time.Millisecond))
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case err := <-c.crashed:
			tm.Stop()
			return err
		case <-c.watch.changed:
		case <-tm.C:
		}
		tm.Stop()
	}
}

// sleep lets d pass (a planned length of the chaos: a freeze, a restart delay, a settle
// window; not a wait for a condition), failing at once when a worker exits unexpectedly.
func (c *chaosRun) sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-c.crashed:
		return err
	case <-tm.C:
		return nil
	}
}

// events runs the plan, each event at its instant or once the one before is done.
func (c *chaosRun) events(ctx context.Context) error {
	for i, ev := range c.plan {
		at := c.start.Add(time.Duration(ev.AtS * float64(time.Second)))
		if err := c.sleep(ctx, time.Until(at)); err != nil {
			return err
		}
		c.log.Info("event", "n", i+1, "of", len(c.plan), "kind", ev.Kind, "at", time.Since(c.start).Round(time.Millisecond))
		var err error
		switch ev.Kind {
		case KillRandom:
			err = c.randomKill(ctx)
		case KillPageLeaves:
			err = c.pageLeavesKill(ctx)
		case KillPollPickedUp, KillSendInFlight:
			err = c.faultKill(ctx, ev.Kind)
		case eventFreeze:
			err = c.freeze(ctx)
		}
		if err != nil {
			return fmt.Errorf("event %d (%s): %w", i+1, ev.Kind, err)
		}
	}
	if d := time.Since(c.start); d > c.cc.Duration {
		c.note("the planned events took %v, longer than the duration (%v)", d.Round(time.Second), c.cc.Duration)
	}
	return nil
}

// pickSlot picks a random worker slot (the seed's choice) and returns its process.
func (c *chaosRun) pickSlot() *chaosProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slots[c.planRng.IntN(len(c.slots))]
}

// eventDone counts a done event.
func (c *chaosRun) eventDone() {
	c.mu.Lock()
	c.done++
	c.mu.Unlock()
}

// leasesOf returns the bots (indices) whose poll lease names pid as its holder.
func (c *chaosRun) leasesOf(ctx context.Context, pid int) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, "SELECT account_key, holder FROM poll_leases WHERE holder IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("read the poll leases: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var key, holder string
		if err := rows.Scan(&key, &holder); err != nil {
			return nil, fmt.Errorf("read the poll leases: %w", err)
		}
		if i, ok := c.botByAccount[key]; ok && holderPID(holder) == pid {
			out = append(out, i)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the poll leases: %w", err)
	}
	sort.Ints(out)
	return out, nil
}

// awaitRepolled waits, bounded by RecoverWithin, until each of bots was polled again
// after at by a process other than pid; past the bound it notes the bots left and goes
// on (their gap is measured until they are polled or the run ends). Its error is that of
// ctx, or a worker's unexpected exit.
func (c *chaosRun) awaitRepolled(ctx context.Context, what string, at time.Time, pid int, bots []int) error {
	pending := func() int {
		n := 0
		for _, b := range bots {
			if _, ok := c.watch.repolledAfter(b, at, pid); !ok {
				n++
			}
		}
		return n
	}
	err := c.until(ctx, c.cc.RecoverWithin, func() bool { return pending() == 0 })
	if errors.Is(err, errUntil) {
		c.note("%s: %d of %d bots not polled again within %v; going on", what, pending(), len(bots), c.cc.RecoverWithin)
		return nil
	}
	return err
}

// freeze SIGSTOPs a random worker for Freeze, then SIGCONTs it; from then on its
// getupdates are checked against the lease holder.
func (c *chaosRun) freeze(ctx context.Context) error {
	p := c.pickSlot()
	bots, err := c.leasesOf(ctx, p.pid)
	if err != nil {
		return err
	}
	rec := &freezeRec{victim: p.name, pid: p.pid, bots: bots}
	c.mu.Lock()
	c.freezes = append(c.freezes, rec)
	c.mu.Unlock()
	rec.at = time.Now()
	if err := p.freeze(); err != nil {
		return err
	}
	c.log.Info("frozen (SIGSTOP)", "worker", p.name, "pid", p.pid, "bots", len(bots), "for", c.cc.Freeze)
	serr := c.sleep(ctx, c.cc.Freeze)
	c.watch.watchThawed(p.pid)
	rec.thaw = time.Now()
	if err := p.thaw(); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	c.log.Info("thawed (SIGCONT)", "worker", p.name, "pid", p.pid)
	if err := c.awaitRepolled(ctx, "the freeze", rec.at, rec.pid, rec.bots); err != nil {
		return err
	}
	c.eventDone()
	return nil
}

// rollingRestart restarts every worker as Kubernetes does: SIGTERM one, start its
// replacement, wait until /readyz is 200, next; then until every bot is polled.
func (c *chaosRun) rollingRestart(ctx context.Context) error {
	rec := &rollRec{from: time.Now()}
	c.mu.Lock()
	c.rolling = rec
	c.mu.Unlock()
	c.log.Info("rolling restart", "workers", len(c.slots))
	sctx, stopStalls := context.WithTimeout(ctx, stallWatchFor)
	go func() {
		defer stopStalls()
		c.describeStalls(sctx, rec.from)
	}()
	for i := range c.slots {
		c.mu.Lock()
		old := c.slots[i]
		c.mu.Unlock()
		step := time.Now()
		old.setExpected("SIGTERM (rolling restart)")
		if err := old.signal(syscall.SIGTERM); err != nil {
			return err
		}
		rec.olds = append(rec.olds, old)
		p, err := c.startSlot(i)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.slots[i] = p
		c.mu.Unlock()
		if err := c.waitReady(ctx, p, c.cfg.ReadyWithin); err != nil {
			return err
		}
		rec.steps = append(rec.steps, RollStep{Old: old.name, OldPID: old.pid, New: p.name, NewPID: p.pid, ReadyAfterS: time.Since(step).Seconds()})
		c.log.Info("replaced", "old", old.name, "new", p.name, "ready_after", time.Since(step).Round(time.Millisecond))
	}
	if err := c.until(ctx, c.cfg.ReadyWithin, func() bool { return c.watch.polledNow() == len(c.bots) }); err != nil {
		if !errors.Is(err, errUntil) {
			return err
		}
		c.note("rolling restart: %d of %d bots polled %v after the last replacement was ready", c.watch.polledNow(), len(c.bots), c.cfg.ReadyWithin)
	}
	rec.to = time.Now()
	for _, old := range rec.olds {
		if err := old.waitExit(c.grace + 30*time.Second); err != nil {
			c.note("rolling restart: %v", err)
		} else if old.exitErr != nil {
			c.note("rolling restart: %s exited %v after SIGTERM, want 0", old.name, old.exitErr)
		}
	}
	return nil
}
