// Package jsontext checks JSON text before encoding/json reads it: the decoder turns
// invalid UTF-8 and unpaired surrogate escapes into U+FFFD without a word, and keeps the
// last of two members with one name, and a gateway must refuse such text rather than send
// what nobody wrote (or not what the first member said).
package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Valid reports whether a JSON body is valid UTF-8 and every \u escape for a
// UTF-16 surrogate is a high one followed by a low one: what encoding/json would
// otherwise replace with U+FFFD without a word.
func Valid(body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+1 < len(body) && body[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(body, i+2)
		switch {
		case !ok:
			continue // not a valid escape: the decoder reports it
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(body, i+8)
			if i+7 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

// hex4 reads four hexadecimal digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// DuplicateKey returns the first member name that one object of a JSON text holds twice,
// at any depth. Names are compared as encoding/json matches them to struct fields (after
// unescaping, without regard to case: bytes.EqualFold), so that no two members of an
// object can fill the same field, where the decoder would keep the last one without a
// word. Only one valid JSON value can have a duplicate: other text is the decoder's to
// refuse.
func DuplicateKey(body []byte) (string, bool) {
	if !json.Valid(body) {
		return "", false
	}
	type object struct {
		names   map[string]struct{}
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*object // nil entries are arrays
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // the end
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if top != nil {
					top.wantKey = true // after this value, a name
				}
				stack = append(stack, &object{names: map[string]struct{}{}, wantKey: true})
			case '[':
				if top != nil {
					top.wantKey = true
				}
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.wantKey {
				folded := foldName(t)
				if _, dup := top.names[folded]; dup {
					return t, true
				}
				top.names[folded] = struct{}{}
				top.wantKey = false
				continue
			}
			if top != nil {
				top.wantKey = true
			}
		default:
			if top != nil {
				top.wantKey = true
			}
		}
	}
}

// foldName maps every rune of s to the smallest rune of its case-folding orbit, so that
// foldName(a) == foldName(b) exactly when strings.EqualFold(a, b).
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < least {
				least = f
			}
		}
		b.WriteRune(least)
	}
	return b.String()
}
