package db_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
)

// bouncerPoolSize is the server connections PgBouncer opens: the least a migration run
// needs (docs/operations.md, Behind PgBouncer), so that the run's statement, its lock's
// heartbeat and the watch of its statement share them.
const bouncerPoolSize = 2

// bouncedDatabase creates a database of the test's own (dropped at cleanup) and starts
// PgBouncer in transaction pooling mode in front of it. It returns a pool through
// PgBouncer, with the pgx setting docs/operations.md gives for it, and a direct one. A
// database, not one of dbtest's schemas: PgBouncer does not pass a search_path on.
func bouncedDatabase(t *testing.T) (bounced, direct *pgxpool.Pool) {
	t.Helper()
	if testing.Short() {
		t.Skip(dbtest.SkipShort)
	}
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
	name := "ilk_dbbouncer_" + hex.EncodeToString(raw[:])
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
	user := url.User(base.User)
	if base.Password != "" {
		user = url.UserPassword(base.User, base.Password)
	}
	directURL := (&url.URL{Scheme: "postgres", User: user, Host: net.JoinHostPort(base.Host, strconv.Itoa(int(base.Port))),
		Path: "/" + name, RawQuery: "sslmode=disable"}).String()

	// PgBouncer refuses to run as root: it then drops to nobody, who must read its files.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	host, port, _ := net.SplitHostPort(addr)
	target := fmt.Sprintf("host=%s port=%d dbname=%s", base.Host, base.Port, name)
	if base.Password != "" {
		target += " password=" + base.Password
	}
	ini := strings.Join([]string{
		"[databases]",
		"ilinkflow = " + target,
		"[pgbouncer]",
		"listen_addr = " + host,
		"listen_port = " + port,
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "users.txt"),
		"pool_mode = transaction",
		"default_pool_size = " + strconv.Itoa(bouncerPoolSize),
		"max_client_conn = 100",
		"",
	}, "\n")
	for f, content := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", base.User)} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "pgbouncer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	var args []string
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	cmd := exec.Command(bin, append(args, filepath.Join(dir, "pgbouncer.ini"))...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	bouncedURL := "postgres://" + user.String() + "@" + addr + "/ilinkflow?sslmode=disable&default_query_exec_mode=cache_describe"
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := pgx.Connect(ctx, bouncedURL)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("pgbouncer exited (%v):\n%s", werr, out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("pgbouncer does not answer on %s: %v\n%s", addr, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	bounced, err = pgxpool.New(ctx, bouncedURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bounced.Close)
	direct, err = pgxpool.New(ctx, directURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	return bounced, direct
}

// Through PgBouncer in transaction mode, where no session setting reaches the next
// statement, a migration without a transaction keeps its bounds: a concurrent build behind
// an older transaction fails at the lock timeout and runs again once it ended, a statement
// past the statement timeout is cancelled; and no server connection is left with a
// setting of the run.
func TestThroughPgBouncerANoTransactionMigrationKeepsItsBoundsAndLeavesNoSetting(t *testing.T) {
	bounced, direct := bouncedDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var defaults [2]string
	if err := direct.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").
		Scan(&defaults[0], &defaults[1]); err != nil {
		t.Fatal(err)
	}
	fsys := noTxMigrations(uniqueV)
	if _, err := db.MigrateFS(ctx, bounced, firstOnly(fsys), db.Options{}); err != nil {
		t.Fatal(err)
	}

	holder, err := direct.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "UPDATE busy SET v = v WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	const lockTimeout = time.Second
	began := time.Now()
	_, err = db.MigrateFS(ctx, bounced, fsys, db.Options{LockTimeout: lockTimeout})
	took := time.Since(began)
	var me *db.Error
	if !errors.As(err, &me) || me.Code != db.CodeLockTimeout || me.Version != 2 {
		t.Fatalf("a build behind an open transaction: %v, want code %s for version 2", err, db.CodeLockTimeout)
	}
	if took > 2*lockTimeout+20*time.Second {
		t.Fatalf("the blocked build failed after %v, want about its lock timeout %v", took, lockTimeout)
	}
	t.Logf("blocked build failed after %v through PgBouncer: %v", took.Round(time.Millisecond), err)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := db.MigrateFS(ctx, bounced, fsys, db.Options{LockTimeout: lockTimeout})
	if err != nil || len(res.Applied) != 1 || res.Version != 2 {
		t.Fatalf("after the transaction ended: %+v, %v; want version 2 applied", res, err)
	}
	if n, state := invalidIndexes(ctx, t, direct), indexState(ctx, t, direct, "busy_v"); n != 0 || state != "valid" {
		t.Fatalf("after the run: %d invalid indexes, busy_v %s; want it valid", n, state)
	}

	slow := fstest.MapFS{"00003_slow.sql": {Data: []byte("-- +goose NO TRANSACTION\n-- +goose Up\nSELECT pg_sleep(30);\n")}}
	for k, v := range fsys {
		slow[k] = v
	}
	_, err = db.MigrateFS(ctx, bounced, slow, db.Options{StatementTimeout: 500 * time.Millisecond})
	if !errors.As(err, &me) || me.Code != db.CodeStatementTimeout || me.Version != 3 {
		t.Fatalf("slow statement: %v, want code %s for version 3", err, db.CodeStatementTimeout)
	}
	var sleeping int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()").
		Scan(&sleeping); err != nil || sleeping != 0 {
		t.Fatalf("the cancelled statement still runs on the server: %d (%v)", sleeping, err)
	}
	assertNoMigrationLockHeld(ctx, t, direct)

	// Every server connection PgBouncer holds (one transaction on each at once) has the
	// server's own timeouts.
	txs := make([]pgx.Tx, bouncerPoolSize)
	for i := range txs {
		if txs[i], err = bounced.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = txs[i].Rollback(ctx) }()
	}
	pids := map[int32]bool{}
	for _, tx := range txs {
		var pid int32
		var lt, st string
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('lock_timeout'), current_setting('statement_timeout')").
			Scan(&pid, &lt, &st); err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
		if lt != defaults[0] || st != defaults[1] {
			t.Errorf("server connection %d: lock_timeout %s, statement_timeout %s; want the server's %s and %s", pid, lt, st, defaults[0], defaults[1])
		}
	}
	if len(pids) != bouncerPoolSize {
		t.Fatalf("%d transactions at once ran on %d server connections, want %d", bouncerPoolSize, len(pids), bouncerPoolSize)
	}
}

// Through PgBouncer too, migration 00017 builds its indexes concurrently: messages are
// stored while the build waits for an older transaction.
func TestThroughPgBouncerTheConsoleIndexesAreBuiltWhileMessagesAreStored(t *testing.T) {
	bounced, direct := bouncedDatabase(t)
	buildConsoleIndexesWhileMessagesAreStored(t, bounced, direct)
}
