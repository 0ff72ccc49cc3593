// Package jsontext checks JSON text before encoding/json reads it: the decoder turns
// invalid UTF-8 and unpaired surrogate escapes into U+FFFD without a word, and a gateway
// must refuse such text rather than send what nobody wrote.
package jsontext

import "unicode/utf8"

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
