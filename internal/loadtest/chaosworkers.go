package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// setupChaosSimulator serves the simulator on loopback behind the watch.
func (c *chaosRun) setupChaosSimulator(seed uint64) {
	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = c.cfg.LongPollHold
	cfg.ThrottleBurst = 0 // the sim clock stands still (see setupSimulator)
	c.sim = ilinksim.New(cfg)
	c.watch = newSimWatch(c, c.sim.Handler(), c.cfg.Bots)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("loadtest: listen on loopback: %v", err)) // no loopback: nothing can run
	}
	c.watch.pids = newPIDResolver(c.livePIDs)
	c.watch.pids.simPort = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: c.watch, ReadHeaderTimeout: 10 * time.Second, ConnState: c.watch.pids.connState,
		ConnContext: ilinksim.ConnContext}
	go func() { _ = srv.Serve(ln) }()
	c.onCleanup(func() { _ = srv.Close() })
	c.simURL = "http://" + ln.Addr().String()
	c.ctl = ilinksim.NewControl(c.simURL, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	c.log.Info("simulator serving", "url", c.simURL, "long_poll_hold", c.cfg.LongPollHold, "seed", seed)
}

// livePIDs lists the worker processes that have not exited.
func (c *chaosRun) livePIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, p := range c.procs {
		if p.alive() {
			out = append(out, p.pid)
		}
	}
	return out
}

// prepareWorker builds (or checks) the fault-point worker and sets its environment.
func (c *chaosRun) prepareWorker(ctx context.Context) error {
	c.bin = c.cfg.WorkerBin
	if c.bin == "" {
		began := time.Now()
		var err error
		if c.bin, err = BuildFaultpointWorker(ctx, c.workDir); err != nil {
			return err
		}
		c.log.Info("worker built", "bin", c.bin, "tags", FaultpointsTag, "took", time.Since(began).Round(time.Millisecond))
	} else if ok, err := HasFaultpoints(c.bin); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the worker %s was not built with -tags %s: its fault points do nothing", c.bin, FaultpointsTag)
	}
	c.rep.WorkerBin = c.bin
	env := c.workerEnv()
	// The product's shutdown grace (the rolling restart is measured as operators run it),
	// unless the run's own settings give one; admin endpoints (/readyz) on a port of
	// their own.
	if _, given := c.cfg.WorkerEnv["ILINKFLOW_SHUTDOWN_GRACE"]; !given {
		delete(env, "ILINKFLOW_SHUTDOWN_GRACE")
	}
	if _, given := c.cfg.WorkerEnv[gateway.EnvAdminAddr]; !given {
		env[gateway.EnvAdminAddr] = "127.0.0.1:0"
	}
	delete(env, envFaultpoint)
	delete(env, envFaultpointAfter)
	cfg, err := gateway.ConfigFromEnv(func(k string) string { return env[k] }, nil)
	if err != nil {
		return fmt.Errorf("worker settings: %w", err)
	}
	c.env, c.ttl, c.grace = env, cfg.PollLeaseTTL, cfg.ShutdownGrace
	c.rep.PollLeaseTTLMS, c.rep.PollSessionMS, c.rep.ShutdownGraceMS = ms(cfg.PollLeaseTTL), ms(cfg.PollSession), ms(cfg.ShutdownGrace)
	c.rep.FreezeBoundMS = ms(c.ttl + c.cc.FreezeSlack)
	return nil
}

// startWorkers starts the workers, waits until each is ready and every bot is polled.
func (c *chaosRun) startWorkers(ctx context.Context) error {
	c.slots = make([]*chaosProc, c.cc.Workers)
	c.starts = make([]int, c.cc.Workers)
	for i := range c.slots {
		p, err := c.startSlot(i)
		if err != nil {
			return err
		}
		c.slots[i] = p
	}
	errs := make(chan error, len(c.slots))
	for _, p := range c.slots {
		go func() { errs <- c.waitReady(ctx, p, c.cfg.ReadyWithin) }()
	}
	for range c.slots {
		if err := <-errs; err != nil {
			return err
		}
	}
	began := time.Now()
	if err := c.until(ctx, c.cfg.ReadyWithin, func() bool { return c.watch.polledNow() == len(c.bots) }); err != nil {
		return fmt.Errorf("not every bot polled: %d of %d have a getupdates in flight after %v: %w", c.watch.polledNow(), len(c.bots), c.cfg.ReadyWithin, err)
	}
	c.rep.ReadyS = time.Since(began).Seconds()
	c.log.Info("every bot polled", "bots", len(c.bots), "workers", len(c.slots))
	return nil
}

// startSlot starts the next process of slot i (0-based).
func (c *chaosRun) startSlot(i int) (*chaosProc, error) {
	c.mu.Lock()
	c.starts[i]++
	name := fmt.Sprintf("w%d", i+1)
	if n := c.starts[i]; n > 1 {
		name += "." + strconv.Itoa(n)
	}
	c.mu.Unlock()
	return c.startProc(name, i+1, nil)
}
