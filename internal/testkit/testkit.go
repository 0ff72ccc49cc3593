// Package testkit holds small helpers the tests of several packages share.
package testkit

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/sealing"
)

// SyncBuffer is a bytes.Buffer safe for a writer and a reader in different goroutines
// (a log sink that a test reads while the code under test writes).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SealingKey is the sealing key (generation 1) of every test that does not test keys
// themselves: stores, workers, codecs and agents of one test read each other's values.
const SealingKey = "ilinkflow-test-sealing-key-01234"

// KeySpec is SealingKey as ILINKFLOW_SEALING_KEYS writes it, for a worker process.
var KeySpec = "1:" + base64.StdEncoding.EncodeToString([]byte(SealingKey))

// Keyring is the keyring of SealingKey.
var Keyring = func() *sealing.Keyring {
	k, err := sealing.NewKeyring(1, map[int32][]byte{1: []byte(SealingKey)})
	if err != nil {
		panic(fmt.Sprintf("testkit: keyring: %v", err)) // a constant key of the right size
	}
	return k
}()

// Eventually polls cond every 50 ms until it holds, and fails tb when within passes first
// (with the condition's last error): a wait for the system under test, not a timing
// assertion.
func Eventually(tb testing.TB, what string, within time.Duration, cond func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		<-tick.C
	}
	tb.Fatalf("%s: not reached within %v (last error: %v)", what, within, last)
}

// WaitingParallel sets how many of a package's parallel tests run at once to n, unless
// -test.parallel was given. It is for packages whose tests mostly wait (Temporal timers,
// worker processes, simulated users typing at human speed) rather than compute: the
// default, one test per CPU, would leave a 2-core machine idle while two of them sleep.
// Each such test has its own schema, namespace, task queue and simulator, so they do not
// share state. Call it from TestMain before m.Run.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(fmt.Sprintf("testkit: set -test.parallel: %v", err)) // a test binary always has the flag
		}
	}
}

// FreeAddr returns a loopback address whose port is free now, for a process the test starts
// (perhaps twice: a restarted process gets the same port back). The port lies below Linux's
// ephemeral range (32768 and up): one the kernel handed out for ":0" could be handed out
// again, to any parallel test's connection, before the process binds it (seen in CI: "bind:
// address already in use").
func FreeAddr(t *testing.T) string {
	t.Helper()
	const low, high = 20000, 32768
	handedOut.Lock()
	defer handedOut.Unlock()
	start := low + mrand.IntN(high-low)
	for i := range high - low {
		port := low + (start-low+i)%(high-low)
		if handedOut.ports[port] {
			continue // free again, but another test of this process may be about to use it
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		handedOut.ports[port] = true
		return addr
	}
	t.Fatalf("no free port in %d-%d", low, high-1)
	return ""
}

// handedOut are the ports FreeAddr returned, never returned twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ModuleRoot is the directory of the module's go.mod, above the test's directory: where a
// test that reads the module's own source files starts.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
