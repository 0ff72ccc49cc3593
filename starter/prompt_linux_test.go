package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair: the master (what a terminal emulator writes the
// user's keystrokes and pastes to) and the slave (the program's standard input), in
// the kernel's default canonical mode.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close(); master.Close() })
	// Drain the echo, as a terminal emulator shows it.
	go func() { _, _ = io.Copy(io.Discard, master) }()
	return master, slave
}

// TestATerminalCutsAPastedLineAtTheLimitTheWarningUses pastes a 6000-byte line into a
// real pseudo-terminal: the kernel passes 4095 bytes of it (the limit warnIfCut checks),
// stdin is seen as a terminal, and the enrollment prompt warns, does not take the cut
// line for the code and reads the code typed next.
func TestATerminalCutsAPastedLineAtTheLimitTheWarningUses(t *testing.T) {
	t.Parallel()
	master, slave := openPTY(t)
	if !isTerminal(slave) {
		t.Fatal("a pseudo-terminal is not seen as a terminal")
	}
	if _, err := master.Write([]byte(strings.Repeat("7", 6000) + "\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := master.Write([]byte("123456\n")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f := readCodeFrom(slave, &out)
	code, err := f.readCode()
	if err != nil || code != "123456" {
		t.Fatalf("code %q, %v; want 123456\n%s", code, err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("this line is %d bytes", terminalLineMax)) {
		t.Fatalf("the terminal did not pass exactly %d bytes of the pasted line, or no warning:\n%s", terminalLineMax, out.String())
	}
	t.Logf("prompt said: %s", strings.TrimSpace(out.String()))

}
