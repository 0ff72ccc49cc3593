package jsontext

import "testing"

// Text the decoder would silently replace with U+FFFD is not valid; everything else is.
func TestTextTheDecoderWouldReplaceIsNotValid(t *testing.T) {
	for body, want := range map[string]bool{
		`{"text":"hello"}`:              true,
		`{"text":"😀 \ud83d\ude00"}`:     true,
		`{"text":"a\\ud800 is text"}`:   true, // an escaped backslash, not an escape
		`{"text":"\ufffd was written"}`: true,
		"{\"text\":\"\xff\xfe\"}":       false,
		`{"text":"\ud800"}`:             false,
		`{"text":"\udc00"}`:             false,
		`{"text":"\ud800\u0041"}`:       false,
		`{"text":"\ud800x"}`:            false,
	} {
		if got := Valid([]byte(body)); got != want {
			t.Errorf("Valid(%q) = %v, want %v", body, got, want)
		}
	}
}
