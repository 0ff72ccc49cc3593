// Package dbtest gives each test an isolated, migrated PostgreSQL schema on the real
// server at DATABASE_URL (default: the local server). Tests may run in parallel, in one
// test binary or in many.
//
// Migrating a fresh schema costs about half a second, so schemas are kept and reused: a
// test claims a migrated schema no other test holds (a session advisory lock, which the
// server releases even when the test process is killed), empties its tables and hands it
// out; at cleanup the claim is released. Schemas are named after a hash of the embedded
// migrations, so a change of the migrations gets fresh schemas.
//
// In -short mode (`go test -short`, the fast tier) every test that asks for a schema
// skips ([SkipShort]): the fast tier needs no PostgreSQL.
//
// Tests commit with synchronous_commit off: a commit does not wait for its WAL flush. That
// changes nothing a test can observe (a commit is visible and survives any client or
// connection failure; only a crash of the PostgreSQL server itself could lose the last
// fraction of a second), and it spares the suite thousands of disk flushes. Benchmarks
// (a *testing.B) keep durable commits: they measure what production pays.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// DefaultURL is the database tests use when DATABASE_URL is unset.
const DefaultURL = vocab.DefaultDatabaseURL

// readyComment marks a schema whose migration completed; a schema without it (its
// migration was interrupted) is dropped and made again.
const readyComment = "ilinkflow test schema: migrated"

// keptTable is the one table a reused schema keeps: goose's record of the migrations.
const keptTable = "goose_db_version"

// reseed writes what the migrations write into an empty database, after the tables were
// emptied: the installation row (00005), with a new installation id, so that workflow ids
// of a reused schema never meet those of the test that used it before on a shared
// Temporal server.
const reseed = "INSERT INTO %s.installation DEFAULT VALUES"

// SkipShort is the message a test that needs PostgreSQL skips with in -short mode.
const SkipShort = "needs PostgreSQL (not in -short)"

// skipShort skips tb in -short mode. Every way a test gets a schema here ([NewPool],
// [NewPoolWith], [NewSchema]) goes through it.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(SkipShort)
	}
}

// URL returns the database URL tests connect to.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewPool returns a pool whose connections use a migrated, empty schema that no other
// test uses until this test's cleanup. In -short mode it skips tb.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return NewPoolWith(tb, nil)
}

// NewPoolWith is NewPool with the pool's configuration adjusted by configure (for example
// a tracer that counts round trips) before the pool is made.
func NewPoolWith(tb testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	skipShort(tb)
	schema := claimSchema(tb)
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		tb.Fatalf("dbtest: parse url: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if _, bench := tb.(*testing.B); !bench {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	cfg.MaxConns = 24
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("dbtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close) // runs before the claim's release (cleanups run last first)
	return pool
}

// NewSchema returns the name of a fresh, empty schema that the test's cleanup drops, for
// a test that builds the schema itself (for example one migrated only part of the way).
// In -short mode it skips tb.
func NewSchema(tb testing.TB) string {
	tb.Helper()
	skipShort(tb)
	ctx := context.Background()
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		tb.Fatalf("dbtest: random schema name: %v", err)
	}
	schema := "t_" + hex.EncodeToString(raw[:])
	admin, err := pgx.Connect(ctx, URL())
	if err != nil {
		tb.Fatalf("dbtest: connect: %v", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("dbtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, URL())
		if err != nil {
			tb.Errorf("dbtest: drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = admin.Close(ctx) }()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("dbtest: drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// SchemaURL returns URL() with its search_path set to schema, for a process (a worker, a
// CLI) that must use a test's schema. Its commits do not wait for the WAL flush, as a
// test's own pool's do not.
func SchemaURL(schema string) string {
	u := URL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "search_path=" + schema + "&synchronous_commit=off"
}

// claimSchema takes the first reusable schema no one holds, making and migrating it when
// it does not exist yet, empties it and returns its name; the claim ends at cleanup.
func claimSchema(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		tb.Fatalf("dbtest: connect %s: %v", URL(), err)
	}
	tb.Cleanup(func() { _ = conn.Close(context.Background()) }) // ends the claim
	prefix := "tk_" + migrationsHash()
	for n := 0; ; n++ {
		schema := fmt.Sprintf("%s_%d", prefix, n)
		var held bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockKey(schema)).Scan(&held); err != nil {
			tb.Fatalf("dbtest: claim schema: %v", err)
		}
		if !held {
			continue
		}
		if err := prepare(ctx, conn, schema); err != nil {
			tb.Fatalf("dbtest: prepare schema %s: %v", schema, err)
		}
		return schema
	}
}

// prepare leaves schema migrated and empty: it empties a schema made before, and makes
// and migrates one that is missing or whose migration did not finish.
func prepare(ctx context.Context, conn *pgx.Conn, schema string) error {
	var comment *string
	err := conn.QueryRow(ctx, `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`,
		schema).Scan(&comment)
	switch {
	case err == nil && comment != nil && *comment == readyComment:
		return empty(ctx, conn, schema)
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, SchemaURL(schema))
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := db.Migrate(ctx, pool, nil); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "COMMENT ON SCHEMA "+ident+" IS '"+readyComment+"'")
	return err
}

// empty truncates every table of schema but the kept one, restarting identities, and
// writes the rows the migrations write.
func empty(ctx context.Context, conn *pgx.Conn, schema string) error {
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> $2`,
		schema, keptTable)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	idents := make([]string, len(names))
	for i, n := range names {
		idents[i] = pgx.Identifier{schema, n}.Sanitize()
	}
	batch := &pgx.Batch{}
	batch.Queue("TRUNCATE " + strings.Join(idents, ", ") + " RESTART IDENTITY CASCADE")
	batch.Queue(fmt.Sprintf(reseed, pgx.Identifier{schema}.Sanitize()))
	return conn.SendBatch(ctx, batch).Close()
}

// lockKey is the advisory lock that claims schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("ilinkflow/dbtest/" + schema))
	return int64(h.Sum64() >> 1)
}

var migrationsHash = sync.OnceValue(func() string {
	h := sha256.New()
	err := fs.WalkDir(db.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Migrations(), path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		// The migrations are embedded at build time; failing to read them is a build defect.
		panic(fmt.Sprintf("dbtest: read embedded migrations: %v", err))
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
})

// RefuseInboundText makes the schema behind pool refuse, with a data exception (SQLSTATE
// 22023), every inbound message whose payload contains marker, as a rule only the
// database knows would: a page carrying one fails its commit the same way on every try.
// The refusal is dropped when the test ends (schemas are reused).
func RefuseInboundText(tb testing.TB, pool *pgxpool.Pool, marker string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE OR REPLACE FUNCTION refuse_inbound_text() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF strpos(NEW.payload::text, `+quoteLiteral(marker)+`) > 0 THEN
				RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22023';
			END IF;
			RETURN NEW;
		END $$`); err != nil {
		tb.Fatalf("dbtest: refuse inbound text: %v", err)
	}
	if _, err := pool.Exec(ctx, `CREATE OR REPLACE TRIGGER refuse_inbound_text BEFORE INSERT ON inbound_messages
		FOR EACH ROW EXECUTE FUNCTION refuse_inbound_text()`); err != nil {
		tb.Fatalf("dbtest: refuse inbound text: %v", err)
	}
	tb.Cleanup(func() {
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `DROP TRIGGER IF EXISTS refuse_inbound_text ON inbound_messages;
			DROP FUNCTION IF EXISTS refuse_inbound_text()`); err != nil {
			tb.Errorf("dbtest: drop the refusal of inbound text: %v", err)
		}
	})
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
