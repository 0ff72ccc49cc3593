package jsontext

import (
	"encoding/json"
	"testing"
)

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

// An object that names one member twice, at any depth and however the name is written
// (escaped, in another case), has a duplicate; the same name in sibling or nested
// objects, in arrays or as a value is not one.
func TestAnObjectNamingAMemberTwiceHasADuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"text":"a","text":"b"}`:                         "text",
		`{"type":"text","text":"a","text":"b"}`:           "text",
		`{"text":"a","te\u0078t":"b"}`:                    "te" + "xt",
		`{"text":"a","TEXT":"b"}`:                         "TEXT",
		`{"status":"a","ſtatus":"b"}`:                     "ſtatus", // U+017F folds to s, as encoding/json matches it
		`{"media":{"a":1,"a":2}}`:                         "a",
		`[{"a":1},{"b":[{"c":1,"c":2}]}]`:                 "c",
		`{"a":{"x":1},"b":[1,{"y":2}],"a":3}`:             "a",
		`{"a":[],"b":{},"c":null,"d":true,"e":1.5,"a":0}`: "a",
	} {
		if got, ok := DuplicateKey([]byte(body)); !ok || got != want {
			t.Errorf("DuplicateKey(%s) = %q, %v; want %q", body, got, ok, want)
		}
	}
	for _, body := range []string{
		`{"type":"text","text":"text"}`,
		`{"a":{"a":{"a":1}}}`,
		`[{"a":1},{"a":2}]`,
		`{"a":"b","b":"a"}`,
		`{"k":["k","k"]}`,
		`{"a":1,"a":2} {}`, // not one JSON value
		`{"a":1,"a"`,       // not JSON
		``,
		`"a"`,
	} {
		if got, ok := DuplicateKey([]byte(body)); ok {
			t.Errorf("DuplicateKey(%s) = %q, want none", body, got)
		}
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"text":"a","text":"b"}`, `{"a":[{"b":1,"B":2}]}`, `{"a":{"b":1},"c":2}`, `[1,"a",{"x":null}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		name, ok := DuplicateKey(body)
		if ok && !json.Valid(body) {
			t.Fatalf("a duplicate %q reported in text that is not one JSON value: %q", name, body)
		}
	})
}
