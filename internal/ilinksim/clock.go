package ilinksim

import (
	"fmt"
	"time"
)

// Now returns the sim clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

// nowLocked is the sim clock: the manual clock, or with Config.RealTime the real clock
// plus everything Advance added.
func (s *Server) nowLocked() time.Time {
	if s.cfg.RealTime {
		return time.Now().Add(s.advanced)
	}
	return s.now
}

// Advance moves the sim clock forward by d (d must not be negative) and
// wakes every held long poll so that delayed messages become visible. With
// Config.RealTime the clock keeps running and Advance adds d on top of it.
func (s *Server) Advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("%w: advance by %s: the clock only moves forward", ErrBadRequest, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	s.advanced += d
	for _, b := range s.botOrder {
		b.wakeLocked()
	}
	s.wakeQRLocked()
	return s.nowLocked(), nil
}
