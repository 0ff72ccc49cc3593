// Package devserver runs the real Temporal dev server (the `temporal` CLI, started through
// go.temporal.io/sdk/testsuite.StartDevServer) for integration tests. No binary is
// downloaded: a missing CLI is built with `go install` at its pinned version ([EnsureCLI]),
// and a test whose server does not start fails with the reason. In -short mode (the fast
// tier, `go test -short`) a test that needs the server or the CLI skips instead
// ([SkipShort]), and nothing is installed.
//
// A test binary shares one server when its TestMain calls [Main]; without it, [Start] gives
// each test a private server that its cleanup stops. Either way each test should use its
// own task queue ([TaskQueue]) so that tests stay isolated on a shared server. A server
// started by [New] with a database file ([Options.DBFile]) can be halted and restarted with
// its state on the same address ([Server.Halt], [Server.Restart]), as a test of a Temporal
// restart needs.
package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// CLIVersion is the pinned version of the Temporal CLI.
const CLIVersion = "v1.5.1"

// InstallCommand installs the pinned CLI into $(go env GOPATH)/bin.
const InstallCommand = "go install github.com/temporalio/cli/cmd/temporal@" + CLIVersion

// InstallCost is the one statement of what getting the Temporal CLI costs, measured on a
// busy 2-core machine: [EnsureCLI] prints it before it builds the CLI and the error of a
// missing CLI carries it (the README says the same).
const InstallCost = "building it from source takes 7-20 minutes on a 2-core machine the first time (cached after); " +
	"installing the official binary takes seconds: brew install temporal, the release archive from https://temporal.download/cli, " +
	"or curl -sSf https://temporal.download/cli.sh | sh"

// MissingCLINotice is what [EnsureCLI] prints before it falls back to building the CLI.
const MissingCLINotice = "Temporal CLI: no `temporal` on PATH (nor at $" + EnvCLI + " or in $(go env GOPATH)/bin), so running " +
	InstallCommand + ": " + InstallCost + " (press Ctrl-C, install it, and run again)"

// EnvCLI names the environment variable that points at the CLI binary.
const EnvCLI = "TEMPORAL_CLI"

// DefaultNamespace is the namespace the test servers register and clients use.
const DefaultNamespace = "ilinkflow-test"

// SuggestContinueAsNewEvents is the history length after which the servers started here
// suggest continue-as-new (the server's default is 4096 events, far beyond what a
// real-time test reaches).
const SuggestContinueAsNewEvents = 200

// startTimeout bounds starting a server (the CLI is ready in about a second).
const startTimeout = 2 * time.Minute

// defaultArgs are the dev server flags every server gets: usable continue-as-new
// thresholds, the APIs the workflows use, ilinkflow's search attributes (in the
// namespace created at start; NewNamespace creates them in its own), and fast SQLite
// settings.
var defaultArgs = append([]string{
	"--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=" + strconv.Itoa(SuggestContinueAsNewEvents),
	"--dynamic-config-value", "limit.historySize.suggestContinueAsNew=1048576",
	"--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true",
	"--dynamic-config-value", "frontend.enableExecuteMultiOperation=true",
	"--sqlite-pragma", "journal_mode=WAL",
	"--sqlite-pragma", "synchronous=OFF",
}, wfapi.DevServerArgs()...)

// Options configures [New].
type Options struct {
	// Namespace to register and use (DefaultNamespace when empty).
	Namespace string
	// ExtraArgs are appended to the dev server's command line (after the defaults, so a
	// repeated --dynamic-config-value overrides them).
	ExtraArgs []string
	// LogLevel of the server process ("error" when empty).
	LogLevel string
	// Logger receives the SDK client's log (warnings and errors to stderr when nil).
	Logger *slog.Logger
	// DBFile is the SQLite file the server keeps its state in, so that [Server.Restart]
	// brings back its namespaces, workflows and task queues. Empty: state in memory, lost
	// when the process stops (the server cannot be restarted).
	DBFile string
}

// Server is a running dev server.
type Server struct {
	// HostPort is the frontend address, e.g. 127.0.0.1:41234.
	HostPort string
	// Namespace is the registered namespace the client uses.
	Namespace string
	// Client is connected to the server and Namespace. Do not close it; Stop does.
	Client client.Client

	opts     Options // as started, with defaults filled in
	cli      string
	out      *OutputTail
	logger   tlog.Logger
	stopOnce sync.Once
	stopErr  error

	mu  sync.Mutex // guards dev across Halt, Restart and Stop
	dev *testsuite.DevServer
}

// New starts a dev server with the CLI that [FindCLI] finds, installing the pinned CLI
// with `go install` first when none is found (unless $ILINKFLOW_NO_CLI_INSTALL is set), so
// that the test command works on a fresh clone. The caller stops it.
func New(ctx context.Context, opts Options) (*Server, error) {
	path, err := EnsureCLI(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "error"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	out := &OutputTail{Max: 64 << 10}
	clientLogger := tlog.NewStructuredLogger(logger.With("component", "devserver-client"))
	s := &Server{Namespace: opts.Namespace, opts: opts, cli: path, out: out, logger: clientLogger}
	dev, err := s.start(ctx, "")
	if err != nil {
		return nil, err
	}
	s.dev, s.HostPort, s.Client = dev, dev.FrontendHostPort(), dev.Client()
	return s, nil
}

// start runs the server process, on hostPort when set (else a free port).
func (s *Server) start(ctx context.Context, hostPort string) (*testsuite.DevServer, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	dev, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: s.cli,
		ClientOptions: &client.Options{
			HostPort:  hostPort,
			Namespace: s.opts.Namespace,
			Logger:    s.logger,
		},
		DBFilename: s.opts.DBFile,
		EnableUI:   false,
		LogLevel:   s.opts.LogLevel,
		LogFormat:  "json",
		ExtraArgs:  append(append([]string(nil), defaultArgs...), s.opts.ExtraArgs...),
		// A writer that is not an *os.File makes exec copy through a pipe owned by this
		// process, so an abandoned server cannot hold the test's output open.
		Stdout: s.out,
		Stderr: s.out,
	})
	if err != nil {
		return nil, fmt.Errorf("devserver: start %s: %w%s", s.cli, err, s.out.Suffix())
	}
	return dev, nil
}

// stopProcess stops a server process and waits for it to exit.
func stopProcess(dev *testsuite.DevServer) error {
	err := dev.Stop()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		// The CLI exits non-zero on SIGINT; an exit is what was asked for.
		err = nil
	}
	return err
}

// Halt stops the server process (gracefully, as an operator's restart does) and waits
// for it to exit, keeping its address and database file for [Server.Restart]. Clients,
// Client included, stay open and reconnect once the server is back. Halting a halted
// server does nothing.
func (s *Server) Halt() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev == nil {
		return nil
	}
	dev := s.dev
	s.dev = nil
	if c := dev.Client(); c != s.Client {
		c.Close() // a restarted process's own client; Client stays open
	}
	return stopProcess(dev)
}

// Restart starts a halted server again on the same address with the same database file,
// so it has the state it had when halted; a running server is halted first. It returns
// when the server answers. A server without a DBFile cannot be restarted.
func (s *Server) Restart(ctx context.Context) error {
	if s.opts.DBFile == "" {
		return errors.New("devserver: restart needs Options.DBFile (the state of an in-memory server is gone)")
	}
	if err := s.Halt(); err != nil {
		return err
	}
	s.mu.Lock()
	dev, err := s.start(ctx, s.HostPort)
	if err == nil {
		s.dev = dev
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// Client (dialed to the first process) reconnects by itself, but only after its
	// connection's back-off since the refusals while the server was down: Restart returns
	// once it answers, so that a caller's next call through it does not fail. The new
	// process's own client is closed by Halt or Stop.
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Client.CheckHealth(hctx, &client.CheckHealthRequest{})
		cancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("devserver: restarted, but its client does not reach it: %w", err)
		case <-t.C:
		}
	}
}

// Stop closes the client and stops the server, waiting for the process to exit. It is
// safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.Client.Close()
		s.stopErr = s.Halt()
	})
	return s.stopErr
}

// Output returns the tail of the server process's output (its log), for diagnostics.
func (s *Server) Output() string { return s.out.String() }

// Dial opens another client to the server with the given options: HostPort is filled in,
// and Namespace when empty, as is the logger. The caller closes it.
func (s *Server) Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	opts.HostPort = s.HostPort
	if opts.Namespace == "" {
		opts.Namespace = s.Namespace
	}
	if opts.Logger == nil {
		opts.Logger = s.logger
	}
	return client.DialContext(ctx, opts)
}

// NewNamespace registers a namespace of its own for tb on the server, with ilinkflow's
// search attributes, and returns its name and a client for it, closed at tb's cleanup. Workflow ids are unique per namespace, so
// tests whose stores hand out the same ids (every fresh schema's first window is 1) do not
// collide on a shared server.
func (s *Server) NewNamespace(tb testing.TB) (string, client.Client) {
	tb.Helper()
	return s.NewNamespaceDial(tb, client.Options{})
}

// NewNamespaceDial is NewNamespace with the client dialed with opts (e.g. a
// DataConverter with ilinkflow's payload codec, as production clients use): HostPort and
// Namespace are filled in, and the logger when nil.
func (s *Server) NewNamespaceDial(tb testing.TB, opts client.Options) (string, client.Client) {
	tb.Helper()
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		tb.Fatalf("devserver: random namespace: %v", err)
	}
	ns := "t-" + hex.EncodeToString(raw[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := CreateNamespace(ctx, s.Client, ns, tb.Name()); err != nil {
		tb.Fatalf("devserver: %v", err)
	}
	opts.HostPort, opts.Namespace = s.HostPort, ns
	if opts.Logger == nil {
		opts.Logger = s.logger
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		tb.Fatalf("devserver: dial namespace %s: %v", ns, err)
	}
	tb.Cleanup(c.Close)
	return ns, c
}

// namespaceMu serializes namespace creation in a process: tests that start together
// would otherwise all write to the dev server's SQLite store at once.
var namespaceMu sync.Mutex

// CreateNamespace registers namespace on the server of c with ilinkflow's search
// attributes (a day's retention, description as given) and returns once the frontend
// serves it. A dev server busy with other writes can fail a registration transiently
// ("GetNamespace operation failed ... interrupted"): such failures are retried until ctx
// ends, and a retry that finds the namespace already registered (the earlier attempt
// landed) counts as done. A refusal of the request itself (invalid argument, permission
// denied) is returned at once.
func CreateNamespace(ctx context.Context, c client.Client, namespace, description string) error {
	namespaceMu.Lock()
	defer namespaceMu.Unlock()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	wait := func(what string, err error) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", what, namespace, err)
		case <-tick.C:
			return nil
		}
	}
	for {
		_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			Description:                      description,
			WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			break
		}
		if permanentServiceError(err) {
			return fmt.Errorf("register namespace %s: %w", namespace, err)
		}
		if werr := wait("register namespace", err); werr != nil {
			return werr
		}
	}
	// The frontend may serve a namespace a moment after it is registered.
	for {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err == nil {
			break
		}
		if werr := wait("frontend does not serve namespace", err); werr != nil {
			return werr
		}
	}
	for {
		err := wfapi.RegisterSearchAttributes(ctx, c, namespace)
		if err == nil {
			return nil
		}
		if permanentServiceError(err) {
			return err
		}
		if werr := wait("search attributes of", err); werr != nil {
			return werr
		}
	}
}

// permanentServiceError reports whether err is the server refusing the request itself,
// which a retry cannot change.
func permanentServiceError(err error) bool {
	var (
		invalid *serviceerror.InvalidArgument
		denied  *serviceerror.PermissionDenied
		unimpl  *serviceerror.Unimplemented
	)
	return errors.As(err, &invalid) || errors.As(err, &denied) || errors.As(err, &unimpl)
}

var shared struct {
	managed bool // set by Main before any test runs
	once    sync.Once
	srv     *Server
	err     error
}

// Main runs the tests of a package that shares one dev server, and stops that server
// (when a test started it) after the last test:
//
//	func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }
//
// The server starts lazily, at the first [Start] or [StartShared].
func Main(m *testing.M) int {
	shared.managed = true
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devserver: stop shared server:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// StartShared returns the test binary's shared server, starting it on first use. The
// server is stopped by [Main], which the package's TestMain must call; without Main it
// would outlive the test binary, so StartShared refuses to run.
func StartShared() (*Server, error) {
	if !shared.managed {
		return nil, errors.New("devserver: StartShared needs TestMain to call devserver.Main(m), which stops the shared server")
	}
	shared.once.Do(func() {
		shared.srv, shared.err = New(context.Background(), Options{})
	})
	return shared.srv, shared.err
}

// SkipShort is the message a test that needs the dev server (or the CLI) skips with in
// -short mode.
const SkipShort = "needs the Temporal dev server (not in -short)"

// skipShort skips tb in -short mode (`go test -short`): the fast tier runs no Temporal
// server and never looks for, let alone installs, the CLI. Every way a test gets a server
// or the CLI here ([Start], [StartPrivate], [CLI]) goes through it.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(SkipShort)
	}
}

// Start returns a running dev server for tb: the shared one when TestMain calls [Main],
// otherwise a private one that tb's cleanup stops. A missing CLI or a server that does not
// start fails the test with the reason (for a missing CLI, the install command). In
// -short mode it skips tb instead.
func Start(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	if shared.managed {
		srv, err := StartShared()
		if err != nil {
			tb.Fatal(err)
		}
		return srv
	}
	return StartPrivate(tb, Options{})
}

// StartPrivate starts a dev server of tb's own with opts (for example a [Options.DBFile],
// so that the test can halt and restart it) and stops it at tb's cleanup. Like [Start], it
// fails tb when the server does not start and skips tb in -short mode.
func StartPrivate(tb testing.TB, opts Options) *Server {
	tb.Helper()
	skipShort(tb)
	srv, err := New(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			tb.Errorf("devserver: stop: %v", err)
		}
	})
	return srv
}

// CLI returns the Temporal CLI for a test that runs it itself, installing the pinned one
// when it is missing as [New] does ([EnsureCLI]); it fails tb when there is none, and skips
// tb in -short mode.
func CLI(tb testing.TB) string {
	tb.Helper()
	skipShort(tb)
	path, err := EnsureCLI(context.Background(), os.Stderr)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

var unsafeQueueChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// TaskQueue returns a task queue name unique to tb (its name plus random bytes), so that
// tests sharing a server never pick up each other's tasks.
func TaskQueue(tb testing.TB) string {
	tb.Helper()
	var raw [4]byte
	if _, err := rand.Read(raw[:]); err != nil {
		tb.Fatalf("devserver: random task queue suffix: %v", err)
	}
	name := unsafeQueueChars.ReplaceAllString(tb.Name(), "-")
	if len(name) > 120 {
		name = name[:120]
	}
	return "test-" + name + "-" + hex.EncodeToString(raw[:])
}

// FindCLI locates the Temporal CLI: the file named by $TEMPORAL_CLI, else `temporal` on
// PATH, else $(go env GOPATH)/bin/temporal. The error for a missing binary carries the
// install command.
func FindCLI() (string, error) {
	return findCLI(os.Getenv, exec.LookPath, goBinDirs)
}

var installOnce struct {
	sync.Mutex
	done bool
}

// EnsureCLI returns the Temporal CLI that FindCLI finds, or installs the pinned version
// with `go install` ([InstallCost]) and returns that. [MissingCLINotice] and the
// build's progress go to log. Setting $ILINKFLOW_NO_CLI_INSTALL turns the install off, and so
// does -short mode in a test binary (the fast tier never installs the CLI).
func EnsureCLI(ctx context.Context, log io.Writer) (string, error) {
	if p, err := FindCLI(); err == nil || os.Getenv("ILINKFLOW_NO_CLI_INSTALL") != "" || shortTest() {
		return p, err
	}
	installOnce.Lock()
	defer installOnce.Unlock()
	if !installOnce.done {
		fmt.Fprintln(log, MissingCLINotice)
		cmd := exec.CommandContext(ctx, "go", "install", "github.com/temporalio/cli/cmd/temporal@"+CLIVersion)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("devserver: install the Temporal CLI: %w", err)
		}
		installOnce.done = true
	}
	return FindCLI()
}

// shortTest reports whether this is a test binary running in -short mode.
func shortTest() bool {
	return testing.Testing() && flag.Parsed() && testing.Short()
}

// findCLI is FindCLI with its environment injected.
func findCLI(getenv func(string) string, lookPath func(string) (string, error), binDirs func() []string) (string, error) {
	if p := strings.TrimSpace(getenv(EnvCLI)); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("devserver: %s=%q: %w; install the pinned CLI with: %s", EnvCLI, p, err, InstallCommand)
		}
		return p, nil
	}
	if p, err := lookPath("temporal"); err == nil {
		return p, nil
	}
	var tried []string
	for _, dir := range binDirs() {
		p := filepath.Join(dir, "temporal")
		if executable(p) == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", missingCLIError(tried)
}

func missingCLIError(tried []string) error {
	where := "PATH"
	if len(tried) > 0 {
		where += ", " + strings.Join(tried, ", ")
	}
	return fmt.Errorf("devserver: the Temporal CLI (temporal %s) was not found (looked at $%s, %s); install the official binary, or build it with:\n\t%s\n(%s)",
		CLIVersion, EnvCLI, where, InstallCommand, InstallCost)
}

// executable reports why path is not an executable file (nil when it is).
func executable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.IsDir() {
		return &fs.PathError{Op: "exec", Path: path, Err: errors.New("is a directory")}
	}
	if info.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: path, Err: errors.New("is not executable")}
	}
	return nil
}

// goBinDirs returns the bin directories of $(go env GOPATH) (GOPATH may list several).
func goBinDirs() []string {
	gopath := ""
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	if gopath == "" {
		gopath = os.Getenv("GOPATH")
	}
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	var dirs []string
	for _, p := range filepath.SplitList(gopath) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	return dirs
}

// OutputTail keeps the last Max bytes written to it: a server process's log, kept for
// the error of a server that failed (shared with package pgtemporal).
type OutputTail struct {
	// Max is how many bytes it keeps.
	Max int
	mu  sync.Mutex
	buf []byte
}

// Write keeps p's bytes, dropping the oldest past Max.
func (t *OutputTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what it keeps.
func (t *OutputTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Suffix formats what it keeps for an error message ("" when there is none).
func (t *OutputTail) Suffix() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	return "\nserver output (tail):\n" + s
}
