package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// holderPID returns the pid of the process holding the bot's poll lease (0: none).
func (c *chaosRun) holderPID(ctx context.Context, accountKey string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var holder *string
	err := c.pool.QueryRow(ctx, "SELECT holder FROM poll_leases WHERE account_key = $1", accountKey).Scan(&holder)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the poll lease of %s: %w", accountKey, err)
	case holder == nil:
		return 0, nil
	}
	return holderPID(*holder), nil
}

// holderPID reads the pid of a lease holder "host/pid/random" (0 when not that shape).
func holderPID(holder string) int {
	parts := strings.Split(holder, "/")
	if len(parts) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// killNow SIGKILLs p (its leases read right before) and records the kill.
func (c *chaosRun) killNow(ctx context.Context, p *chaosProc, how string) (*killRec, error) {
	bots, err := c.leasesOf(ctx, p.pid)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	rec := &killRec{n: len(c.kills) + 1, how: how, victim: p.name, pid: p.pid, bots: bots}
	c.kills = append(c.kills, rec)
	c.mu.Unlock()
	rec.at = time.Now()
	if err := p.kill(fmt.Sprintf("SIGKILL (kill #%d, %s)", rec.n, how)); err != nil {
		return rec, err
	}
	c.log.Info("killed", "n", rec.n, "how", how, "worker", p.name, "pid", p.pid, "bots", len(bots))
	return rec, nil
}

// randomKill SIGKILLs a random worker now.
func (c *chaosRun) randomKill(ctx context.Context) error {
	rec, err := c.killNow(ctx, c.pickSlot(), KillRandom)
	if err != nil {
		return err
	}
	return c.afterKill(ctx, rec, true)
}

// pageLeavesKill arms the simulator's watch: the next getupdates answer that carries
// messages for a bot whose lease a worker holds has that worker SIGKILLed before it is
// written.
func (c *chaosRun) pageLeavesKill(ctx context.Context) error {
	arm := &pageArm{done: make(chan struct{})}
	c.mu.Lock()
	c.pageArm = arm
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		arm.fired = true // disarmed
		c.pageArm = nil
		c.mu.Unlock()
	}()
	tm := time.NewTimer(c.cc.ArmWithin)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-c.crashed:
		return err
	case <-tm.C:
		c.note("page-leaves kill: no page with messages left for a worker's bot within %v; not done", c.cc.ArmWithin)
		return nil
	case <-arm.done:
	}
	if arm.err != nil {
		return arm.err
	}
	return c.afterKill(ctx, arm.rec, true)
}

// onPageLeaving is called by the watch just before an answer with messages for bot is
// written: an armed page-leaves kill SIGKILLs the worker holding the bot's lease first.
func (c *chaosRun) onPageLeaving(ctx context.Context, bot int) {
	c.mu.Lock()
	arm := c.pageArm
	c.mu.Unlock()
	if arm == nil {
		return
	}
	holder, err := c.holderPID(ctx, c.bots[bot].accountKey)
	if err != nil || holder == 0 {
		return
	}
	c.mu.Lock()
	var victim *chaosProc
	for _, p := range c.slots {
		if p.pid == holder && p.alive() && !p.isFrozen() {
			victim = p
		}
	}
	if victim == nil || arm.fired {
		c.mu.Unlock()
		return
	}
	arm.fired = true
	c.mu.Unlock()
	arm.rec, arm.err = c.killNow(ctx, victim, KillPageLeaves)
	close(arm.done)
}

// faultKill starts an extra worker armed with the fault point, which kills itself at the
// point once armed; the kill is measured from the line it prints. The extra process is
// not restarted: the workers are again as many as before.
func (c *chaosRun) faultKill(ctx context.Context, point string) error {
	c.mu.Lock()
	c.extras++
	name := fmt.Sprintf("x%d", c.extras)
	after := c.cc.ArmAfterMin + time.Duration(c.planRng.Float64()*float64(c.cc.ArmAfterMax-c.cc.ArmAfterMin))
	c.mu.Unlock()
	after = after.Round(time.Millisecond)
	p, err := c.startProc(name, 0, map[string]string{envFaultpoint: point, envFaultpointAfter: after.String()})
	if err != nil {
		return err
	}
	p.setExpected("killed itself at " + point)
	tm := time.NewTimer(after + c.cc.ArmWithin)
	defer tm.Stop()
	// A poll activity is picked up when one ends: at a session's end, after a failure,
	// when a worker dies. A bot written to all along keeps its poll activity, so once the
	// point is armed the harness nudges: every second a getupdates (of whichever bot asks
	// next) is answered 502 once, as iLink may; that bot's poll activity ends, and its
	// poller schedules the next one after its short backoff, to be picked up by any worker.
	var nudge <-chan time.Time
	if point == KillPollPickedUp {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		nudge = t.C
	}
	nudges := 0
wait:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-c.crashed:
			return err
		case <-tm.C:
			c.note("%s kill: worker %s (armed after %v, %d nudges) did not reach the point within %v; stopped it, not done", point, name, after, nudges, c.cc.ArmWithin)
			p.mu.Lock()
			p.fate = "not hit; stopped (SIGTERM)"
			p.mu.Unlock()
			_ = p.signal(syscall.SIGTERM)
			return p.waitExit(c.grace + 30*time.Second)
		case <-nudge:
			if time.Since(p.started) < after || len(c.sim.Faults()) > 0 {
				continue
			}
			if _, err := c.sim.AddFault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: http.StatusBadGateway}); err != nil {
				return fmt.Errorf("nudge a poll activity: %w", err)
			}
			nudges++
		case <-p.out.faultCh:
			break wait
		case <-p.exited:
			if p.out.hit() == nil {
				return fmt.Errorf("the armed worker %s exited without reaching %s: %s", name, point, p.exitDescription())
			}
			break wait
		}
	}
	c.sim.ClearFaults()
	hit := p.out.hit()
	bots, err := c.leasesOf(ctx, p.pid) // right after: its leases are still in its name
	if err != nil {
		return err
	}
	if i, ok := c.botByAccount[hit.account]; ok && !slices.Contains(bots, i) {
		bots = append(bots, i)
	}
	c.mu.Lock()
	rec := &killRec{n: len(c.kills) + 1, how: point, at: hit.at, victim: name, pid: p.pid, bots: bots, named: hit.account, nudges: nudges}
	c.kills = append(c.kills, rec)
	c.mu.Unlock()
	if err := p.waitExit(30 * time.Second); err != nil {
		return err
	}
	c.log.Info("killed itself", "n", rec.n, "point", point, "worker", name, "pid", p.pid, "account", hit.account, "bots", len(bots),
		"after_start", hit.at.Sub(p.started).Round(time.Millisecond))
	return c.afterKill(ctx, rec, false)
}

// afterKill restarts the victim's slot RestartAfter after the kill (restart) and waits
// (bounded by RecoverWithin) until every affected bot is polled again.
func (c *chaosRun) afterKill(ctx context.Context, rec *killRec, restart bool) error {
	restarted := make(chan error, 1)
	if restart {
		slot := c.slotOf(rec.pid)
		go func() {
			if err := c.sleep(ctx, time.Until(rec.at.Add(c.cc.RestartAfter))); err != nil {
				restarted <- err
				return
			}
			p, err := c.startSlot(slot)
			if err != nil {
				restarted <- err
				return
			}
			c.mu.Lock()
			c.slots[slot] = p
			c.mu.Unlock()
			restarted <- c.waitReady(ctx, p, c.cfg.ReadyWithin)
		}()
	} else {
		restarted <- nil
	}
	werr := c.awaitRepolled(ctx, fmt.Sprintf("kill #%d (%s)", rec.n, rec.how), rec.at, rec.pid, rec.bots)
	if err := <-restarted; err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	c.eventDone()
	return nil
}

// slotOf is the slot index of the process with pid (its slot keeps it until replaced).
func (c *chaosRun) slotOf(pid int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.slots {
		if p.pid == pid {
			return i
		}
	}
	return 0
}
