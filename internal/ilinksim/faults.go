package ilinksim

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AddFault arms a fault (the same as POST /_sim/faults) and returns it
// with its defaults filled in.
func (s *Server) AddFault(f Fault) (Fault, error) {
	switch f.Kind {
	case FaultStatus, FaultDelay, FaultDrop, FaultStale, FaultInvalidJSON, FaultOversized, FaultBody:
	default:
		return Fault{}, fmt.Errorf("%w: unknown fault kind %q", ErrBadRequest, f.Kind)
	}
	if f.Endpoint == "" {
		return Fault{}, fmt.Errorf("%w: fault needs an endpoint (or \"*\")", ErrBadRequest)
	}
	f.Endpoint = strings.TrimPrefix(strings.TrimPrefix(f.Endpoint, "/"), "ilink/bot/")
	if f.Count <= 0 {
		f.Count = 1
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 999) {
		return Fault{}, fmt.Errorf("%w: fault status %d out of range", ErrBadRequest, f.Status)
	}
	if f.Delay < 0 || f.Size < 0 {
		return Fault{}, fmt.Errorf("%w: fault delay and size must not be negative", ErrBadRequest)
	}
	if f.Size > 1<<30 {
		return Fault{}, fmt.Errorf("%w: fault size %d over 1 GiB", ErrBadRequest, f.Size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := f
	s.faults = append(s.faults, &cp)
	return f, nil
}

// popFaultLocked returns (a copy of) the first armed fault for endpoint and
// uses up one of its counts.
func (s *Server) popFaultLocked(endpoint string) *Fault {
	for i, f := range s.faults {
		if f.Endpoint != "*" && f.Endpoint != endpoint {
			continue
		}
		out := *f
		f.Count--
		if f.Count <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		return &out
	}
	return nil
}

// applyFault executes f; it returns false when the request should still be
// served normally (delay).
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	switch f.Kind {
	case FaultDelay:
		t := time.NewTimer(time.Duration(f.Delay))
		defer t.Stop()
		select {
		case <-t.C:
			return false
		case <-r.Context().Done():
			return true
		}
	case FaultDrop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			// HTTP/2 or a recorder: abort the stream instead.
			panic(http.ErrAbortHandler)
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return true
	case FaultStale:
		writeJSON(w, s.staleBody())
		return true
	case FaultInvalidJSON:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ret":0,"msgs":[{"message_id":`))
		return true
	case FaultOversized:
		size := f.Size
		if size == 0 {
			size = 8 << 20
		}
		w.Header().Set("Content-Type", "application/json")
		prefix, suffix := `{"ret":0,"pad":"`, `"}`
		pad := size - len(prefix) - len(suffix)
		if pad < 0 {
			pad = 0
		}
		_, _ = w.Write([]byte(prefix))
		chunk := []byte(strings.Repeat("x", 32<<10))
		for pad > 0 {
			n := min(pad, len(chunk))
			if _, err := w.Write(chunk[:n]); err != nil {
				return true
			}
			pad -= n
		}
		_, _ = w.Write([]byte(suffix))
		return true
	case FaultBody:
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(f.Body))
		return true
	default: // FaultStatus
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		body := f.Body
		if body == "" {
			body = http.StatusText(status)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return true
	}
}
