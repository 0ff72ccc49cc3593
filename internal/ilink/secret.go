package ilink

import (
	"fmt"
	"log/slog"
)

// Secret holds a credential: a bot token, a context token, a typing ticket or
// an AES key. It encodes to JSON as its plain value (the wire needs it), but
// fmt, %v/%s/%q/%x/%#v and log/slog only ever show "[REDACTED]". Call
// [Secret.Reveal] to read the value deliberately.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the plain value.
func (s Secret) Reveal() string { return string(s) }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s == "" }

// String returns "[REDACTED]" (or "" when empty).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString returns a redacted Go representation.
func (s Secret) GoString() string { return "ilink.Secret(" + fmt.Sprintf("%q", s.String()) + ")" }

// Format writes the redacted form for every verb.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(s.String()))
}

// LogValue makes log/slog print the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
