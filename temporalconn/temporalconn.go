// Package temporalconn builds the Temporal client options of every ilinkflow process (the
// worker, the operator's CLI, and an agent that wants the same convention) from the
// Temporal SDK's client environment configuration, the one the `temporal` CLI reads too:
// a TOML profile file (TEMPORAL_CONFIG_FILE, default the user's
// temporalio/temporal.toml, profile TEMPORAL_PROFILE or "default"), then the environment
// variables over it (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS,
// TEMPORAL_TLS_CLIENT_CERT_PATH / _DATA, TEMPORAL_TLS_CLIENT_KEY_PATH / _DATA,
// TEMPORAL_TLS_SERVER_CA_CERT_PATH / _DATA, TEMPORAL_TLS_SERVER_NAME,
// TEMPORAL_TLS_DISABLE_HOST_VERIFICATION), then the settings a command line gives
// explicitly ([Overrides]) over both. An API key turns TLS on unless TLS is disabled
// explicitly.
//
// An agent connects the same way:
//
//	conn, err := temporalconn.Load(nil, temporalconn.Overrides{}) // the environment and profile
//	c, err := temporalconn.Dial(ctx, conn, client.Options{DataConverter: dc})
//
// Secrets (the API key, client keys) never leave the client options: [Conn] logs and
// prints a summary without them, and an [*Error] never carries them. A connection that
// fails is an [*Error] with a stable Code that names the cause.
package temporalconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults when neither a profile, the environment nor an override names them.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Environment variables this package reads besides the SDK's own (which it reads through
// envconfig with the same names).
const (
	EnvAddress    = "TEMPORAL_ADDRESS"
	EnvNamespace  = "TEMPORAL_NAMESPACE"
	EnvProfile    = "TEMPORAL_PROFILE"
	EnvConfigFile = "TEMPORAL_CONFIG_FILE"
	EnvAPIKey     = "TEMPORAL_API_KEY"
)

// DialTimeout bounds Dial: reaching the server, the TLS handshake and the namespace check.
const DialTimeout = 30 * time.Second

// Overrides are the connection settings given explicitly (command-line flags). A non-empty
// field wins over the profile file and the environment.
type Overrides struct {
	// Address is the frontend host:port.
	Address string
	// Namespace is the Temporal namespace.
	Namespace string
	// Profile names the profile of the config file (else TEMPORAL_PROFILE, else "default").
	Profile string
	// ConfigFile is the TOML config file (else TEMPORAL_CONFIG_FILE, else the user's
	// temporalio/temporal.toml).
	ConfigFile string
}

// Conn is a resolved connection: where to connect and how, with the credentials kept
// inside. Its exported fields are a summary without secrets; logging or printing a Conn
// shows only them.
type Conn struct {
	// Address and Namespace are what the client dials.
	Address   string
	Namespace string
	// Profile is the profile read from ConfigFile ("" when no profile was found).
	Profile    string
	ConfigFile string
	// TLS is on; ClientCert: a client certificate is presented (mutual TLS); ServerCA: a
	// custom CA verifies the server; ServerName overrides the name verified.
	TLS        bool
	ClientCert bool
	ServerCA   bool
	ServerName string
	// InsecureSkipVerify: the server's certificate is not verified
	// (TEMPORAL_TLS_DISABLE_HOST_VERIFICATION).
	InsecureSkipVerify bool
	// APIKey: an API key is sent as "authorization: Bearer <key>" on every call.
	APIKey bool

	opts    client.Options // the connection part: HostPort, Namespace, TLS, Credentials, headers
	secrets []string       // scrubbed from every error message
}

// Plain is a plaintext connection to address and namespace with no credentials (a
// configuration built in code, as tests and the local dev command use).
func Plain(address, namespace string) Conn {
	c := Conn{Address: address, Namespace: namespace}
	c.opts = client.Options{HostPort: address, Namespace: namespace}
	return c
}

// IsZero reports whether c was never resolved (neither Load nor Plain made it).
func (c Conn) IsZero() bool { return c.Address == "" && c.opts.HostPort == "" }

// WithTarget returns c dialing address and namespace instead ("" keeps the current one),
// with the same TLS settings and credentials.
func (c Conn) WithTarget(address, namespace string) Conn {
	if address != "" {
		c.Address, c.opts.HostPort = address, address
	}
	if namespace != "" {
		c.Namespace, c.opts.Namespace = namespace, namespace
	}
	return c
}

// Load resolves the connection from the profile file, the environment (read through
// getenv; nil reads the process environment; an empty value counts as unset) and o.
// A named profile that is missing, an unreadable certificate or key, or conflicting
// settings is an *Error (CodeProfileNotFound, CodeCertUnreadable, CodeConfig).
func Load(getenv func(string) string, o Overrides) (Conn, error) {
	env := lookup(getenv)
	file := strings.TrimSpace(o.ConfigFile)
	if file == "" {
		file, _ = env.LookupEnv(EnvConfigFile)
	}
	if file != "" {
		// envconfig skips a missing file silently; a file named on purpose must exist.
		if _, err := os.Stat(file); err != nil {
			return Conn{}, &Error{Code: CodeConfig, Msg: fmt.Sprintf("the Temporal config file %s cannot be read", file), Err: err}
		}
	} else {
		file = envconfig.DefaultConfigFilePath()
	}
	profileName := strings.TrimSpace(o.Profile)
	if profileName == "" {
		profileName, _ = env.LookupEnv(EnvProfile)
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		ConfigFilePath:    file,
		ConfigFileProfile: profileName,
		EnvLookup:         env,
	})
	if err != nil {
		if strings.Contains(err.Error(), "unable to find profile") {
			return Conn{}, &Error{Code: CodeProfileNotFound, Msg: fmt.Sprintf("the Temporal profile %q is not in %s", profileName, file)}
		}
		// The parser's message may quote the file's text (an API key): it is not shown.
		return Conn{}, &Error{Code: CodeConfig, Msg: fmt.Sprintf("the Temporal config file %s does not parse as a client configuration (TOML profiles)", file),
			Err: redacted{err}}
	}
	if v := strings.TrimSpace(o.Address); v != "" {
		prof.Address = v
	}
	if v := strings.TrimSpace(o.Namespace); v != "" {
		prof.Namespace = v
	}
	if strings.TrimSpace(prof.Address) == "" {
		prof.Address = DefaultAddress
	}
	if strings.TrimSpace(prof.Namespace) == "" {
		prof.Namespace = DefaultNamespace
	}
	c := Conn{Address: prof.Address, Namespace: prof.Namespace, ConfigFile: file}
	if profileName == "" {
		profileName = envconfig.DefaultConfigFileProfile
	}
	if fileHasProfile(file, profileName, env) {
		c.Profile = profileName
	}
	if prof.APIKey != "" {
		c.secrets = append(c.secrets, prof.APIKey)
	}
	if t := prof.TLS; t != nil {
		for _, b := range [][]byte{t.ClientKeyData, t.ClientCertData} {
			if len(b) > 0 {
				c.secrets = append(c.secrets, string(b))
			}
		}
	}
	host, port, err := net.SplitHostPort(c.Address)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return Conn{}, &Error{Code: CodeConfig, Address: c.Address, Msg: "the Temporal address must be host:port, e.g. 127.0.0.1:7233"}
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return Conn{}, c.certError(prof.TLS, err)
	}
	c.opts = opts
	if t := opts.ConnectionOptions.TLS; t != nil && !opts.ConnectionOptions.TLSDisabled {
		c.TLS = true
		c.ClientCert = len(t.Certificates) > 0
		c.ServerCA = t.RootCAs != nil
		c.ServerName = t.ServerName
		c.InsecureSkipVerify = t.InsecureSkipVerify
	}
	c.APIKey = prof.APIKey != ""
	return c, nil
}

// certError is the *Error of a TLS configuration envconfig refused: an unreadable
// certificate, key or CA file, PEM that does not parse, or a file and inline data set
// together.
func (c Conn) certError(t *envconfig.ClientConfigTLS, err error) error {
	msg := err.Error()
	what := "the TLS settings are inconsistent"
	code := CodeConfig
	switch {
	case strings.Contains(msg, "client cert/key path"):
		what = fmt.Sprintf("the client certificate or key cannot be read (TEMPORAL_TLS_CLIENT_CERT_PATH=%s, TEMPORAL_TLS_CLIENT_KEY_PATH=%s)", t.ClientCertPath, t.ClientKeyPath)
		code = CodeCertUnreadable
	case strings.Contains(msg, "client cert/key data"):
		what = "the client certificate or key data (TEMPORAL_TLS_CLIENT_CERT_DATA, TEMPORAL_TLS_CLIENT_KEY_DATA) is not a PEM certificate and its key"
		code = CodeCertUnreadable
	case strings.Contains(msg, "server CA"):
		what = "the server CA certificate cannot be read or is not PEM (TEMPORAL_TLS_SERVER_CA_CERT_PATH or _DATA)"
		code = CodeCertUnreadable
	}
	return &Error{Code: code, Address: c.Address, Namespace: c.Namespace, Msg: what, Err: err, secrets: c.secrets}
}

// fileHasProfile reports whether the config file holds the named profile.
func fileHasProfile(file, profile string, env envconfig.EnvLookup) bool {
	if file == "" {
		return false
	}
	cfg, err := envconfig.LoadClientConfig(envconfig.LoadClientConfigOptions{ConfigFilePath: file, EnvLookup: env})
	if err != nil {
		return false
	}
	_, ok := cfg.Profiles[profile]
	return ok
}

// ClientOptions is base (logger, metrics handler, data converter, identity, ...) with the
// connection's address, namespace, TLS, credentials and headers set.
func (c Conn) ClientOptions(base client.Options) client.Options {
	if c.IsZero() {
		c = Plain(DefaultAddress, DefaultNamespace)
	}
	base.HostPort = c.opts.HostPort
	base.Namespace = c.opts.Namespace
	base.Credentials = c.opts.Credentials
	base.HeadersProvider = c.opts.HeadersProvider
	base.ConnectionOptions.TLS = c.opts.ConnectionOptions.TLS
	base.ConnectionOptions.TLSDisabled = c.opts.ConnectionOptions.TLSDisabled
	base.ConnectionOptions.Authority = c.opts.ConnectionOptions.Authority
	return base
}

// LogValue is the summary: address, namespace, profile, TLS, client certificate, API
// key (whether one is set, never its value).
func (c Conn) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("address", c.Address), slog.String("namespace", c.Namespace)}
	if c.Profile != "" {
		attrs = append(attrs, slog.String("profile", c.Profile))
	}
	attrs = append(attrs, slog.Bool("tls", c.TLS), slog.Bool("client_cert", c.ClientCert), slog.Bool("api_key", c.APIKey))
	if c.ServerName != "" {
		attrs = append(attrs, slog.String("server_name", c.ServerName))
	}
	if c.InsecureSkipVerify {
		attrs = append(attrs, slog.Bool("insecure_skip_verify", true))
	}
	return slog.GroupValue(attrs...)
}

// String is the summary of LogValue in one line, e.g. "temporal.example:7233 namespace
// prod (TLS, client certificate)".
func (c Conn) String() string {
	var how []string
	if c.TLS {
		how = append(how, "TLS")
	}
	if c.ClientCert {
		how = append(how, "client certificate")
	}
	if c.APIKey {
		how = append(how, "API key")
	}
	if c.Profile != "" {
		how = append(how, "profile "+c.Profile)
	}
	s := c.Address + " namespace " + c.Namespace
	if len(how) > 0 {
		s += " (" + strings.Join(how, ", ") + ")"
	}
	return s
}

// GoString keeps %#v from printing the credentials.
func (c Conn) GoString() string { return "temporalconn.Conn{" + c.String() + "}" }

// Dial connects a client with base's options and c's connection, checks that the
// server answers and that the namespace exists and may be used, all within
// DialTimeout (or ctx's deadline when sooner). A transient failure of the server's own
// while the namespace is checked is asked again, never past the bound; a failure is an
// *Error naming the cause.
func Dial(ctx context.Context, c Conn, base client.Options) (client.Client, error) {
	if c.IsZero() {
		c = Plain(DefaultAddress, DefaultNamespace)
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	opts := c.ClientOptions(base)
	tc, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, c.diagnose(ctx, err)
	}
	if err := checkNamespaceRetrying(dctx, tc, c.Namespace); err != nil {
		tc.Close()
		var e *Error
		if errors.As(err, &e) {
			e.Address, e.secrets = c.Address, c.secrets
			if e.Code == CodeUnreachable {
				return nil, c.diagnose(ctx, e.Err)
			}
		}
		return nil, err
	}
	return tc, nil
}

// checkNamespaceRetrying is CheckNamespace, asked again while the server answers with a
// transient failure of its own (Internal, Unavailable, ResourceExhausted, Aborted: a
// server starting, or a persistence read that failed, as the dev server's SQLite does
// under load), until ctx ends. A worker that starts beside a busy server waits for it
// instead of exiting; any other answer is final at once.
func checkNamespaceRetrying(ctx context.Context, tc client.Client, namespace string) error {
	wait := 100 * time.Millisecond
	for {
		err := CheckNamespace(ctx, tc, namespace)
		var e *Error
		if err == nil || !errors.As(err, &e) || e.Code != CodeUnreachable || !transientStatus(e.Err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// transientStatus reports whether err is a server's answer that a later call may not
// repeat.
func transientStatus(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.Internal, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// CheckNamespace asks the server to describe namespace through tc: an unknown namespace
// is an *Error CodeNamespaceNotFound, refused credentials CodeUnauthenticated.
func CheckNamespace(ctx context.Context, tc client.Client, namespace string) error {
	_, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	var nnf *serviceerror.NamespaceNotFound
	if errors.As(err, &nf) || errors.As(err, &nnf) {
		return &Error{Code: CodeNamespaceNotFound, Namespace: namespace,
			Msg: "the namespace does not exist on this server (create it, or set TEMPORAL_NAMESPACE / --temporal-namespace)", Err: err}
	}
	if authErr(err) {
		return &Error{Code: CodeUnauthenticated, Namespace: namespace, Msg: unauthenticatedMsg, Err: err}
	}
	return &Error{Code: CodeUnreachable, Namespace: namespace, Msg: "the server did not describe the namespace", Err: err}
}

const unauthenticatedMsg = "the server refused the credentials (API key or client certificate not accepted for this namespace)"

func authErr(err error) bool {
	var pd *serviceerror.PermissionDenied
	if errors.As(err, &pd) {
		return true
	}
	switch serviceerror.ToStatus(err).Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return status.Code(err) == codes.Unauthenticated
}

// diagnose turns a failed dial into an *Error naming the cause: it reads the cause from
// the error and, when the error does not say, probes the address once (a TLS handshake,
// or the HTTP/2 preface in plaintext) to find out.
func (c Conn) diagnose(ctx context.Context, err error) error {
	e := &Error{Address: c.Address, Namespace: c.Namespace, Err: err, secrets: c.secrets}
	if authErr(err) {
		e.Code, e.Msg = CodeUnauthenticated, unauthenticatedMsg
		return e
	}
	if code, msg := classify(err.Error(), c.TLS); code != "" {
		e.Code, e.Msg = code, msg
		return e
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if perr := probe(pctx, c); perr != nil {
		if code, msg := classify(perr.Error(), c.TLS); code != "" {
			e.Code, e.Msg = code, msg
			e.Err = fmt.Errorf("%w (probe: %s)", err, perr.Error())
			return e
		}
	}
	e.Code, e.Msg = CodeUnreachable, "the server did not answer"
	return e
}

// classify names the cause a connection error's text shows ("" when it shows none).
func classify(msg string, useTLS bool) (code, what string) {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "remote error: tls"):
		return CodeHandshakeRefused, "the server refused the TLS handshake (a client certificate it does not accept, or none where it requires one)"
	case strings.Contains(m, "first record does not look like a tls handshake"):
		return CodeHandshakeRefused, "the server does not speak TLS on this port (TLS is on here: TEMPORAL_TLS, an API key or a certificate turned it on)"
	case strings.Contains(m, "x509:") || strings.Contains(m, "certificate signed by unknown authority"):
		return CodeUnknownAuthority, "the server's certificate is not trusted: unknown authority or another name (set TEMPORAL_TLS_SERVER_CA_CERT_PATH and TEMPORAL_TLS_SERVER_NAME)"
	case strings.Contains(m, "tls:") || strings.Contains(m, "handshake"):
		return CodeHandshakeRefused, "the TLS handshake failed"
	case !useTLS && (strings.Contains(m, "server preface") || strings.Contains(m, "frame too large") ||
		strings.Contains(m, "connection reset") || strings.Contains(m, "eof") || strings.Contains(m, "http2")):
		return CodeHandshakeRefused, "the server closed a plaintext connection: it may require TLS (set TEMPORAL_TLS=true, a client certificate or an API key)"
	case strings.Contains(m, "connection refused") || strings.Contains(m, "no such host") || strings.Contains(m, "no route to host"):
		return CodeUnreachable, "nothing answers at this address"
	}
	return "", ""
}

// probe opens one connection to c's address the way the client would and reports what
// refuses it: the TLS handshake (with the client's configuration), or, in plaintext, the
// server's answer to the HTTP/2 preface.
func probe(ctx context.Context, c Conn) error {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", c.Address)
	if err != nil {
		return err
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	conn := raw
	if c.TLS {
		cfg := c.opts.ConnectionOptions.TLS.Clone()
		cfg.NextProtos = []string{"h2"}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(c.Address)
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		conn = tc
	}
	// The HTTP/2 client preface and an empty SETTINGS frame; a gRPC server answers with
	// its SETTINGS frame (type 4). TLS 1.3 reports a refused client certificate here.
	if _, err := conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		return err
	}
	var hdr [9]byte
	if _, err := ioReadFull(conn, hdr[:]); err != nil {
		return fmt.Errorf("reading the server preface: %w", err)
	}
	if hdr[3] != 4 {
		return errors.New("http2: the server preface is not a SETTINGS frame")
	}
	return nil
}

func ioReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// lookup adapts getenv to envconfig's lookup: an empty value counts as unset; nil is the
// process environment. The TEMPORAL_GRPC_META_* headers come from the process
// environment only.
func lookup(getenv func(string) string) envconfig.EnvLookup {
	if getenv == nil {
		getenv = os.Getenv
	}
	return envFunc(getenv)
}

type envFunc func(string) string

func (f envFunc) LookupEnv(k string) (string, bool) {
	v := strings.TrimSpace(f(k))
	if strings.HasSuffix(k, "_DATA") {
		v = f(k) // PEM keeps its own whitespace
		if strings.TrimSpace(v) == "" {
			v = ""
		}
	}
	return v, v != ""
}

func (f envFunc) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TEMPORAL_GRPC_META_") {
			out = append(out, k+"="+f(k))
		}
	}
	return out
}

// redacted wraps an error whose text may quote a secret: it unwraps to it but prints
// nothing of it.
type redacted struct{ err error }

func (r redacted) Error() string { return "details withheld: they may quote the file's secrets" }
func (r redacted) Unwrap() error { return r.err }
