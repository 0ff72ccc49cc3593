package wfapi

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration in a workflow input that reads well in the Temporal UI: it
// encodes as a Go duration string ("10m0s") and decodes that or, as histories recorded
// before it did, an integer count of nanoseconds (600000000000).
type Duration time.Duration

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON encodes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON decodes a Go duration string or an integer count of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("wfapi: duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("wfapi: duration %s: want a string such as \"10m0s\" or nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}
