package webhook_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/webhook"
)

const testSecret = "whsec-test-0123456789abcdef"

func TestSignMatchesTheDocumentedRecipe(t *testing.T) {
	// hex(HMAC-SHA256(secret, "1700000000" + "." + body)), computed independently.
	got := webhook.Sign([]byte(testSecret), 1700000000, []byte(`{"message":{}}`))
	want := "v1=45f23f49a42bb4090fa6215dbc59af96ca9dcc09bb5365f2c53a4bbaf2b57e58"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	secret := []byte(testSecret)
	body := []byte(`{"message":{"summary":"hi"}}`)
	now := time.Unix(1700000000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := webhook.Sign(secret, now.Unix(), body)
	other := webhook.Sign([]byte("another-secret-0123456789"), now.Unix(), body)
	cases := []struct {
		name      string
		secret    []byte
		ts, sig   string
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"valid", secret, ts, sig, body, now, 0, nil},
		{"valid within tolerance", secret, ts, sig, body, now.Add(4 * time.Minute), 0, nil},
		{"rotation: one of several signatures", secret, ts, other + ", " + sig, body, now, 0, nil},
		{"tampered body", secret, ts, sig, []byte(`{"message":{"summary":"hI"}}`), now, 0, webhook.ErrBadSignature},
		{"wrong secret", []byte("wrong-secret-0123456789"), ts, sig, body, now, 0, webhook.ErrBadSignature},
		{"signature of another timestamp", secret, strconv.FormatInt(now.Unix()+1, 10), sig, body, now, 0, webhook.ErrBadSignature},
		{"unknown version", secret, ts, "v2=" + strings.TrimPrefix(sig, "v1="), body, now, 0, webhook.ErrBadSignature},
		{"not hex", secret, ts, "v1=zz", body, now, 0, webhook.ErrBadSignature},
		{"stale timestamp", secret, ts, sig, body, now.Add(6 * time.Minute), 0, webhook.ErrStaleTimestamp},
		{"future timestamp", secret, ts, sig, body, now.Add(-6 * time.Minute), 0, webhook.ErrStaleTimestamp},
		{"stale under a tight tolerance", secret, ts, sig, body, now.Add(31 * time.Second), 30 * time.Second, webhook.ErrStaleTimestamp},
		{"timestamp not a number", secret, "17e8", sig, body, now, 0, webhook.ErrBadTimestamp},
		{"timestamp with a sign", secret, "+" + ts, sig, body, now, 0, webhook.ErrBadTimestamp},
		{"missing timestamp", secret, "", sig, body, now, 0, webhook.ErrMissingSignature},
		{"missing signature", secret, ts, "", body, now, 0, webhook.ErrMissingSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := webhook.Verify(c.secret, c.ts, c.sig, c.body, c.now, c.tolerance)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}
