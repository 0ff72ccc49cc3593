package mcpserver

import (
	"encoding/json"
	"net/http"
	"testing"
)

// decodeAll decodes raw as the input of every tool.
func decodeAll(raw []byte) []*ToolError {
	return []*ToolError{
		decodeArgs(raw, new(WaitInput)), decodeArgs(raw, new(ReplyTextInput)), decodeArgs(raw, new(ReplyMediaInput)),
		decodeArgs(raw, new(FetchInput)), decodeArgs(raw, new(TypingInput)), decodeArgs(raw, new(FinishInput)),
	}
}

func TestToolArgumentsAreDecodedStrictlyWithTypedRefusals(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		raw string
		ok  bool
	}{
		"valid":                {`{"message_key":"im_0","text":"hi","idempotency_key":"k"}`, true},
		"no arguments":         {``, true},
		"null":                 {`null`, true},
		"unknown member":       {`{"message_key":"im_0","text":"hi","idempotency_key":"k","to":"x"}`, false},
		"member twice":         {`{"text":"a","text":"b"}`, false},
		"wrong type":           {`{"message_key":7}`, false},
		"not an object":        {`[1,2]`, false},
		"invalid UTF-8":        {"{\"text\":\"a\xffb\"}", false},
		"unpaired surrogate":   {`{"text":"a\ud800b"}`, false},
		"trailing garbage":     {`{"text":"a"`, false},
		"member twice by case": {`{"text":"a","TEXT":"b"}`, false},
	} {
		err := decodeArgs(json.RawMessage(c.raw), new(ReplyTextInput))
		if c.ok != (err == nil) {
			t.Errorf("%s: refusal %v, want ok=%v", name, err, c.ok)
			continue
		}
		if err != nil && (err.Code != CodeInvalidArgument || err.Status != http.StatusBadRequest || err.Message == "") {
			t.Errorf("%s: refusal %+v is not a typed 400", name, err)
		}
	}
}

func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"timeout_seconds":30}`, `{"message_key":"im_x","index":-1}`, `{"from_attachment":null}`,
		`{"data_base64":"AAAA"}`, "{\"text\":\"\x00\"}", `{"a":{"b":[1,{"c":2}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, err := range decodeAll(raw) {
			if err != nil && (err.Code != CodeInvalidArgument || err.Status != http.StatusBadRequest) {
				t.Fatalf("refusal %+v is not a typed 400", err)
			}
		}
	})
}
