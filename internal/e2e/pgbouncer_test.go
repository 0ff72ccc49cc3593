package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// pgBouncerExecMode is the URL parameter that lets pgx work through PgBouncer in
// transaction pooling mode (docs/operations.md, "Behind PgBouncer"): statement
// descriptions are cached by the client and every statement is sent as PostgreSQL's
// unnamed statement, so no named prepared statement outlives a transaction on a server
// connection that the next transaction may not get.
const pgBouncerExecMode = "default_query_exec_mode=cache_describe"

// pgBouncerPoolSize is the server connections PgBouncer opens to the database: fewer than
// the worker's pool (16), so that its transactions share server connections.
const pgBouncerPoolSize = 4

// pgBouncer is a PgBouncer process the test runs in transaction pooling mode in front of
// one database of its own.
type pgBouncer struct {
	proc  *proc
	bin   string // the pgbouncer executable
	addr  string // host:port PgBouncer listens on
	user  string
	alias string // the database name clients connect to
}

// url is the database URL of a client of the pooled database, with the pgx setting the
// product documents for PgBouncer.
func (b *pgBouncer) url() string {
	return "postgres://" + url.PathEscape(b.user) + "@" + b.addr + "/" + b.alias + "?sslmode=disable&" + pgBouncerExecMode
}

// pools is PgBouncer's SHOW POOLS row of the pooled database (its admin console speaks
// the simple protocol only).
func (b *pgBouncer) pools(ctx context.Context) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, "postgres://"+url.PathEscape(b.user)+"@"+b.addr+"/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol")
	if err != nil {
		return nil, fmt.Errorf("PgBouncer's admin console: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, "SHOW POOLS")
	if err != nil {
		return nil, fmt.Errorf("SHOW POOLS: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("SHOW POOLS: %w", err)
		}
		row := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			row[f.Name] = fmt.Sprint(vals[i])
		}
		if row["database"] == b.alias {
			return row, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SHOW POOLS: %w", err)
	}
	return nil, fmt.Errorf("SHOW POOLS has no pool of database %s", b.alias)
}

// newPooledDatabase creates a database of the test's own on the PostgreSQL server of
// dbtest.URL (dropped at cleanup) and starts PgBouncer in transaction pooling mode in front
// of it. It returns PgBouncer and the database's direct URL (for the test's own checks).
//
// A database, not one of dbtest's schemas: those are chosen by search_path in the startup
// packet, a parameter PgBouncer does not pass on; a deployment behind PgBouncer has a
// database (or a role's search_path) of its own too.
func newPooledDatabase(t *testing.T) (*pgBouncer, string) {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		// Debian installs it in /usr/sbin, which a user's PATH may lack.
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("pgbouncer is not installed (%v): apt-get install -y pgbouncer (Debian/Ubuntu), or run the tests with -short", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	base, err := pgx.ParseConfig(dbtest.URL())
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	var raw [5]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	name := "ilk_pgbouncer_" + hex.EncodeToString(raw[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, dbtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create the test's database: %v", err)
	}
	t.Cleanup(func() { // after PgBouncer stopped (cleanups run last first)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbtest.URL())
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
		if err != nil {
			t.Errorf("drop the test's database %s: %v", name, err)
		}
	})
	direct := &url.URL{Scheme: "postgres", Host: net.JoinHostPort(base.Host, strconv.Itoa(int(base.Port))), Path: "/" + name,
		RawQuery: "sslmode=disable"}
	if base.Password != "" {
		direct.User = url.UserPassword(base.User, base.Password)
	} else {
		direct.User = url.User(base.User)
	}

	// PgBouncer refuses to run as root: it then drops to nobody, who must read its files.
	dir, err := os.MkdirTemp("", "ilinkflow-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	const alias = "ilinkflow"
	target := fmt.Sprintf("host=%s port=%d dbname=%s", base.Host, base.Port, name)
	if base.Password != "" {
		target += " password=" + base.Password
	}
	ini := strings.Join([]string{
		"[databases]",
		alias + " = " + target,
		"[pgbouncer]",
		"listen_addr = " + host,
		"listen_port = " + port,
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "users.txt"),
		"admin_users = " + base.User,
		"pool_mode = transaction",
		"default_pool_size = " + strconv.Itoa(pgBouncerPoolSize),
		"max_client_conn = 200",
		"",
	}, "\n")
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", base.User)}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var args []string
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	b := &pgBouncer{addr: addr, user: base.User, alias: alias, bin: bin}
	b.proc = startProc(t, "pgbouncer", bin, os.Environ(), append(args, filepath.Join(dir, "pgbouncer.ini"))...)
	b.proc.waitLog(t, "process up", time.Minute)
	if out := b.proc.out.String(); !strings.Contains(out, "listening on "+addr) {
		t.Fatalf("pgbouncer does not listen on %s:\n%s", addr, crashTail(out, 20))
	}
	return b, direct.String()
}

// version is PgBouncer's version line, for the log.
func (b *pgBouncer) version() string {
	out, err := exec.Command(b.bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// latestMigration is the version of the newest embedded migration.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	names, err := fs.Glob(db.Migrations(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v (%d)", err, len(names))
	}
	var latest int64
	for _, n := range names {
		prefix, _, _ := strings.Cut(n, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		latest = max(latest, v)
	}
	return latest
}

// enrollThroughStarter runs `starter enroll --json` with env, scans and confirms its QR code
// at the simulator as owner (an owner's next enrollment would replace this one), and
// returns the bot it enrolled (one not in known).
func enrollThroughStarter(t *testing.T, ctl *ilinksim.Control, env []string, owner string, known map[string]bool) ilinksim.BotInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, starterBinary(t), "enroll", "--json", "--refresh", "100ms", "--lifetime", "3m")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var account string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ev struct {
			Event, Status string
			AccountKey    string `json:"account_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("starter enroll printed %q", sc.Text())
		}
		switch {
		case ev.Event == "qr":
			if _, err := ctl.ScanQR(ctx, "", owner); err != nil {
				t.Fatal(err)
			}
		case ev.Event == "status" && ev.Status == "scaned":
			if _, err := ctl.ConfirmQR(ctx, ""); err != nil {
				t.Fatal(err)
			}
		case ev.Event == "done":
			account = ev.AccountKey
		}
	}
	if err := cmd.Wait(); err != nil || account == "" {
		t.Fatalf("starter enroll: %v (account %q)\n%s", err, account, stderr.String())
	}
	bots, err := ctl.Bots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bots {
		if !known[b.BotID] && !b.Dead {
			known[b.BotID] = true
			return b
		}
	}
	t.Fatalf("no newly enrolled bot at the simulator: %+v", bots)
	return ilinksim.BotInfo{}
}

// Through a real PgBouncer in transaction pooling mode, with only the documented URL
// parameter added to DATABASE_URL: two `starter migrate` runs at once both succeed, apply
// each migration once and leave the migration lock free; a worker started with
// --migrate=false is ready, bots enrolled by `starter enroll` are polled, and every message
// sent to them is answered exactly once, with PgBouncer's few server connections shared
// by the worker's transactions.
func TestThroughPgBouncerInTransactionModeMigrationsApplyAndEveryMessageIsAnsweredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PgBouncer, PostgreSQL, the Temporal dev server and worker processes (not in -short)")
	}
	t.Parallel()
	began := time.Now()
	dev := devserver.Start(t)
	bouncer, direct := newPooledDatabase(t)
	t.Logf("%s in transaction mode on %s, %d server connections", bouncer.version(), bouncer.addr, pgBouncerPoolSize)
	pooled := bouncer.url()
	ctx := context.Background()

	// Two migration runs at once, both through PgBouncer.
	latest := latestMigration(t)
	migrateEnv := crashEnv(map[string]string{"DATABASE_URL": pooled})
	starter := starterBinary(t)
	type run struct {
		out  string
		err  error
		took time.Duration
	}
	runs := make([]run, 2)
	var wg sync.WaitGroup
	migrateBegan := time.Now()
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(mctx, starter, "migrate")
			cmd.Env = migrateEnv
			began := time.Now()
			out, err := cmd.CombinedOutput()
			runs[i] = run{string(out), err, time.Since(began)}
		}()
	}
	wg.Wait()
	migrateTook := time.Since(migrateBegan)
	applied := 0
	var took []string
	for i, r := range runs {
		if r.err != nil {
			t.Fatalf("starter migrate (run %d of 2) through PgBouncer: %v\n%s", i+1, r.err, r.out)
		}
		var version, n int64
		line := r.out[strings.LastIndex(strings.TrimRight(r.out, "\n"), "\n")+1:]
		if _, err := fmt.Sscanf(line, "schema at version %d (%d migration(s) applied)", &version, &n); err != nil || version != latest {
			t.Fatalf("starter migrate (run %d of 2) ended %q, want \"schema at version %d (…)\"\n%s", i+1, line, latest, r.out)
		}
		applied += int(n)
		took = append(took, fmt.Sprintf("%d applied in %v", n, r.took.Round(time.Millisecond)))
	}
	directPool, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = directPool.Close(ctx) }()
	var held, versions int
	var top int64
	if err := directPool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE locked) FROM "+db.LockTable).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if err := directPool.QueryRow(ctx, "SELECT count(DISTINCT version_id) FILTER (WHERE version_id > 0), max(version_id) FROM goose_db_version").Scan(&versions, &top); err != nil {
		t.Fatal(err)
	}
	if held != 0 || top != latest || applied != versions {
		t.Fatalf("after two concurrent runs: %d migration lock row(s) held, schema at %d (want %d), %d migrations applied by the runs and %d recorded",
			held, top, latest, applied, versions)
	}
	t.Logf("two concurrent `starter migrate` runs through PgBouncer: %d migrations applied once, lock free, %v (%s)",
		applied, migrateTook.Round(time.Millisecond), strings.Join(took, ", "))

	// A worker that does not migrate, and bots enrolled through `starter enroll`.
	ns, _ := dev.NewNamespace(t)
	simCfg := ilinksim.DefaultConfig()
	simCfg.ThrottleBurst = 0
	simCfg.LongPollHold = 2 * time.Second
	srv := httptest.NewServer(ilinksim.New(simCfg).Handler())
	t.Cleanup(srv.Close)
	ctl := ilinksim.NewControl(srv.URL, srv.Client())
	env := crashEnv(map[string]string{
		"TEMPORAL_ADDRESS":     dev.HostPort,
		"TEMPORAL_NAMESPACE":   ns,
		"ILINKFLOW_TASK_QUEUE": devserver.TaskQueue(t),
		"DATABASE_URL":         pooled,
		sealing.EnvKeys:        testkit.KeySpec,
		"ILINK_BASE_URL":       srv.URL,
		"ILINK_CDN_BASE_URL":   srv.URL + "/c2c",
		"ILINKFLOW_LOG_FORMAT": "text",
		"ILINKFLOW_HTTP_ADDR":  "127.0.0.1:0",
		"ILINKFLOW_ADMIN_ADDR": "127.0.0.1:0",
		"ILINKFLOW_HANDLER":    "echo",
		"ILINKFLOW_SEND_GAP":   "5ms",
		"TEMPORAL_CONFIG_FILE": emptyConfigFile,
	})
	worker := startProc(t, "worker", workerBinary(t), env, "--migrate=false")
	worker.waitLog(t, workerReady, 3*time.Minute)
	readyz := "http://" + worker.adminAddr(t) + "/readyz"
	ready := func(what string) {
		t.Helper()
		testkit.Eventually(t, what, 2*time.Minute, func() (bool, error) {
			resp, err := http.Get(readyz)
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Errorf("/readyz %d", resp.StatusCode)
		})
	}
	ready("the worker ready through PgBouncer")
	workerReadyAt := time.Now()

	const bots, perBot = 3, 4
	known := map[string]bool{}
	var enrolled []ilinksim.BotInfo
	for i := range bots {
		enrolled = append(enrolled, enrollThroughStarter(t, ctl, env, fmt.Sprintf("o9pgbouncer-%d@im.wechat", i+1), known))
	}
	enrolledAt := time.Now()

	// A dozen messages: the bots at once, each bot's next message once the last one was
	// answered (a newer message of a chat supersedes one not answered yet).
	echoes := func(botID string) (map[string]int, error) {
		sent, err := ctl.Sent(ctx, botID)
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, m := range sent {
			n[m.Text]++
		}
		return n, nil
	}
	var texts []string
	var chatErr error
	var mu sync.Mutex
	for _, b := range enrolled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perBot {
				text := fmt.Sprintf("%s message %d", b.BotID[:8], i+1)
				_, err := ctl.InjectText(ctx, b.BotID, "", text)
				if err == nil {
					mu.Lock()
					texts = append(texts, text)
					mu.Unlock()
					// 2 minutes: a bound for a loaded 2-core machine, not an expectation.
					if crashAwait(ctx, 2*time.Minute, func() bool {
						n, err := echoes(b.BotID)
						return err == nil && n["echo: "+text] > 0
					}) != nil {
						err = errors.New("not answered within 2 minutes")
					}
				}
				if err != nil {
					mu.Lock()
					if chatErr == nil {
						chatErr = fmt.Errorf("%q: %w", text, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if chatErr != nil {
		t.Fatal(chatErr)
	}
	testkit.Eventually(t, "every message handled", time.Minute, func() (bool, error) {
		var stored, notHandled int
		err := directPool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status NOT IN ('handled', 'absorbed')) FROM inbound_messages").Scan(&stored, &notHandled)
		if err == nil && (stored != len(texts) || notHandled != 0) {
			err = fmt.Errorf("%d messages stored (want %d), %d not handled", stored, len(texts), notHandled)
		}
		return err == nil, err
	})
	answeredAt := time.Now()
	n, err := echoes("")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range n {
		total += c
	}
	for _, text := range texts {
		if c := n["echo: "+text]; c != 1 {
			t.Fatalf("%q was answered %d times, want once", text, c)
		}
	}
	if total != len(texts) {
		t.Fatalf("the bots sent %d messages, want %d (one answer per message): %v", total, len(texts), n)
	}
	ready("the worker still ready through PgBouncer")

	// The worker's transactions shared PgBouncer's few server connections.
	pools, err := bouncer.pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pools["pool_mode"] != "transaction" {
		t.Fatalf("PgBouncer's pool mode is %q, want transaction: %v", pools["pool_mode"], pools)
	}
	servers := 0
	for _, col := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
		v, err := strconv.Atoi(pools[col])
		if err != nil {
			t.Fatalf("SHOW POOLS %s = %q: %v", col, pools[col], err)
		}
		servers += v
	}
	if servers > pgBouncerPoolSize {
		t.Fatalf("PgBouncer holds %d server connections, want at most %d: %v", servers, pgBouncerPoolSize, pools)
	}
	for _, bad := range []string{"prepared statement", "SQLSTATE 42P05", "SQLSTATE 26000", "SQLSTATE 08P01"} {
		if strings.Contains(worker.out.String(), bad) {
			t.Fatalf("the worker logged %q through PgBouncer:\n%s", bad, crashTail(worker.out.String(), 40))
		}
	}
	t.Logf("PgBouncer: %s client connection(s) (%s waiting) on %d server connection(s)", pools["cl_active"], pools["cl_waiting"], servers)
	t.Logf("%d bots enrolled through `starter enroll` in %v; %d messages each answered once in %v; whole test %v",
		bots, enrolledAt.Sub(workerReadyAt).Round(time.Millisecond), len(texts), answeredAt.Sub(enrolledAt).Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond))
	worker.stop()
	if worker.exitErr != nil {
		t.Fatalf("the worker exited %v after SIGTERM, want 0:\n%s", worker.exitErr, crashTail(worker.out.String(), 40))
	}
}
