package handoff

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// FuzzWebhookAnswer checks the parsing of a webhook's 2xx answer with arbitrary bodies (the
// seeds are small: fuzzing large inputs is slow; TestWebhookAnswerWithAnUnsendableReply…
// has a reply over the limit): it
// never panics; an accepted answer has at most maxReplies replies, each one sendable
// (vocab.CheckText), none blank; a refusal is a *PermanentError with a code, whose reason
// is valid UTF-8, bounded and never quotes the body.
func FuzzWebhookAnswer(f *testing.F) {
	for _, s := range []string{
		``, ` `, `null`, `{}`, `[]`, `"x"`, `{"handled":true}`,
		`{"replies":["first"," ","second"],"handled":true,"extra":1}`,
		`{"replies":["a"],"replies":["b"]}`,
		`{"handled":false,"Handled":true}`,
		`{"replies":["bad \u0000"]}`,
		`{"replies":["ok \ud83d\ude00"]}`,
		`{"replies":["ok \ud800"]}`,
		"{\"replies\":[\"ok \xff\"]}",
		`{"replies":[1,2]}`,
		`{"replies":[` + strings.Repeat(`"a",`, maxReplies) + `"a"]}`,
		`{"replies":["a"]} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ans, err := parseAnswer(200, raw)
		if err != nil {
			var perm *PermanentError
			if !errors.As(err, &perm) || (perm.Code != CodeAnswerInvalid && perm.Code != CodeReplyRefused) {
				t.Fatalf("refusal %v (%T): want a *PermanentError with an answer code", err, err)
			}
			if (perm.Code == CodeReplyRefused) != (perm.Fault != vocab.TextOK) {
				t.Fatalf("refusal %s with fault %q", perm.Code, perm.Fault)
			}
			if !utf8.ValidString(perm.Reason) || len(perm.Reason) > 300 {
				t.Fatalf("reason %q", perm.Reason)
			}
			if len(raw) > 90 && strings.Contains(perm.Reason, string(raw)) { // longer than any fixed part of a reason
				t.Fatalf("the reason quotes the body: %q", perm.Reason)
			}
			return
		}
		if len(ans.Replies) > maxReplies {
			t.Fatalf("%d replies accepted", len(ans.Replies))
		}
		for i, r := range ans.Replies {
			if fault := vocab.CheckText(r, vocab.MaxTextBytes); fault != vocab.TextOK {
				t.Fatalf("reply %d accepted but not sendable: %s", i, fault)
			}
		}
	})
}

// FuzzEcho checks that the echo of any summary is sendable (vocab.CheckText), NUL
// included, and within its limit: small here (fuzzing large inputs is slow; the default
// limit is TestEchoOfATextWithNULIsSendableWithAVisibleMarker's).
func FuzzEcho(f *testing.F) {
	const limit = 160
	for _, s := range []string{"", "hello", "a\x00b", strings.Repeat("\x00", limit/3), "\xff\xfe", strings.Repeat("é", limit), " \t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, summary string) {
		text := echoText(summary, limit)
		if fault := vocab.CheckText(text, limit); fault != vocab.TextOK {
			t.Fatalf("the echo of %d bytes is not sendable: %s", len(summary), fault)
		}
		if !strings.HasPrefix(text, EchoPrefix) {
			t.Fatalf("echo %q", text)
		}
	})
}
