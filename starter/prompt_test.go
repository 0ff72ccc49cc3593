package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestAPromptWarnsWhenAPastedLineMayHaveBeenCutByTheTerminal: a line read from a
// terminal at its canonical-mode limit (4095 bytes) or beyond gets the warning, naming
// what to do instead; a shorter line, or any line from a pipe or a file, does not.
func TestAPromptWarnsWhenAPastedLineMayHaveBeenCutByTheTerminal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n        int
		terminal bool
		warn     bool
	}{
		{0, true, false},
		{4094, true, false},
		{4095, true, true},
		{5000, true, true},
		{4095, false, false},
		{20000, false, false},
	}
	for _, c := range cases {
		var out bytes.Buffer
		got := warnIfCut(&out, strings.Repeat("x", c.n), c.terminal)
		if got != c.warn || (out.Len() > 0) != c.warn {
			t.Errorf("%d bytes, terminal %v: warned %v (%q), want %v", c.n, c.terminal, got, out.String(), c.warn)
		}
		if c.warn {
			for _, want := range []string{"may have been cut", "by the terminal", "pipe the text in", "shorter parts"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("warning lacks %q: %s", want, out.String())
				}
			}
		}
	}
}

// TestIsTerminalIsFalseForPipesFilesAndReaders: only a character device counts.
func TestIsTerminalIsFalseForPipesFilesAndReaders(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, in := range map[string]io.Reader{"pipe": r, "file": f, "reader": strings.NewReader("x\n")} {
		if isTerminal(in) {
			t.Errorf("%s counted as a terminal", name)
		}
	}
}

// readCodeFrom is an enrollment follower reading its verification code from stdin.
func readCodeFrom(stdin io.Reader, stdout io.Writer) *enrollFollower {
	return &enrollFollower{c: &conn{}, lines: bufio.NewScanner(stdin), terminal: isTerminal(stdin), stdout: stdout, stderr: io.Discard}
}

// TestEnrollDoesNotSendALineTheTerminalMayHaveCutAndAsksAgain: at the verification-code
// prompt a line at the terminal's limit is not taken for the code: the user is warned
// and asked again, and the next line is the code.
func TestEnrollDoesNotSendALineTheTerminalMayHaveCutAndAsksAgain(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	f := readCodeFrom(strings.NewReader(strings.Repeat("7", 4095)+"\n123456\n"), &out)
	f.terminal = true // as if typed at a terminal
	code, err := f.readCode()
	if err != nil || code != "123456" {
		t.Fatalf("code %q, %v; want 123456", code, err)
	}
	if s := out.String(); !strings.Contains(s, "may have been cut") || !strings.Contains(s, "not sent as the code") {
		t.Fatalf("no warning:\n%s", s)
	}
}
