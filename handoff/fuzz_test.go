package handoff

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

const fuzzSecret = "whsec-fuzz-0123456789abcdef"

// FuzzVerify checks webhook verification with arbitrary timestamps, signature headers and
// bodies: it never panics, answers nil or one of its four errors, accepts only a
// signature header holding the body's own v1 signature at a timestamp within the
// tolerance, and always accepts the signature Sign makes for the body.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"message":{"summary":"hi"}}`)
	sig := Sign([]byte(fuzzSecret), now.Unix(), body)
	f.Add("1700000000", sig, body, int64(0))
	f.Add("1700000000", "v0=00, "+sig, body, int64(299))
	f.Add("1700000000", strings.ToUpper(sig), body, int64(-299))
	f.Add("1700000000", sig, []byte(`{"message":{"summary":"hI"}}`), int64(0))
	f.Add("1700000301", sig, body, int64(0))
	f.Add("+1700000000", sig, body, int64(0))
	f.Add("01700000000", sig, body, int64(0))
	f.Add("-1", "v1=", []byte{}, int64(0))
	f.Add("99999999999999999999", "v1=zz,,=,v1", []byte{0xff, 0}, int64(1))
	f.Add("", "", []byte(nil), int64(0))
	f.Fuzz(func(t *testing.T, timestamp, signature string, body []byte, skew int64) {
		if len(signature) > 64<<10 || len(body) > 1<<20 {
			t.Skip()
		}
		at := now.Add(time.Duration(skew) * time.Second)
		err := Verify([]byte(fuzzSecret), timestamp, signature, body, at, 0)
		switch {
		case err == nil:
			ts, perr := strconv.ParseInt(timestamp, 10, 64)
			if perr != nil || strconv.FormatInt(ts, 10) != timestamp {
				t.Fatalf("accepted the timestamp %q", timestamp)
			}
			if d := at.Sub(time.Unix(ts, 0)); d > DefaultTolerance || d < -DefaultTolerance {
				t.Fatalf("accepted a timestamp %v away", d)
			}
			want := hex.EncodeToString(mac([]byte(fuzzSecret), timestamp, body))
			found := false
			for _, part := range strings.Split(signature, ",") {
				v, s, _ := strings.Cut(strings.TrimSpace(part), "=")
				found = found || (v == SignatureVersion && strings.EqualFold(s, want))
			}
			if !found {
				t.Fatalf("accepted %q, which does not hold the body's signature", signature)
			}
		case errors.Is(err, ErrMissingSignature), errors.Is(err, ErrBadTimestamp), errors.Is(err, ErrStaleTimestamp),
			errors.Is(err, ErrBadSignature):
		default:
			t.Fatalf("Verify = %v: not one of its errors", err)
		}
		// What Sign makes for the body verifies, at its own time.
		if ts := int64(len(body)) + now.Unix(); Verify([]byte(fuzzSecret), strconv.FormatInt(ts, 10),
			Sign([]byte(fuzzSecret), ts, body), body, time.Unix(ts, 0), 0) != nil {
			t.Fatal("Sign's signature does not verify")
		}
	})
}

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
