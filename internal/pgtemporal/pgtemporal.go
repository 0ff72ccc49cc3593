// Package pgtemporal runs a production-shaped Temporal server for tests and the scale test:
// the server of the pinned go.temporal.io/server release (the one the pinned CLI embeds),
// built from the Go module proxy with `go install` (cmd/server and the SQL schema tool
// cmd/tools/sql) and cached, with persistence and visibility in databases of their own on
// the local PostgreSQL, four history shards and the server's default task-queue
// partitions. Its configuration is config.yaml.tmpl beside this file. The dev server
// (package devserver) keeps everything in one SQLite connection and one shard, which is
// not how a self-hosted cluster or Temporal Cloud behaves under load.
package pgtemporal

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// ServerVersion is the pinned release of go.temporal.io/server: the one the pinned CLI
// (devserver.CLIVersion) embeds.
const ServerVersion = "v1.29.1"

// BuildCost says what the first start costs (the binaries are cached after).
const BuildCost = "building the Temporal server " + ServerVersion + " and its SQL tool from the Go module proxy takes 5-15 minutes on a 2-core machine the first time (cached after)"

// EnvBinDir names the environment variable that points at a directory holding the built
// `server` and `sql` binaries (by default a directory under the user cache).
const EnvBinDir = "ILINKFLOW_TEMPORAL_SERVER_DIR"

//go:embed config.yaml.tmpl
var configTemplate string

// Options configures [New].
type Options struct {
	// DatabaseURL reaches the PostgreSQL server as a role that may create databases; the
	// server's two databases are created there and dropped by Stop.
	DatabaseURL string
	// Namespace to register (with ilinkflow's search attributes) and use.
	Namespace string
	// LogLevel of the server ("error" when empty).
	LogLevel string
	// Logger receives the SDK client's log and progress (warnings to stderr when nil).
	Logger *slog.Logger
	// Dynamic are dynamic-config values beside the defaults (name to value).
	Dynamic map[string]any
}

// Server is a running PostgreSQL-backed Temporal server.
type Server struct {
	// HostPort is the frontend address.
	HostPort string
	// Namespace is the registered namespace Client uses.
	Namespace string
	// Client is connected to the server and Namespace; Stop closes it.
	Client client.Client

	dir      string
	pg       pgTarget
	dbs      []string
	cmd      *exec.Cmd
	out      *devserver.OutputTail
	exited   chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// DefaultDynamic are the dynamic-config values every server gets: those the dev servers
// of the tests get too (continue-as-new thresholds a real-time run reaches, the APIs the
// workflows use, wfapi.ServerSettings).
func DefaultDynamic() map[string]any {
	dynamic := map[string]any{
		"limit.historyCount.suggestContinueAsNew":        devserver.SuggestContinueAsNewEvents,
		"limit.historySize.suggestContinueAsNew":         1048576,
		"frontend.enableUpdateWorkflowExecution":         true,
		"frontend.enableExecuteMultiOperation":           true,
		"system.forceSearchAttributesCacheRefreshOnRead": true,
	}
	maps.Copy(dynamic, wfapi.ServerSettings())
	return dynamic
}

// New builds the binaries if need be, creates the server's databases and schemas, starts
// the server and registers the namespace. The caller stops it.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.LogLevel == "" {
		opts.LogLevel = "error"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	serverBin, sqlBin, err := EnsureBinaries(ctx, logger)
	if err != nil {
		return nil, err
	}
	pg, err := parseTarget(opts.DatabaseURL)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ilinkflow-temporal-pg-")
	if err != nil {
		return nil, err
	}
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	suffix := hex.EncodeToString(raw[:])
	s := &Server{Namespace: opts.Namespace, dir: dir, pg: pg, out: &devserver.OutputTail{Max: 64 << 10}, exited: make(chan struct{})}
	fail := func(err error) (*Server, error) {
		s.cleanup()
		return nil, err
	}
	main, vis := "temporal_"+suffix, "temporal_visibility_"+suffix
	for _, db := range []struct{ name, schema string }{{main, "postgresql/v12/temporal"}, {vis, "postgresql/v12/visibility"}} {
		s.dbs = append(s.dbs, db.name)
		if err := s.setupSchema(ctx, sqlBin, db.name, db.schema); err != nil {
			return fail(err)
		}
	}
	ports, err := freePorts(9)
	if err != nil {
		return fail(err)
	}
	dynamic := DefaultDynamic()
	for k, v := range opts.Dynamic {
		dynamic[k] = v
	}
	if err := s.writeConfig(opts.LogLevel, main, vis, ports, dynamic); err != nil {
		return fail(err)
	}
	s.HostPort = "127.0.0.1:" + strconv.Itoa(ports[0])
	s.cmd = exec.Command(serverBin, "--root", dir, "--config", "config", "--env", "server", "--allow-no-auth", "start")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("pgtemporal: start %s: %w", serverBin, err))
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	logger.Info("Temporal server on PostgreSQL starting", "address", s.HostPort, "databases", strings.Join(s.dbs, ","))
	if err := s.connect(ctx, logger); err != nil {
		return fail(err)
	}
	return s, nil
}

// connect waits until the frontend answers, then registers the namespace and dials it.
func (s *Server) connect(ctx context.Context, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sdkLog := tlog.NewStructuredLogger(logger.With("component", "temporal-pg-client"))
	var admin client.Client
	for admin == nil {
		select {
		case <-s.exited:
			return fmt.Errorf("pgtemporal: the server exited at start:%s", s.out.Suffix())
		default:
		}
		c, err := client.DialContext(ctx, client.Options{HostPort: s.HostPort, Logger: sdkLog})
		if err == nil {
			admin = c
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtemporal: the server does not answer at %s: %w%s", s.HostPort, err, s.out.Suffix())
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer admin.Close()
	if err := devserver.CreateNamespace(ctx, admin, s.Namespace, "ilinkflow on a PostgreSQL-backed Temporal"); err != nil {
		return fmt.Errorf("pgtemporal: %w%s", err, s.out.Suffix())
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: s.HostPort, Namespace: s.Namespace, Logger: sdkLog})
	if err != nil {
		return fmt.Errorf("pgtemporal: dial namespace %s: %w", s.Namespace, err)
	}
	s.Client = c
	return nil
}

// Stop closes the client, stops the server (SIGTERM, then SIGKILL after 30 s), and drops
// its databases and directory. It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.cleanup() })
	return s.stopErr
}

func (s *Server) cleanup() error {
	if s.Client != nil {
		s.Client.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	var errs []error
	if len(s.dbs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.pg.url)
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, db := range s.dbs {
				if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
					errs = append(errs, fmt.Errorf("drop database %s: %w", db, err))
				}
			}
			_ = conn.Close(ctx)
		}
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// PID is the server process's id (0 once it was not started).
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Databases are the PostgreSQL databases the server keeps its persistence and visibility
// in.
func (s *Server) Databases() []string { return slices.Clone(s.dbs) }

// Output returns the tail of the server's log, for diagnostics.
func (s *Server) Output() string { return s.out.String() }

// setupSchema creates a database and sets up an embedded schema with the SQL tool, as the
// tool's README says for a new cluster.
func (s *Server) setupSchema(ctx context.Context, sqlBin, db, schema string) error {
	base := []string{"--plugin", "postgres12", "--ep", s.pg.host, "-p", s.pg.port, "-u", s.pg.user, "--db", db}
	for _, step := range [][]string{
		{"create-database"},
		{"setup-schema", "-v", "0.0"},
		{"update-schema", "--schema-name", schema},
	} {
		cmd := exec.CommandContext(ctx, sqlBin, append(append([]string(nil), base...), step...)...)
		cmd.Env = append(os.Environ(), "SQL_PASSWORD="+s.pg.password)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pgtemporal: temporal-sql-tool %s on %s: %w\n%s", step[0], db, err, out)
		}
	}
	return nil
}

// writeConfig renders the server's configuration and dynamic config into the run's
// directory.
func (s *Server) writeConfig(level, main, vis string, ports []int, dynamic map[string]any) error {
	cfgDir := filepath.Join(s.dir, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return err
	}
	dynPath := filepath.Join(cfgDir, "dynamicconfig.yaml")
	var dyn bytes.Buffer
	for name, v := range dynamic {
		fmt.Fprintf(&dyn, "%s:\n  - value: %v\n", name, v)
	}
	if err := os.WriteFile(dynPath, dyn.Bytes(), 0o644); err != nil {
		return err
	}
	tmpl, err := template.New("config").Option("missingkey=error").Parse(configTemplate)
	if err != nil {
		return fmt.Errorf("pgtemporal: config template: %w", err)
	}
	type portSet struct {
		Frontend, FrontendMembership, FrontendHTTP, Matching, MatchingMembership, History, HistoryMembership, Worker, WorkerMembership int
	}
	var out bytes.Buffer
	err = tmpl.Execute(&out, map[string]any{
		"LogLevel": level, "DB": main, "VisibilityDB": vis,
		"PGAddr": net.JoinHostPort(s.pg.host, s.pg.port), "PGUser": s.pg.user, "PGPassword": s.pg.password,
		"DynamicConfig": dynPath,
		"Ports": portSet{Frontend: ports[0], FrontendMembership: ports[1], FrontendHTTP: ports[2], Matching: ports[3],
			MatchingMembership: ports[4], History: ports[5], HistoryMembership: ports[6], Worker: ports[7], WorkerMembership: ports[8]},
	})
	if err != nil {
		return fmt.Errorf("pgtemporal: config template: %w", err)
	}
	return os.WriteFile(filepath.Join(cfgDir, "server.yaml"), out.Bytes(), 0o600)
}

// pgTarget is where and as whom the server reaches PostgreSQL.
type pgTarget struct {
	url, host, port, user, password string
}

func parseTarget(databaseURL string) (pgTarget, error) {
	if databaseURL == "" {
		databaseURL = os.Getenv("DATABASE_URL")
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return pgTarget{}, fmt.Errorf("pgtemporal: database URL: %w", err)
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		host = "127.0.0.1" // the server dials TCP
	}
	return pgTarget{url: databaseURL, host: host, port: strconv.Itoa(int(cfg.Port)), user: cfg.User, password: cfg.Password}, nil
}

// freePorts returns n distinct free TCP ports on the loopback address, below 32768: the
// server keeps its membership ports in a smallint column.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("pgtemporal: no free ports below 32768")
		}
		var b [2]byte
		_, _ = rand.Read(b[:])
		port := 20000 + (int(b[0])<<8|int(b[1]))%12000
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// binDir is where the built binaries are kept.
func binDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "ilinkflow", "temporal-server-"+ServerVersion), nil
}

// buildMu serializes builds within a process.
var buildMu sync.Mutex

// EnsureBinaries returns the paths of the server and the SQL tool, building them with
// `go install` at ServerVersion when they are missing.
func EnsureBinaries(ctx context.Context, logger *slog.Logger) (server, sqlTool string, err error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	dir, err := binDir()
	if err != nil {
		return "", "", err
	}
	server, sqlTool = filepath.Join(dir, "server"), filepath.Join(dir, "sql")
	for _, b := range []struct{ path, pkg string }{
		{server, "go.temporal.io/server/cmd/server"},
		{sqlTool, "go.temporal.io/server/cmd/tools/sql"},
	} {
		if st, err := os.Stat(b.path); err == nil && st.Mode().IsRegular() {
			continue
		}
		if logger != nil {
			logger.Warn("pgtemporal: " + BuildCost)
		}
		cmd := exec.CommandContext(ctx, "go", "install", b.pkg+"@"+ServerVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("pgtemporal: go install %s@%s: %w\n%s", b.pkg, ServerVersion, err, out)
		}
	}
	return server, sqlTool, nil
}
