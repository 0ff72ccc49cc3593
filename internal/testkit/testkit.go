// Package testkit holds small helpers the tests of several packages share.
package testkit

import (
	"bytes"
	"sync"
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
