package wfapi

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration in a workflow input that reads well in the Temporal UI: it
// encodes and decodes as a Go duration string ("10m0s").
type Duration time.Duration

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON encodes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON decodes a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("wfapi: duration %s: want a string such as \"10m0s\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("wfapi: duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}
