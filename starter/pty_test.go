package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// TestDevThroughATerminalChatsTwentyMessagesStopsEverythingOnCtrlCAndRunsAgain drives the
// built `starter dev` as a user does, in a tmux pseudo-terminal, with dev starting its
// own Temporal dev server: it chats twenty messages at about one a second and gets twenty
// echoes, then types half a message and presses Ctrl-C (a real SIGINT to the terminal's
// foreground processes). Within 5 s the command has ended with status 0, and every
// process it started (the Temporal dev server among them) is gone and every port they
// listened on is free. Then it runs dev again, which opens the first run's key file and
// chats with the same demo user; a pasted line longer than the terminal passes is echoed
// as the terminal cut it, after a warning that it may have been cut; and it stops the
// same way.
func TestDevThroughATerminalChatsTwentyMessagesStopsEverythingOnCtrlCAndRunsAgain(t *testing.T) {
	t.Parallel()
	cli := devserver.CLI(t) // first: in -short mode the test skips here
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("this test drives a terminal through tmux, which is not installed (apt-get install tmux): %v", err)
	}
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "dev-sealing-key")
	bin := filepath.Join(dir, "starter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	simAddr, httpAddr, temporalAddr := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, uiPort, _ := net.SplitHostPort(testkit.FreeAddr(t))
	args := []string{"dev", "--temporal-address", temporalAddr, "--ui-port", uiPort,
		"--task-queue", "pty-" + strconv.Itoa(os.Getpid()), "--database-url", dbtest.SchemaURL(schema),
		"--sim-addr", simAddr, "--http-addr", httpAddr, "--dev-key-file", keyFile}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	cmd := "env -u ILINKFLOW_SEALING_KEYS -u ILINKFLOW_SEALING_KEYS_FILE TEMPORAL_CLI='" + cli + "' '" + bin + "' " + strings.Join(quoted, " ")
	// The second run waits for a line, so that the first run's processes and ports are
	// checked before it starts.
	script := fmt.Sprintf("%s; echo \"EXITED-1 $?\"; read -r _; %s; echo \"EXITED-2 $?\"; sleep 600", cmd, cmd)
	sock := fmt.Sprintf("ilinkflow-test-%d", os.Getpid())
	tmux := func(a ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-L", sock}, a...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", a, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", "dev", "-x", "250", "-y", "50", "bash", "--norc", "-c", script)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	shell, err := strconv.Atoi(strings.TrimSpace(tmux("display-message", "-p", "-t", "dev", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	screen := func() string { return tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", "dev") }
	waitFor := func(want string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !strings.Contains(screen(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q within %s:\n%s", want, within, screen())
			}
			time.Sleep(50 * time.Millisecond) // polling the screen, not timing the test
		}
	}
	say := func(text string) {
		t.Helper()
		tmux("send-keys", "-t", "dev", "-l", text)
		tmux("send-keys", "-t", "dev", "Enter")
		waitFor("bot> echo: "+text, 30*time.Second)
	}
	// stop types half a message, presses Ctrl-C and checks that within 5 s dev has exited
	// with status 0 and that the processes and ports it had are gone.
	stop := func(marker string) {
		t.Helper()
		procs := descendants(t, shell)
		ports := listeningPorts(t, procs)
		for _, addr := range []string{simAddr, httpAddr, temporalAddr} {
			_, p, _ := net.SplitHostPort(addr)
			if n, _ := strconv.Atoi(p); !slices.Contains(ports, n) {
				t.Fatalf("port %s not among the ports dev's processes listen on %v", p, ports)
			}
		}
		if len(procs) < 2 {
			t.Fatalf("dev's processes: %v, want dev and the Temporal dev server at least", procs)
		}
		tmux("send-keys", "-t", "dev", "-l", "half a mess")
		start := time.Now()
		tmux("send-keys", "-t", "dev", "C-c")
		deadline := start.Add(5 * time.Second)
		for {
			alive := aliveOf(procs)
			taken := listening(t, ports)
			exited := strings.Contains(screen(), marker+" 0")
			if len(alive) == 0 && len(taken) == 0 && exited {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s after Ctrl-C: processes alive %v, ports listening %v, exited with 0: %v\n%s", alive, taken, exited, screen())
			}
			time.Sleep(50 * time.Millisecond) // polling the system, not timing the test
		}
		t.Logf("%s after Ctrl-C in %s: %d processes gone, ports %v free", marker, time.Since(start).Round(time.Millisecond), len(procs), ports)
	}

	waitFor("you> ", 3*time.Minute)
	if !strings.Contains(screen(), "Temporal: starting the dev server") {
		t.Fatalf("dev did not start its own Temporal dev server:\n%s", screen())
	}
	// Twenty messages at about one a second (the pace of a quick typist): each is echoed.
	pace := time.NewTicker(time.Second)
	for i := 1; i <= 20; i++ {
		<-pace.C
		say(fmt.Sprintf("first run message %02d", i)) // no text is a prefix of another
	}
	pace.Stop()
	waitFor("you> ", 30*time.Second)
	stop("EXITED-1")
	tmux("send-keys", "-t", "dev", "Enter") // start the second run

	waitFor("using the dev-only key file "+keyFile, 2*time.Minute)
	waitFor("the previous run's demo account", 2*time.Minute)
	say("second run")
	// A pasted line longer than the terminal passes: the chat warns that it may have been
	// cut and sends what the terminal passed (terminalLineMax bytes).
	tmux("send-keys", "-t", "dev", "-l", strings.Repeat("p", 6000))
	tmux("send-keys", "-t", "dev", "Enter")
	waitFor(fmt.Sprintf("(warning: this line is %d bytes", terminalLineMax), 30*time.Second)
	waitFor("may have been cut by the terminal", 30*time.Second)
	waitFor("bot> echo: "+strings.Repeat("p", terminalLineMax), 30*time.Second)
	if strings.Contains(screen(), "bot> echo: "+strings.Repeat("p", terminalLineMax+1)) {
		t.Fatalf("the terminal passed more than %d bytes of the pasted line:\n%s", terminalLineMax, screen())
	}
	stop("EXITED-2")
	// A refused reply is printed "bot (refused by iLink: …)"; the screen also shows the
	// worker's log, where a notifystop racing the simulator's stop after Ctrl-C may say
	// "connection refused" (a best-effort call, not a reply).
	if s := screen(); strings.Contains(s, "refused by iLink") {
		t.Fatalf("a reply was refused:\n%s", s)
	}
}

// procStat reads a process's state and parent from /proc (ok false when it is gone).
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// descendants lists the processes below pid (not pid itself).
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// aliveOf lists the processes of pids that still run (a zombie has ended).
func aliveOf(pids []int) []int {
	var out []int
	for _, p := range pids {
		if state, _, ok := procStat(p); ok && state != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// listeningPorts lists the TCP ports the processes listen on (through their sockets'
// inodes in /proc/net/tcp and tcp6).
func listeningPorts(t *testing.T, pids []int) []int {
	t.Helper()
	inodes := map[string]bool{}
	for _, p := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		for _, fd := range fds {
			link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
			}
		}
	}
	var ports []int
	for port, socks := range listenSockets(t) {
		for _, inode := range socks {
			if inodes[inode] && !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// listening lists which of ports some process listens on.
func listening(t *testing.T, ports []int) []int {
	t.Helper()
	socks := listenSockets(t)
	var out []int
	for _, p := range ports {
		if _, ok := socks[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// listenSockets maps the machine's listening TCP ports to their sockets' inodes.
func listenSockets(t *testing.T) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err == nil {
				out[int(port)] = append(out[int(port)], fields[9])
			}
		}
		f.Close()
	}
	return out
}
