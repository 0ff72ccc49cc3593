package loadtest

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
)

// FaultpointsTag is the build tag of a worker whose fault points kill it
// (internal/faultpoint).
const FaultpointsTag = "faultpoints"

// BuildFaultpointWorker builds the worker command with -tags faultpoints into dir and
// returns the binary's path. It runs `go build` in the current directory, which must be
// inside this module.
func BuildFaultpointWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker-faultpoints")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", FaultpointsTag, "-o", bin, WorkerPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the worker with -tags %s (%s): %w\n%s", FaultpointsTag, WorkerPackage, err, out)
	}
	return bin, nil
}

// HasFaultpoints reports whether the binary was built with -tags faultpoints (from its
// build information).
func HasFaultpoints(bin string) (bool, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false, fmt.Errorf("read the build information of %s: %w", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), FaultpointsTag) {
			return true, nil
		}
	}
	return false, nil
}

// Environment variables of the fault points (internal/faultpoint).
const (
	envFaultpoint      = "ILINKFLOW_FAULTPOINT"
	envFaultpointAfter = "ILINKFLOW_FAULTPOINT_AFTER"
)

// faultHit is the line a worker printed before it killed itself at a fault point.
type faultHit struct {
	point, account string
	at             time.Time // when the harness read the line
}

// parseFaultLine reads `faultpoint: killing the process at <point> (account <key>)`.
func parseFaultLine(line string) (faultHit, bool) {
	rest, ok := strings.CutPrefix(line, faultpoint.Line)
	if !ok {
		return faultHit{}, false
	}
	point, detail, _ := strings.Cut(rest, " ")
	account := strings.TrimSuffix(strings.TrimPrefix(detail, "(account "), ")")
	return faultHit{point: point, account: account}, point != ""
}

// chaosLog writes a worker's output to its log file and notices the lines the harness
// needs: the admin address (JSON log "serving admin HTTP") and a fault point's line.
type chaosLog struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	admin   string
	adminCh chan struct{} // closed once admin is known
	fault   *faultHit
	faultCh chan struct{} // closed once a fault point's line was read
	tail    []string
}

func newChaosLog(w io.Writer) *chaosLog {
	return &chaosLog{w: w, adminCh: make(chan struct{}), faultCh: make(chan struct{})}
}

func (l *chaosLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return l.w.Write(p)
}

func (l *chaosLog) line(s string) {
	l.tail = append(l.tail, s)
	if len(l.tail) > 40 {
		l.tail = l.tail[len(l.tail)-40:]
	}
	if h, ok := parseFaultLine(s); ok && l.fault == nil {
		h.at = time.Now()
		l.fault = &h
		close(l.faultCh)
		return
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(s), &rec) == nil && rec.Msg == "serving admin HTTP" && l.admin == "" {
		l.admin = rec.Addr
		close(l.adminCh)
	}
}

func (l *chaosLog) adminAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.admin
}

func (l *chaosLog) hit() *faultHit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fault
}

func (l *chaosLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, "\n")
}

// chaosProc is one worker process of a chaos run.
type chaosProc struct {
	name    string // w2, w2.3 (the third process of slot 2), x1 (an extra armed process)
	slot    int    // 1..Workers; 0 for an extra armed process
	armed   string // the fault point it was started with ("" none)
	cmd     *exec.Cmd
	pid     int
	started time.Time
	logPath string
	out     *chaosLog
	file    *os.File
	exited  chan struct{}
	exitErr error
	ended   time.Time

	mu       sync.Mutex
	expected bool   // the harness killed or stopped it (or armed it to kill itself)
	frozen   bool   // SIGSTOPped and not continued
	fate     string // what ended it, for the report
}

func (p *chaosProc) setExpected(fate string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = true
	if p.fate == "" {
		p.fate = fate
	}
}

func (p *chaosProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *chaosProc) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *chaosProc) exitDescription() string {
	<-p.exited
	return fmt.Sprintf("%s (pid %d) exited: %v; its last lines:\n%s", p.name, p.pid, p.exitErr, p.out.lastLines())
}

// startProc starts a worker process with the run's environment plus extra, for slot (0:
// an extra process).
func (c *chaosRun) startProc(name string, slot int, extra map[string]string) (*chaosProc, error) {
	env := maps.Clone(c.env)
	maps.Copy(env, extra)
	logPath := filepath.Join(c.workDir, "worker-"+name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &chaosProc{name: name, slot: slot, armed: extra[envFaultpoint], logPath: logPath, out: newChaosLog(f), file: f, exited: make(chan struct{})}
	p.cmd = exec.Command(c.bin)
	p.cmd.Env = WorkerEnviron(env)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	p.pid, p.started = p.cmd.Process.Pid, time.Now()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		err := p.cmd.Wait()
		p.exitErr, p.ended = err, time.Now()
		f.Close()
		close(p.exited)
		p.mu.Lock()
		expected := p.expected
		if p.fate == "" {
			p.fate = fmt.Sprintf("exited by itself: %v", err)
		}
		p.mu.Unlock()
		if !expected {
			select {
			case c.crashed <- errors.New(p.exitDescription()):
			default:
			}
		}
		c.watch.notify()
	}()
	c.log.Info("worker started", "name", name, "pid", p.pid, "log", logPath, "armed", p.armed)
	return p, nil
}

// waitReady waits until the process's /readyz answers 200 (the admin address is read
// from its log), bounded by within.
func (c *chaosRun) waitReady(ctx context.Context, p *chaosProc, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	select {
	case <-p.out.adminCh:
	case <-p.exited:
		return errors.New(p.exitDescription())
	case <-ctx.Done():
		return fmt.Errorf("worker %s (pid %d) logged no admin address within %v", p.name, p.pid, within)
	}
	url := "http://" + p.out.adminAddr() + "/readyz"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-p.exited:
			return errors.New(p.exitDescription())
		case <-ctx.Done():
			return fmt.Errorf("worker %s (pid %d) not ready within %v (/readyz: %s)", p.name, p.pid, within, last)
		}
	}
}

// signal sends sig to the process (nothing once it exited).
func (p *chaosProc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%v to worker %s (pid %d): %w", sig, p.name, p.pid, err)
	}
	return nil
}

// kill SIGKILLs the process and waits (bounded) until it is gone.
func (p *chaosProc) kill(fate string) error {
	p.setExpected(fate)
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.waitExit(30 * time.Second)
}

// waitExit waits up to within for the process to exit.
func (p *chaosProc) waitExit(within time.Duration) error {
	tm := time.NewTimer(within)
	defer tm.Stop()
	select {
	case <-p.exited:
		return nil
	case <-tm.C:
		return fmt.Errorf("worker %s (pid %d) did not exit within %v", p.name, p.pid, within)
	}
}

// freeze SIGSTOPs the process; thaw SIGCONTs it.
func (p *chaosProc) freeze() error {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
	return p.signal(syscall.SIGSTOP)
}

func (p *chaosProc) thaw() error {
	err := p.signal(syscall.SIGCONT)
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
	return err
}

// stopAll ends every process still running: a frozen one is continued first, each is sent
// SIGTERM, and killed if it has not exited within wait.
func (c *chaosRun) stopAll(wait time.Duration) {
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if !p.alive() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.setExpected("stopped at the end of the run (SIGTERM)")
			if p.isFrozen() {
				_ = p.thaw()
			}
			_ = p.signal(syscall.SIGTERM)
			if p.waitExit(wait) != nil {
				_ = p.signal(syscall.SIGKILL)
				_ = p.waitExit(30 * time.Second)
			}
		}()
	}
	wg.Wait()
}
