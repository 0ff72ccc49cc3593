package webhook

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
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
