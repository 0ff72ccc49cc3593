package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup keeps the Temporal dev server out of the terminal's process group: a
// Ctrl-C reaches dev alone, which drains its worker (the hand-over of poll leases still
// talks to the server) and only then stops the server. Should dev die without stopping
// it, the server gets SIGTERM.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
