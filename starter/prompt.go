package main

import (
	"fmt"
	"io"
	"os"
)

// terminalLineMax is the longest line a terminal in canonical mode passes to a program:
// Linux's N_TTY line buffer holds 4096 bytes including the newline, so a longer pasted
// line arrives cut to 4095 bytes and the rest is dropped.
const terminalLineMax = 4095

// isTerminal reports whether r is a terminal (a character device: a pipe or a file is
// not), where a line may have been cut to terminalLineMax bytes.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// warnIfCut is the check of every prompt that reads lines a user types (the `starter dev`
// chat and the `starter enroll` verification code): when line (as read, without its
// newline) came from a terminal and is at the terminal's line limit, it tells the user on
// w that the terminal may have cut it, with what to do instead, and reports true.
func warnIfCut(w io.Writer, line string, fromTerminal bool) bool {
	if !fromTerminal || len(line) < terminalLineMax {
		return false
	}
	fmt.Fprintf(w, "(warning: this line is %d bytes, the most a terminal passes in one line, so it may have been cut by the terminal: "+
		"pipe the text in instead of pasting it, or send it in shorter parts)\n", len(line))
	return true
}
