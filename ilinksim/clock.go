package ilinksim

import (
	"fmt"
	"time"
)

// Now returns the sim clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the sim clock forward by d (d must not be negative) and
// wakes every held long poll so that delayed messages become visible.
func (s *Server) Advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("%w: advance by %s: the clock only moves forward", ErrBadRequest, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	for _, b := range s.botOrder {
		b.wakeLocked()
	}
	s.wakeQRLocked()
	return s.now, nil
}
