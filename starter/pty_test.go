package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevThroughATerminal drives the built `starter dev` as a user does, in a tmux
// pseudo-terminal: it chats, presses Ctrl-C at the prompt (a real SIGINT to the terminal's
// foreground process) and checks that the command ends with status 0 within 5 s and its
// simulator and reply API ports are free; then it runs dev again, which opens the first
// run's key file and chats with the same demo user, and stops it the same way.
func TestDevThroughATerminal(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	e := newDevEnv(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "starter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	simAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := append(append([]string{}, e.args...), "--sim-addr", simAddr, "--http-addr", httpAddr)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	cmd := "env -u ILINKFLOW_SEALING_KEYS -u ILINKFLOW_SEALING_KEYS_FILE '" + bin + "' " + strings.Join(quoted, " ")
	// The second run waits for a line, so that the ports are checked before it binds them.
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
	screen := func() string { return tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "dev") }
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
		waitFor("bot> echo: "+text, time.Minute)
	}
	stop := func(marker string) {
		t.Helper()
		start := time.Now()
		tmux("send-keys", "-t", "dev", "C-c")
		waitFor(marker+" 0", 5*time.Second)
		t.Logf("%s after Ctrl-C in %s", marker, time.Since(start).Round(time.Millisecond))
		for _, addr := range []string{simAddr, httpAddr} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("port %s still taken after Ctrl-C: %v", addr, err)
			}
			l.Close()
		}
	}

	waitFor("you> ", 2*time.Minute)
	for _, m := range []string{"one", "two", "three"} {
		say("first run " + m)
	}
	waitFor("you> ", 5*time.Second)
	stop("EXITED-1")
	tmux("send-keys", "-t", "dev", "Enter") // start the second run

	waitFor("using the dev-only key file "+e.keyFile, 2*time.Minute)
	waitFor("the previous run's demo account", time.Minute)
	say("second run")
	stop("EXITED-2")
	if s := screen(); strings.Contains(s, "refused") {
		t.Fatalf("a reply was refused:\n%s", s)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
