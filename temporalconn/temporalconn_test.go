package temporalconn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/temporalconn"
)

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// noFile keeps a test from reading the user's own temporal.toml.
func noFile(t *testing.T, m map[string]string) map[string]string {
	t.Helper()
	if _, ok := m[temporalconn.EnvConfigFile]; !ok {
		p := filepath.Join(t.TempDir(), "none.toml")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		m[temporalconn.EnvConfigFile] = p
	}
	return m
}

func TestWithoutSettingsTheConnectionIsPlaintextToTheLocalDefault(t *testing.T) {
	t.Parallel()
	c, err := temporalconn.Load(env(noFile(t, map[string]string{})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != temporalconn.DefaultAddress || c.Namespace != temporalconn.DefaultNamespace || c.TLS || c.APIKey || c.ClientCert {
		t.Fatalf("got %+v", c)
	}
	o := c.ClientOptions(client.Options{Identity: "me"})
	if o.HostPort != temporalconn.DefaultAddress || o.Namespace != "default" || o.ConnectionOptions.TLS != nil || o.Credentials != nil || o.Identity != "me" {
		t.Fatalf("options %+v", o)
	}
}

func TestStandardEnvironmentVariablesConfigureMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testkit.NewCA(t, "test CA")
	certPath, keyPath := ca.Client(t, "worker").WriteFiles(t, dir, "client")
	c, err := temporalconn.Load(env(noFile(t, map[string]string{
		"TEMPORAL_ADDRESS":                 "temporal.example:7233",
		"TEMPORAL_NAMESPACE":               "prod",
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    certPath,
		"TEMPORAL_TLS_CLIENT_KEY_PATH":     keyPath,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": ca.WriteCert(t, dir, "ca"),
		"TEMPORAL_TLS_SERVER_NAME":         "frontend.example",
	})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != "temporal.example:7233" || c.Namespace != "prod" || !c.TLS || !c.ClientCert || !c.ServerCA || c.ServerName != "frontend.example" || c.APIKey {
		t.Fatalf("got %+v", c)
	}
	tc := c.ClientOptions(client.Options{}).ConnectionOptions.TLS
	if tc == nil || len(tc.Certificates) != 1 || tc.RootCAs == nil || tc.ServerName != "frontend.example" {
		t.Fatalf("TLS config %+v", tc)
	}
}

func TestInlinePEMClientCertificateAndKeyWork(t *testing.T) {
	t.Parallel()
	ca := testkit.NewCA(t, "test CA")
	leaf := ca.Client(t, "worker")
	c, err := temporalconn.Load(env(noFile(t, map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_DATA":    string(leaf.CertPEM),
		"TEMPORAL_TLS_CLIENT_KEY_DATA":     string(leaf.KeyPEM),
		"TEMPORAL_TLS_SERVER_CA_CERT_DATA": string(ca.CertPEM),
	})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.TLS || !c.ClientCert || !c.ServerCA {
		t.Fatalf("got %+v", c)
	}
}

func TestExplicitOverridesWinOverProfileAndEnvironment(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "temporal.toml")
	writeFile(t, file, "[profile.default]\naddress = \"file:7233\"\nnamespace = \"file-ns\"\n")
	e := env(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_NAMESPACE": "env-ns"})
	c, err := temporalconn.Load(e, temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != "file:7233" || c.Namespace != "env-ns" || c.Profile != "default" {
		t.Fatalf("environment over profile: got %+v", c)
	}
	c, err = temporalconn.Load(e, temporalconn.Overrides{Address: "flag:7233", Namespace: "flag-ns"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != "flag:7233" || c.Namespace != "flag-ns" {
		t.Fatalf("flags over both: got %+v", c)
	}
}

func TestProfileIsChosenByNameAndAMissingOneIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testkit.NewCA(t, "test CA")
	certPath, keyPath := ca.Client(t, "worker").WriteFiles(t, dir, "client")
	file := filepath.Join(dir, "temporal.toml")
	writeFile(t, file, fmt.Sprintf(`[profile.default]
address = "127.0.0.1:7233"

[profile.prod]
address = "prod.tmprl.cloud:7233"
namespace = "prod.acct"
[profile.prod.tls]
client_cert_path = %q
client_key_path = %q
`, certPath, keyPath))
	c, err := temporalconn.Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod"}), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Address != "prod.tmprl.cloud:7233" || c.Namespace != "prod.acct" || !c.TLS || !c.ClientCert || c.Profile != "prod" {
		t.Fatalf("got %+v", c)
	}
	c, err = temporalconn.Load(env(map[string]string{"TEMPORAL_PROFILE": "prod"}), temporalconn.Overrides{ConfigFile: file, Profile: "default"})
	if err != nil || c.Address != "127.0.0.1:7233" || c.TLS {
		t.Fatalf("the --temporal-profile override: %+v, %v", c, err)
	}
	_, err = temporalconn.Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file}), temporalconn.Overrides{Profile: "staging"})
	if temporalconn.CodeOf(err) != temporalconn.CodeProfileNotFound || !strings.Contains(err.Error(), "staging") {
		t.Fatalf("missing profile: %v", err)
	}
	_, err = temporalconn.Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "absent.toml")}), temporalconn.Overrides{})
	if temporalconn.CodeOf(err) != temporalconn.CodeConfig {
		t.Fatalf("absent named file: %v", err)
	}
}

func TestAPIKeyTurnsTLSOnUnlessTLSIsDisabled(t *testing.T) {
	t.Parallel()
	c, err := temporalconn.Load(env(noFile(t, map[string]string{"TEMPORAL_API_KEY": "key-abcdef123456"})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	o := c.ClientOptions(client.Options{})
	if !c.APIKey || !c.TLS || o.Credentials == nil || o.ConnectionOptions.TLS == nil {
		t.Fatalf("got %+v", c)
	}
	c, err = temporalconn.Load(env(noFile(t, map[string]string{"TEMPORAL_API_KEY": "key-abcdef123456", "TEMPORAL_TLS": "false"})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.APIKey || c.TLS || !c.ClientOptions(client.Options{}).ConnectionOptions.TLSDisabled {
		t.Fatalf("TEMPORAL_TLS=false: got %+v", c)
	}
}

func TestUnreadableCertificateIsAStartupErrorNamingIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := temporalconn.Load(env(noFile(t, map[string]string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH": filepath.Join(dir, "missing.crt"),
		"TEMPORAL_TLS_CLIENT_KEY_PATH":  filepath.Join(dir, "missing.key"),
	})), temporalconn.Overrides{})
	if temporalconn.CodeOf(err) != temporalconn.CodeCertUnreadable || !strings.Contains(err.Error(), "missing.crt") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v", err)
	}
	_, err = temporalconn.Load(env(noFile(t, map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_DATA": "not PEM"})), temporalconn.Overrides{})
	if temporalconn.CodeOf(err) != temporalconn.CodeCertUnreadable {
		t.Fatalf("bad CA data: %v", err)
	}
}

func TestSecretsNeverAppearInSummaryLogOrErrors(t *testing.T) {
	t.Parallel()
	const apiKey = "tmprl-secret-api-key-0123456789"
	ca := testkit.NewCA(t, "test CA")
	leaf := ca.Client(t, "worker")
	c, err := temporalconn.Load(env(noFile(t, map[string]string{
		"TEMPORAL_API_KEY":              apiKey,
		"TEMPORAL_TLS_CLIENT_CERT_DATA": string(leaf.CertPEM),
		"TEMPORAL_TLS_CLIENT_KEY_DATA":  string(leaf.KeyPEM),
	})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("connect", "temporal", c)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("connect", "temporal", c)
	fmt.Fprintf(&buf, "%v %+v %#v %s", c, c, c, c)
	keyBody := strings.Split(string(leaf.KeyPEM), "\n")[1]
	for _, s := range []string{apiKey, keyBody} {
		if strings.Contains(buf.String(), s) {
			t.Fatalf("a secret is shown: %s", buf.String())
		}
	}
	if !strings.Contains(buf.String(), `"api_key":true`) {
		t.Fatalf("the summary should say an API key is set: %s", buf.String())
	}
	// A config file that does not parse around a key: the error does not quote it.
	file := filepath.Join(t.TempDir(), "temporal.toml")
	writeFile(t, file, "[profile.default]\napi_key = \""+apiKey+"\" junk\n")
	_, err = temporalconn.Load(env(map[string]string{"TEMPORAL_CONFIG_FILE": file}), temporalconn.Overrides{})
	if err == nil || strings.Contains(err.Error(), apiKey) || temporalconn.CodeOf(err) != temporalconn.CodeConfig {
		t.Fatalf("parse error: %v", err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDialNamesTheCauseOfAFailedConnectionWithinItsBound dials the real dev server
// behind a TLS-terminating proxy that requires a client certificate of a test CA, in
// every way that must fail, and once in the way that works: each failure is one line
// naming its cause with a stable code, well within a minute.
func TestDialNamesTheCauseOfAFailedConnectionWithinItsBound(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ca, other := testkit.NewCA(t, "test CA"), testkit.NewCA(t, "another CA")
	proxy := testkit.NewTLSProxy(t, dev.HostPort, ca.Server(t, "localhost").TLS, ca.Pool)
	dir := t.TempDir()
	caPath := ca.WriteCert(t, dir, "ca")
	goodCert, goodKey := ca.Client(t, "worker").WriteFiles(t, dir, "good")
	badCert, badKey := other.Client(t, "worker").WriteFiles(t, dir, "bad")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()

	cases := []struct {
		name string
		env  map[string]string
		code string // "" for success
	}{
		{"mutual TLS with the CA's client certificate connects", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH": caPath, "TEMPORAL_TLS_CLIENT_CERT_PATH": goodCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": goodKey}, ""},
		{"a client certificate of another CA is refused", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH": caPath, "TEMPORAL_TLS_CLIENT_CERT_PATH": badCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": badKey}, temporalconn.CodeHandshakeRefused},
		{"plaintext to the TLS port is refused", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr}, temporalconn.CodeHandshakeRefused},
		{"a server certificate of an unknown authority is not trusted", map[string]string{"TEMPORAL_ADDRESS": proxy.Addr,
			"TEMPORAL_TLS": "true", "TEMPORAL_TLS_CLIENT_CERT_PATH": goodCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": goodKey}, temporalconn.CodeUnknownAuthority},
		{"TLS to a plaintext server is refused", map[string]string{"TEMPORAL_ADDRESS": dev.HostPort, "TEMPORAL_TLS": "true"}, temporalconn.CodeHandshakeRefused},
		{"nothing listening is unreachable", map[string]string{"TEMPORAL_ADDRESS": closedAddr}, temporalconn.CodeUnreachable},
		{"an unknown namespace is named", map[string]string{"TEMPORAL_ADDRESS": dev.HostPort, "TEMPORAL_NAMESPACE": "no-such-namespace"}, temporalconn.CodeNamespaceNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := noFile(t, tc.env)
			if e["TEMPORAL_NAMESPACE"] == "" {
				e["TEMPORAL_NAMESPACE"] = dev.Namespace
			}
			conn, err := temporalconn.Load(env(e), temporalconn.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			c, err := temporalconn.Dial(context.Background(), conn, client.Options{})
			took := time.Since(began)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			var ce *temporalconn.Error
			if !errors.As(err, &ce) || ce.Code != tc.code || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v (code %q), want code %s on one line", err, temporalconn.CodeOf(err), tc.code)
			}
			if took > time.Minute {
				t.Fatalf("failed after %v, want within a minute", took)
			}
			t.Logf("%v (after %v)", err, took.Round(time.Millisecond))
		})
	}
}

// TestAPIKeyIsSentAsABearerAuthorizationOnEveryCall dials through a TLS-terminating
// proxy that reads every request's headers: each carries "authorization: Bearer <key>".
func TestAPIKeyIsSentAsABearerAuthorizationOnEveryCall(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	ca := testkit.NewCA(t, "test CA")
	proxy := testkit.NewTLSProxy(t, dev.HostPort, ca.Server(t).TLS, nil)
	const apiKey = "test-api-key-5f0c9a7e"
	conn, err := temporalconn.Load(env(noFile(t, map[string]string{"TEMPORAL_ADDRESS": proxy.Addr, "TEMPORAL_NAMESPACE": dev.Namespace,
		"TEMPORAL_API_KEY": apiKey, "TEMPORAL_TLS_SERVER_CA_CERT_DATA": string(ca.CertPEM)})), temporalconn.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := temporalconn.Dial(context.Background(), conn, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reqs := proxy.Requests()
	if len(reqs) < 2 {
		t.Fatalf("saw %d requests, want the system info and the namespace check at least", len(reqs))
	}
	for _, r := range reqs {
		if r.Authorization != "Bearer "+apiKey {
			t.Fatalf("request %s carried authorization %q", r.Path, r.Authorization)
		}
	}
}

// A transient failure of the server's own while the namespace is checked (the dev
// server's SQLite answers "GetNamespace operation failed. Error interrupted (9)" under
// load) is asked again within Dial's bound: the worker starts once the server answers,
// and a failure that lasts is still reported with its cause when the bound ends.
func TestDialAsksAgainWhileTheServerFailsTransiently(t *testing.T) {
	t.Parallel()
	dev := devserver.Start(t)
	conn := temporalconn.Plain(dev.HostPort, dev.Namespace)
	failing := func(failures *atomic.Int32, always bool) client.Options {
		return client.Options{ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
				invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if strings.HasSuffix(method, "/DescribeNamespace") && (always || failures.Load() < 2) {
					failures.Add(1)
					return status.Error(codes.Internal, "GetNamespace operation failed. Error interrupted (9)")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})}}}
	}
	var twice atomic.Int32
	tc, err := temporalconn.Dial(context.Background(), conn, failing(&twice, false))
	if err != nil {
		t.Fatalf("two transient failures, then an answer: %v", err)
	}
	tc.Close()
	if n := twice.Load(); n != 2 {
		t.Fatalf("the namespace check failed %d times, want 2 before it was answered", n)
	}
	var always atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = temporalconn.Dial(ctx, conn, failing(&always, true))
	if temporalconn.CodeOf(err) != temporalconn.CodeUnreachable || always.Load() < 2 {
		t.Fatalf("a lasting failure: %v after %d checks, want %s after several", err, always.Load(), temporalconn.CodeUnreachable)
	}
}
