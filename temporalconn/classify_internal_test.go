package temporalconn

import (
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The causes the dial tests cannot provoke with the dev server (it checks no credentials)
// are named from the server's answer as the other causes are.
func TestRefusedCredentialsAreNamedUnauthenticated(t *testing.T) {
	t.Parallel()
	c := Plain("temporal.example:7233", "prod")
	c.secrets = []string{"key-0123456789"}
	for _, err := range []error{
		status.Error(codes.Unauthenticated, "Request unauthorized."),
		fmt.Errorf("failed reaching server: %w", status.Error(codes.Unauthenticated, "invalid API key key-0123456789")),
		serviceerror.NewPermissionDenied("Request unauthorized.", ""),
	} {
		got := c.diagnose(t.Context(), err)
		if CodeOf(got) != CodeUnauthenticated {
			t.Fatalf("%v: got %v", err, got)
		}
		if strings.Contains(got.Error(), "key-0123456789") {
			t.Fatalf("the key is shown: %v", got)
		}
	}
}

func TestConnectionErrorsNameTheirCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  string
		tls  bool
		code string
	}{
		{`connection error: desc = "error reading server preface: remote error: tls: bad certificate"`, true, CodeHandshakeRefused},
		{`transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for a.example, not b.example`, true, CodeUnknownAuthority},
		{`transport: authentication handshake failed: tls: first record does not look like a TLS handshake`, true, CodeHandshakeRefused},
		{`connection error: desc = "error reading server preface: EOF"`, false, CodeHandshakeRefused},
		{`dial tcp: lookup temporal.invalid: no such host`, false, CodeUnreachable},
		{`context deadline exceeded`, false, ""},
	} {
		if code, _ := classify(tc.msg, tc.tls); code != tc.code {
			t.Errorf("%q: got %q, want %q", tc.msg, code, tc.code)
		}
	}
}
