package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func (p *crashProc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// crashLog keeps a process's stderr and notices the line that says it is ready.
type crashLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	ready   chan struct{}
	isReady bool
}

func (l *crashLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.isReady {
		l.partial = append(l.partial, p...)
		if bytes.Contains(l.partial, []byte(crashReadyLogLine)) {
			l.isReady = true
			close(l.ready)
			l.partial = nil
		} else if i := bytes.LastIndexByte(l.partial, '\n'); i >= 0 {
			l.partial = append([]byte(nil), l.partial[i+1:]...)
		}
	}
	return len(p), nil
}

func (l *crashLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type crashWorker struct {
	t   *testing.T
	bin string
	env []string
	tap *crashTap

	mu    sync.Mutex
	procs []*crashProc
	kills int

	// faults is held by a kill and its restart, and by a fault (outage, Temporal restart)
	// until the worker recovered from it, so that each comes at a moment of its own.
	faults sync.Mutex
}

// start runs a new worker process with the same configuration and waits until it has
// reconciled (its ready point).
func (w *crashWorker) start() error {
	w.mu.Lock()
	p := &crashProc{index: len(w.procs) + 1, log: &crashLog{ready: make(chan struct{})}, exited: make(chan struct{})}
	p.cmd = exec.Command(w.bin)
	p.cmd.Env = w.env
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	w.tap.setEpoch(p.index)
	if err := p.cmd.Start(); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("start worker process #%d: %w", p.index, err)
	}
	p.pid = p.cmd.Process.Pid
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()

	tm := time.NewTimer(crashReadyWithin)
	defer tm.Stop()
	select {
	case <-p.log.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("worker process #%d (pid %d) exited before it was ready: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	case <-tm.C:
		return fmt.Errorf("worker process #%d (pid %d) not ready within %v", p.index, p.pid, crashReadyWithin)
	}
}

func (w *crashWorker) current() *crashProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.procs[len(w.procs)-1]
}

// kill SIGKILLs the running process and waits until it is gone.
func (w *crashWorker) kill() error {
	p := w.current()
	if p.hasExited() {
		return fmt.Errorf("worker process #%d (pid %d) exited by itself before the kill: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	}
	w.mu.Lock()
	p.killed = true
	w.kills++
	w.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL worker process #%d: %w", p.index, err)
	}
	<-p.exited
	return nil
}

// killLoop kills the worker at random moments and restarts it each time, until the
// stream is over and at least crashMinKills kills happened. A kill comes after a random
// uptime, or, for two kills in three, earlier: a few milliseconds (random) after the next
// page hand-out or sendmessage, where a crash hurts most (before a commit, between a
// transmission and its outcome).
func (w *crashWorker) killLoop(ctx context.Context, r *mrand.Rand, streamOver <-chan struct{}) error {
	for {
		over := false
		select {
		case <-streamOver:
			over = true
		default:
		}
		if over && w.killCount() >= crashMinKills {
			return nil
		}
		// Uptimes both shorter and longer than the poll activity's heartbeat timeout
		// (20s): a kill often lands before the killed poll was even retried.
		const minUp = 1500 * time.Millisecond
		up := minUp + crashRandDur(r, 20*time.Second)
		if over {
			up = minUp + crashRandDur(r, 3500*time.Millisecond)
		}
		// A triggered kill waits longer for its moment: after a kill nothing is fetched
		// (so nothing is sent) until the killed poll's heartbeat times out.
		kind := []string{crashOnTimer, crashOnPage, crashOnSend}[r.IntN(3)]
		if over {
			kind = crashOnTimer // no more messages: no page or send may come
		}
		var offset time.Duration
		switch kind {
		case crashOnPage:
			// Before, during or just after the page's commit (about 1ms a message).
			offset, up = crashRandDur(r, 150*time.Millisecond), up+10*time.Second
		case crashOnSend:
			offset, up = crashRandDur(r, 3*time.Millisecond), up+10*time.Second
		}
		started := time.Now()
		if err := crashPause(ctx, minUp); err != nil {
			return err
		}
		// Once the stream is over and enough kills happened, the last restart stands.
		var enough <-chan struct{}
		if w.killCount() >= crashMinKills {
			enough = streamOver
		}
		moment, err := w.awaitKillMoment(ctx, kind, up-minUp, offset, enough)
		if err != nil || moment == momentStopped {
			return err
		}
		how := fmt.Sprintf("after %v up", up.Round(time.Millisecond))
		if moment == momentTriggered {
			how = fmt.Sprintf("%v after a %s, %v up", offset, kind, time.Since(started).Round(time.Millisecond))
		}
		if !w.faults.TryLock() {
			w.t.Logf("kill skipped (%s): a fault is under way", how)
			continue
		}
		if err := w.killAndRestart(ctx, r, how); err != nil {
			w.faults.Unlock()
			return err
		}
		w.faults.Unlock()
	}
}

// crashMoment is how the wait for a kill's moment ended.
type crashMoment int

const (
	momentTimer     crashMoment = iota // the wait elapsed (a triggered kill's moment did not come)
	momentTriggered                    // the kind's trigger fired, and the offset passed
	momentStopped                      // stop was closed: no kill
)

// awaitKillMoment arms the tap for kind (nothing for crashOnTimer) and waits for what comes
// first: the trigger (then offset more), wait elapsing, or stop closing (nil: never). The
// tap is disarmed when it returns.
func (w *crashWorker) awaitKillMoment(ctx context.Context, kind string, wait, offset time.Duration, stop <-chan struct{}) (crashMoment, error) {
	var trigger <-chan struct{}
	if kind != crashOnTimer {
		trigger = w.tap.arm(kind)
	}
	defer w.tap.disarm()
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-stop:
		return momentStopped, nil
	case <-tm.C:
		return momentTimer, nil
	case <-trigger:
		return momentTriggered, crashPause(ctx, offset)
	case <-ctx.Done():
		return momentStopped, ctx.Err()
	}
}

// killAndRestart SIGKILLs the running worker and starts the next one after a short random
// pause.
func (w *crashWorker) killAndRestart(ctx context.Context, r *mrand.Rand, how string) error {
	if err := w.kill(); err != nil {
		return err
	}
	p := w.current()
	w.t.Logf("kill %d: SIGKILLed worker process #%d (pid %d) %s", w.killCount(), p.index, p.pid, how)
	if err := crashPause(ctx, crashRandDur(r, 1500*time.Millisecond)); err != nil {
		return err
	}
	return w.start()
}

// crashFaults is what the faults did.
type crashFaults struct {
	outage, outageRecovery         time.Duration // cut for; first getupdates after the restore
	refusals                       int64         // connections the proxy refused while cut
	cutPage                        int           // messages of the page whose commit the cut hit
	heldPages, heldMsgs            int           // handed out while PostgreSQL was cut off
	temporalDown, temporalRecovery time.Duration // halted for (until it answered again); first getupdates after
}

func (f crashFaults) String() string {
	return fmt.Sprintf("PostgreSQL cut for %v at the hand-out of a page of %d messages (%d connections refused; %d more pages of %d messages handed out meanwhile), "+
		"the worker fetched again %v after the restore; Temporal dev server down for %v, the worker fetched again %v after it was back",
		f.outage.Round(time.Millisecond), f.cutPage, f.refusals, f.heldPages, f.heldMsgs, f.outageRecovery.Round(time.Millisecond),
		f.temporalDown.Round(time.Millisecond), f.temporalRecovery.Round(time.Millisecond))
}

// faultLoop cuts PostgreSQL off from the worker for crashOutage once crashOutageAt
// messages were injected, then restarts the Temporal dev server once crashTemporalAt
// were; each time it waits until the worker fetches again, and no kill happens meanwhile.
func (w *crashWorker) faultLoop(ctx context.Context, rig *procRig, count *atomic.Int64, out *crashFaults) error {
	if err := crashAwait(ctx, crashRecoverWithin+3*time.Minute, func() bool { return count.Load() >= crashOutageAt }); err != nil {
		return fmt.Errorf("waiting for message %d: %w", crashOutageAt, err)
	}
	w.faults.Lock()
	// The cut comes as a page is handed out, before the worker has it: its commit meets
	// the outage (the case a gateway must not lose).
	var page crashPage
	select {
	case page = <-w.tap.armFault():
	case <-time.After(crashRecoverWithin):
		w.faults.Unlock()
		return fmt.Errorf("no page handed out within %v after message %d", crashRecoverWithin, crashOutageAt)
	case <-ctx.Done():
		w.faults.Unlock()
		return ctx.Err()
	}
	refusedBefore := rig.dbProxy.Refusals()
	rig.dbProxy.Cut()
	cut := time.Now()
	out.cutPage = len(page.ids)
	w.t.Logf("PostgreSQL outage: the worker's connections are cut as getupdates #%d hands out %d messages (message %d injected, worker process #%d)",
		page.seq, len(page.ids), count.Load(), w.current().index)
	if err := crashPause(ctx, crashOutage); err != nil {
		rig.dbProxy.Restore()
		w.faults.Unlock()
		return err
	}
	rig.dbProxy.Restore()
	restored := time.Now()
	out.outage, out.refusals = restored.Sub(cut), rig.dbProxy.Refusals()-refusedBefore
	out.heldPages, out.heldMsgs = w.tap.pagesBetween(cut, restored)
	w.t.Logf("PostgreSQL outage over after %v (%d connections refused; %d pages of %d messages handed out meanwhile)",
		out.outage.Round(time.Millisecond), out.refusals, out.heldPages, out.heldMsgs)
	err := w.awaitFetch(ctx, restored)
	out.outageRecovery = time.Since(restored)
	w.faults.Unlock()
	if err != nil {
		return fmt.Errorf("after the PostgreSQL outage: %w", err)
	}
	w.t.Logf("the worker fetched again %v after PostgreSQL came back", out.outageRecovery.Round(time.Millisecond))

	if err := crashAwait(ctx, crashRecoverWithin+3*time.Minute, func() bool { return count.Load() >= crashTemporalAt }); err != nil {
		return fmt.Errorf("waiting for message %d: %w", crashTemporalAt, err)
	}
	w.faults.Lock()
	defer w.faults.Unlock()
	halted := time.Now()
	w.t.Logf("Temporal restart: halting the dev server (message %d injected, worker process #%d)", count.Load(), w.current().index)
	if err := rig.dev.Halt(); err != nil {
		return fmt.Errorf("halt the dev server: %w", err)
	}
	if err := crashPause(ctx, crashTemporalDown); err != nil {
		return err
	}
	if err := rig.dev.Restart(ctx); err != nil {
		return fmt.Errorf("restart the dev server: %w", err)
	}
	back := time.Now()
	out.temporalDown = back.Sub(halted)
	w.t.Logf("Temporal dev server back after %v on %s", out.temporalDown.Round(time.Millisecond), rig.dev.HostPort)
	err = w.awaitFetch(ctx, back)
	out.temporalRecovery = time.Since(back)
	if err != nil {
		return fmt.Errorf("after the Temporal restart: %w", err)
	}
	w.t.Logf("the worker fetched again %v after the Temporal dev server was back", out.temporalRecovery.Round(time.Millisecond))
	return nil
}

// awaitFetch waits until the running worker makes a getupdates request after since.
func (w *crashWorker) awaitFetch(ctx context.Context, since time.Time) error {
	p := w.current()
	err := crashAwait(ctx, crashRecoverWithin, func() bool { return w.tap.fetchedSince(since) || p.hasExited() })
	if p.hasExited() {
		return fmt.Errorf("worker process #%d (pid %d) exited: %v\n%s", p.index, p.pid, p.exitErr, crashTail(p.log.String(), 40))
	}
	if err != nil {
		return fmt.Errorf("no getupdates within %v: %w", crashRecoverWithin, err)
	}
	return nil
}

// crashAwait waits until cond holds, checking it every 50 ms, for at most within.
func crashAwait(ctx context.Context, within time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func (w *crashWorker) killCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kills
}

func (w *crashWorker) processes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.procs)
}

// killedEpochs are the processes the test SIGKILLed.
func (w *crashWorker) killedEpochs() map[int]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int]bool{}
	for _, p := range w.procs {
		if p.killed {
			out[p.index] = true
		}
	}
	return out
}

// stop ends the running process gracefully (SIGTERM), as an operator would.
func (w *crashWorker) stop() {
	w.mu.Lock()
	if len(w.procs) == 0 {
		w.mu.Unlock()
		return
	}
	p := w.procs[len(w.procs)-1]
	w.mu.Unlock()
	if p.hasExited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	tm := time.NewTimer(30 * time.Second)
	defer tm.Stop()
	select {
	case <-p.exited:
		if p.exitErr != nil {
			w.t.Errorf("worker process #%d did not stop cleanly on SIGTERM: %v\n%s", p.index, p.exitErr, crashTail(p.log.String(), 40))
		}
	case <-tm.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		w.t.Errorf("worker process #%d did not stop within 30s of SIGTERM", p.index)
	}
}

// launch starts the worker for the test: it is stopped when the test ends (before the
// server, the schema and the namespace go away), and its processes' logs are printed when
// the test failed or crashLogsEnv is set.
func (w *crashWorker) launch() {
	w.t.Helper()
	w.t.Cleanup(w.stop)
	w.t.Cleanup(func() {
		if w.t.Failed() || os.Getenv(crashLogsEnv) != "" {
			w.dumpLogs()
		}
	})
	if err := w.start(); err != nil {
		w.t.Fatal(err)
	}
}

// dumpLogs prints the stderr of every process (the tail of each).
func (w *crashWorker) dumpLogs() {
	w.mu.Lock()
	procs := append([]*crashProc(nil), w.procs...)
	killed := map[*crashProc]bool{}
	for _, p := range procs {
		killed[p] = p.killed
	}
	w.mu.Unlock()
	for _, p := range procs {
		how := "running"
		switch {
		case killed[p]:
			how = "SIGKILLed"
		case p.hasExited():
			how = fmt.Sprintf("exited: %v", p.exitErr)
		}
		w.t.Logf("===== worker process #%d (pid %d, %s) stderr (tail) =====\n%s", p.index, p.pid, how, crashTail(p.log.String(), 200))
	}
}

func crashTail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = append([]string{fmt.Sprintf("... (%d earlier lines)", len(parts)-lines)}, parts[len(parts)-lines:]...)
	}
	return strings.Join(parts, "\n")
}

// crashAgent replies once to every window that gets an agent session. The update id and
// the request id are derived from the window, so a retry after a kill is idempotent.
type crashAgent struct {
	tc      client.Client
	st      *store.Store
	inst    wfapi.Installation
	account string

	mu       sync.Mutex
	seen     map[int64]bool   // windows a reply was started for
	done     map[int64]string // outcome of each finished reply
	lastErr  map[int64]string // the latest transient error of a reply still retrying
	inflight int
	wg       sync.WaitGroup
}
