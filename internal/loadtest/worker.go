package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// WorkerPackage is the import path of the worker command.
const WorkerPackage = "github.com/ilinkflow/ilinkflow/worker"

// EnvDBMaxConns names the worker setting that bounds its PostgreSQL pool (flag
// --db-max-conns); a worker that does not list that flag in --help does not have it.
const EnvDBMaxConns = "ILINKFLOW_DB_MAX_CONNS"

// BuildWorker builds the worker command into dir and returns the binary's path. It runs
// `go build` in the current directory, which must be inside this module.
func BuildWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, WorkerPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the worker (%s): %w\n%s", WorkerPackage, err, out)
	}
	return bin, nil
}

// WorkerHasSetting reports whether the worker binary lists the flag (e.g. "db-max-conns")
// in its --help.
func WorkerHasSetting(ctx context.Context, bin, flag string) (bool, error) {
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s --help: %w\n%s", bin, err, out)
	}
	return bytes.Contains(out, []byte("--"+flag+" ")), nil
}

// workerProc is the running worker process.
type workerProc struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	out     *workerLog
	file    *os.File
	exited  chan struct{}
	exitErr error
	stopped bool
	grace   time.Duration
}

// workerLog writes the worker's output to its log file and notices two lines of its
// JSON log: the HTTP address it serves (for /metrics) and the end of the start-up
// reconcile.
type workerLog struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	addr    string
	recon   bool
	tail    []string
}

func (l *workerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return l.w.Write(p)
}

func (l *workerLog) line(b []byte) {
	l.tail = append(l.tail, string(b))
	if len(l.tail) > 60 {
		l.tail = l.tail[len(l.tail)-60:]
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return
	}
	switch rec.Msg {
	case "serving HTTP":
		l.addr = rec.Addr
	case "reconciled":
		l.recon = true
	}
}

func (l *workerLog) httpAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

func (l *workerLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, "\n")
}

func (w *workerProc) reconciled() bool {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	return w.out.recon
}

func (w *workerProc) exitError() error {
	<-w.exited
	return fmt.Errorf("the worker (pid %d) exited by itself: %v; its last lines:\n%s", w.pid, w.exitErr, w.out.lastLines())
}

// workerEnv is the worker's environment: this process's environment without any worker
// setting, plus the run's settings.
func (r *run) workerEnv() map[string]string {
	set := map[string]string{
		"TEMPORAL_ADDRESS":          r.tcAddress(),
		"TEMPORAL_NAMESPACE":        r.ns,
		"ILINKFLOW_TASK_QUEUE":      r.tq,
		"DATABASE_URL":              r.workerDB,
		sealing.EnvKeys:             r.keySpec,
		"ILINK_BASE_URL":            r.simURL,
		"ILINK_CDN_BASE_URL":        r.simURL + "/c2c",
		"ILINKFLOW_HANDLER":         handoff.KindEcho,
		"ILINKFLOW_MAX_ACCOUNTS":    strconv.Itoa(r.maxAccounts()),
		"ILINKFLOW_HTTP_ADDR":       "127.0.0.1:0", // /metrics on a free port (read from the log)
		"ILINKFLOW_LOG_FORMAT":      "json",
		"ILINKFLOW_LOG_LEVEL":       "info",
		"ILINKFLOW_SHUTDOWN_GRACE":  "5s",
		"ILINKFLOW_WINDOW_LIFETIME": "24h",
	}
	if r.cfg.DBMaxConns > 0 {
		set[EnvDBMaxConns] = strconv.Itoa(r.cfg.DBMaxConns)
	}
	// How to reach Temporal (TLS, client certificate, API key, profile) passes through;
	// the address and namespace are the run's.
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TEMPORAL_") && k != "TEMPORAL_ADDRESS" && k != "TEMPORAL_NAMESPACE" {
			set[k] = v
		}
	}
	for k, v := range r.cfg.WorkerEnv {
		set[k] = v
	}
	return set
}

// tcAddress is the Temporal address the run's client is connected to.
func (r *run) tcAddress() string { return r.tcAddr }

// WorkerEnviron is the environment of a worker process: this process's, without any
// worker setting (ILINKFLOW_*, ILINK_*, TEMPORAL_*, DATABASE_URL), plus set (sorted).
func WorkerEnviron(set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ILINKFLOW_") || strings.HasPrefix(k, "ILINK_") || strings.HasPrefix(k, "TEMPORAL_") || k == "DATABASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+set[k])
	}
	return env
}

// startWorker builds (unless given) and starts the worker process, and starts sampling it.
func (r *run) startWorker(ctx context.Context) error {
	bin := r.cfg.WorkerBin
	if bin == "" {
		began := time.Now()
		var err error
		if bin, err = BuildWorker(ctx, r.workDir); err != nil {
			return err
		}
		r.log.Info("worker built", "bin", bin, "took", time.Since(began).Round(time.Millisecond))
	}
	if r.cfg.DBMaxConns > 0 {
		ok, err := WorkerHasSetting(ctx, bin, "db-max-conns")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("a PostgreSQL pool bound was asked for (%d), but this worker has no --db-max-conns setting (%s would be ignored)", r.cfg.DBMaxConns, EnvDBMaxConns)
		}
		r.rep.PGConnBound, r.rep.PGConnBoundSource = r.cfg.DBMaxConns, EnvDBMaxConns
	} else {
		r.rep.PGConnBound, r.rep.PGConnBoundSource = gateway.DefaultDBMaxConns, "the worker's default --db-max-conns"
	}
	set := r.workerEnv()
	cfg, err := gateway.ConfigFromEnv(func(k string) string { return set[k] }, nil)
	if err != nil {
		return fmt.Errorf("worker settings: %w", err)
	}
	r.workCfg = cfg
	r.rep.PollLeaseTTLMS = ms(cfg.PollLeaseTTL)
	r.rep.HeartbeatEveryMS = ms(cfg.Heartbeat)
	r.rep.PollSessionMS = ms(cfg.PollSession)
	r.rep.SendGapMS = ms(cfg.SendGap)

	f, err := os.Create(r.workerLogPath())
	if err != nil {
		return err
	}
	w := &workerProc{out: &workerLog{w: f}, file: f, exited: make(chan struct{}), grace: cfg.ShutdownGrace}
	w.cmd = exec.Command(bin)
	w.cmd.Env = WorkerEnviron(set)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start the worker: %w", err)
	}
	w.pid, w.started = w.cmd.Process.Pid, time.Now()
	go func() {
		w.exitErr = w.cmd.Wait()
		close(w.exited)
	}()
	r.worker = w
	r.rep.WorkerPID = w.pid
	r.rep.WorkerLog = r.workerLogPath()
	r.onCleanup(func() { r.stopWorker(); f.Close() })
	r.sampler = newSampler(r)
	go r.sampler.run(r.cfg.Sample)
	r.onCleanup(r.sampler.stop)
	r.log.Info("worker started", "pid", w.pid, "log", r.workerLogPath())
	return nil
}

// stopWorker stops the worker as an operator would (SIGTERM), killing it if it does
// not stop within its shutdown grace plus 30 seconds. It records how it ended.
func (r *run) stopWorker() {
	w := r.worker
	if w == nil || w.stopped {
		return
	}
	w.stopped = true
	if r.sampler != nil {
		r.sampler.stop()
	}
	select {
	case <-w.exited:
		r.rep.WorkerExit = fmt.Sprintf("exited by itself: %v", w.exitErr)
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	tm := time.NewTimer(w.grace + 30*time.Second)
	defer tm.Stop()
	select {
	case <-w.exited:
		if w.exitErr != nil {
			r.rep.WorkerExit = fmt.Sprintf("stopped on SIGTERM with %v", w.exitErr)
		} else {
			r.rep.WorkerExit = "stopped cleanly on SIGTERM"
		}
	case <-tm.C:
		_ = w.cmd.Process.Kill()
		<-w.exited
		r.rep.WorkerExit = "did not stop on SIGTERM; killed"
	}
}

// workerMetrics are the counters read from the worker's /metrics.
type workerMetrics struct {
	// heartbeats are RecordActivityTaskHeartbeat(ById) requests that did not fail: the
	// heartbeats the server recorded.
	heartbeats float64
	// queries are QueryWorkflow requests the worker made.
	queries float64
	// roundTrips are the PostgreSQL round trips of the worker's pool
	// (ilinkflow_db_round_trips_total, every kind); roundTripsOK when it was served.
	roundTrips   float64
	roundTripsOK bool
}

// scrape reads the worker's /metrics (false when it cannot).
func (w *workerProc) scrape(ctx context.Context) (workerMetrics, bool) {
	addr := w.out.httpAddr()
	if addr == "" {
		return workerMetrics{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := httpGet(ctx, (&url.URL{Scheme: "http", Host: addr, Path: "/metrics"}).String())
	if err != nil {
		return workerMetrics{}, false
	}
	return parseMetrics(req)
}

// parseMetrics reads the SDK's request counters from a Prometheus text exposition.
func parseMetrics(body []byte) (workerMetrics, bool) {
	var m workerMetrics
	found := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		if name == "ilinkflow_db_round_trips_total" {
			m.roundTrips += v
			m.roundTripsOK = true
			continue
		}
		op := labelValue(labels, "operation")
		sign := 0.0
		switch name {
		case "temporal_request_total":
			sign = 1
			found = true
		case "temporal_request_failure_total":
			sign = -1
		default:
			continue
		}
		switch op {
		case "RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById":
			m.heartbeats += sign * v
		case "QueryWorkflow":
			m.queries += sign * v
		}
	}
	return m, found
}

// labelValue returns the value of one label in a Prometheus label list.
func labelValue(labels, name string) string {
	for _, part := range splitLabels(labels) {
		k, v, ok := strings.Cut(part, "=")
		if ok && k == name {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
		}
	}
	return ""
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	start, quoted, escaped := 0, false, false
	for i, c := range s {
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// procRSSKB reads VmRSS of a process from /proc (kB).
func procRSSKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

func parseVmRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS line")
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on every
// Linux architecture Go supports; the kernel exports it so to user space).
const clockTicks = 100

// procCPUSeconds reads utime+stime of a process from /proc, in seconds.
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

func parseStatCPU(stat []byte) (float64, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}
