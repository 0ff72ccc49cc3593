package temporalconn

import (
	"errors"
	"strings"
)

// Stable codes of an *Error: callers and operators branch on them.
const (
	// CodeConfig: the settings are inconsistent (a bad address, a config file that does
	// not parse or is missing, a certificate path set with inline data).
	CodeConfig = "temporal_config_invalid"
	// CodeProfileNotFound: the profile named by TEMPORAL_PROFILE or --temporal-profile is
	// not in the config file.
	CodeProfileNotFound = "temporal_profile_not_found"
	// CodeCertUnreadable: a client certificate, its key or the server CA cannot be read
	// or does not parse.
	CodeCertUnreadable = "temporal_cert_unreadable"
	// CodeUnknownAuthority: the server's certificate does not verify (an unknown
	// authority, or a name the certificate does not hold).
	CodeUnknownAuthority = "temporal_unknown_authority"
	// CodeHandshakeRefused: the server refused the TLS handshake (the client certificate),
	// or TLS and plaintext do not match on the two sides.
	CodeHandshakeRefused = "temporal_handshake_refused"
	// CodeUnauthenticated: the server refused the credentials (API key, certificate) for
	// the namespace.
	CodeUnauthenticated = "temporal_unauthenticated"
	// CodeNamespaceNotFound: the namespace does not exist on the server.
	CodeNamespaceNotFound = "temporal_namespace_not_found"
	// CodeUnreachable: nothing answered at the address within DialTimeout.
	CodeUnreachable = "temporal_unreachable"
)

// Error is a failure to configure or open a Temporal connection. Its message is one line:
// the cause, the address and namespace, the stable Code, and the underlying error with
// any secret of the connection removed.
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Address and Namespace are the target ("" when not known yet).
	Address   string
	Namespace string
	// Msg says what is wrong and what to set, free of secrets.
	Msg string
	// Err is the underlying error, when there is one.
	Err error

	secrets []string
}

// Error is "Temporal at <address> (namespace <ns>): <msg> [<code>]: <cause>", on one line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("Temporal")
	if e.Address != "" {
		b.WriteString(" at " + e.Address)
	}
	if e.Namespace != "" {
		b.WriteString(" (namespace " + e.Namespace + ")")
	}
	b.WriteString(": " + e.Msg + " [" + e.Code + "]")
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return oneLine(scrub(b.String(), e.secrets))
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches an *Error with the same Code, so errors.Is(err, &Error{Code: c}) tests the
// cause.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the Code of the *Error in err's chain ("" when there is none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// scrub replaces every secret in s.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// oneLine joins the lines of s.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")), " ")
}
