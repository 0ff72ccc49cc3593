package vocab

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextFault says why a text cannot be sent as an iLink text item (and stored with its
// attempt): the one rule every entry applies to outbound text (the reply API, webhook
// answers, the agent helper, the window's send validator, the store). Inbound text is
// never refused: whatever a user sent is stored and handed on as it came.
type TextFault string

// The faults CheckText finds, in the order it looks for them.
const (
	TextOK      TextFault = ""
	TextNotUTF8 TextFault = "not_utf8" // not valid UTF-8
	TextNUL     TextFault = "nul"      // contains U+0000, which PostgreSQL text cannot hold
	TextEmpty   TextFault = "empty"    // empty or only white space
	TextTooLong TextFault = "too_long" // over the byte limit
)

// CheckText checks an outbound text against the rule: valid UTF-8, no U+0000, not blank,
// at most maxBytes bytes (MaxTextBytes when maxBytes <= 0).
func CheckText(text string, maxBytes int) TextFault {
	if maxBytes <= 0 {
		maxBytes = MaxTextBytes
	}
	switch {
	case !utf8.ValidString(text):
		return TextNotUTF8
	case strings.IndexByte(text, 0) >= 0:
		return TextNUL
	case strings.TrimSpace(text) == "":
		return TextEmpty
	case len(text) > maxBytes:
		return TextTooLong
	}
	return TextOK
}

// Describe says the fault to a person, for a text of n bytes against maxBytes.
func (f TextFault) Describe(n, maxBytes int) string {
	if maxBytes <= 0 {
		maxBytes = MaxTextBytes
	}
	switch f {
	case TextNotUTF8:
		return "text is not valid UTF-8"
	case TextNUL:
		return "text contains U+0000 (NUL), which cannot be sent or stored"
	case TextEmpty:
		return "text is empty"
	case TextTooLong:
		return fmt.Sprintf("text is %d bytes; the limit is %d bytes of UTF-8", n, maxBytes)
	}
	return "text is valid"
}

// MaxFileNameBytes bounds a file name as the gateway shows or sends it.
const MaxFileNameBytes = 255

// fallbackFileName names a file whose name sanitizes to nothing.
const fallbackFileName = "file"

// CheckFileName checks a file name an agent gives for an outbound file: valid UTF-8 and
// no control character (U+0000 included). Path parts and length are not faults: SafeFileName
// drops and bounds them.
func CheckFileName(name string) TextFault {
	if !utf8.ValidString(name) {
		return TextNotUTF8
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) {
			return TextNUL
		}
	}
	return TextOK
}

// SafeFileName is name as the gateway shows it to an agent or sends it to iLink: its last
// path element (after '/' or '\'), with control characters, invalid UTF-8 and the
// characters Windows refuses in names dropped, leading dots and spaces trimmed, at most
// MaxFileNameBytes bytes (cut on a rune boundary, keeping an extension of up to 16 bytes),
// and "file" when nothing is left. It never fails: an inbound name is whatever the user's
// client sent.
func SafeFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(name[i:], "\uFFFD"):
			continue // an invalid byte
		case r == 0 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) && r != '\u200d':
			continue // control and bidi-override characters
		case strings.ContainsRune(`<>:"|?*`, r):
			b.WriteRune('_')
		default:
			b.WriteRune(r)
		}
	}
	out := strings.TrimRight(strings.TrimLeft(b.String(), ". "), " ")
	if len(out) > MaxFileNameBytes {
		ext := ""
		if dot := strings.LastIndexByte(out, '.'); dot > 0 && len(out)-dot <= 16 {
			ext = out[dot:]
		}
		out = cutUTF8(out[:len(out)-len(ext)], MaxFileNameBytes-len(ext)) + ext
	}
	if out == "" || out == "." || out == ".." {
		return fallbackFileName
	}
	return out
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
