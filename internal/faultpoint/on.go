//go:build faultpoints

package faultpoint

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

var (
	started = time.Now()
	armed   = os.Getenv("ILINKFLOW_FAULTPOINT")
	after   time.Duration
	once    sync.Once
)

func init() {
	if s := os.Getenv("ILINKFLOW_FAULTPOINT_AFTER"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faultpoint: ILINKFLOW_FAULTPOINT_AFTER %q: %v\n", s, err)
			os.Exit(2)
		}
		after = d
	}
}

// Hit kills the process with SIGKILL when point is the armed one and the arming delay has
// passed (test builds only).
func Hit(point, detail string) {
	if point != armed || time.Since(started) < after {
		return
	}
	once.Do(func() {
		fmt.Fprintf(os.Stderr, "%s%s (account %s)\n", Line, point, detail)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	})
}
