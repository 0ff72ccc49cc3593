package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/dbtest"
)

// latestMigration is the highest embedded migration: the version this build needs.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := fs.ReadDir(db.Migrations(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(prefix, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	if latest == 0 {
		t.Fatal("no embedded migration")
	}
	return latest
}

// An unmigrated database gets one line naming "starter migrate": every starter command
// that reads the store, run against a fresh empty schema (and against one a few
// migrations behind), exits 1 with exactly the line `the database at <URL, password
// hidden> is not migrated (schema version X, this build needs Y): run "starter migrate"`
// on stderr, not a store error about a missing relation.
func TestAnUnmigratedDatabaseGetsOneLineNamingStarterMigrate(t *testing.T) {
	t.Parallel()
	schema := dbtest.NewSchema(t)
	u, err := url.Parse(dbtest.SchemaURL(schema))
	if err != nil {
		t.Fatal(err)
	}
	// A password the local server (trust authentication) never asks for: the line must
	// not show it.
	u.User = url.UserPassword(u.User.Username(), secretDBPassword)
	dbURL := u.String()
	shown := strings.Replace(dbURL, secretDBPassword, "xxxxx", 1)
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	latest := latestMigration(t)
	check := func(version int64) {
		t.Helper()
		want := fmt.Sprintf("starter: the database at %s is not migrated (schema version %d, this build needs %d): run \"starter migrate\"\n",
			shown, version, latest)
		t.Logf("%s", want)
		for _, args := range [][]string{{"accounts"}, {"windows"}, {"held", "list"}, {"quarantine"}, {"pause", "--account", "ilk_x"},
			{"resume", "--account", "ilk_x"}, {"remove", "--account", "ilk_x"}} {
			var out, errOut strings.Builder
			code := runMain(context.Background(), args, strings.NewReader(""), &out, &errOut, getenv)
			if code != 1 || errOut.String() != want || out.String() != "" {
				t.Errorf("starter %s on a schema at version %d: exit %d, stdout %q, stderr\n%q\nwant exit 1 and\n%q",
					args[0], version, code, out.String(), errOut.String(), want)
			}
		}
	}
	check(0)

	// A schema migrated part of the way (as goose records it) is behind just the same.
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(context.Background(), `CREATE TABLE goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL,
		is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true)`); err != nil {
		t.Fatal(err)
	}
	check(1)

	// Migrated, the same commands work (the fake record goes first: migration 1 never
	// ran).
	if _, err := conn.Exec(context.Background(), "DROP TABLE goose_db_version"); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := runMain(context.Background(), []string{"migrate"}, strings.NewReader(""), &out, &errOut, getenv); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := runMain(context.Background(), []string{"accounts"}, strings.NewReader(""), &out, &errOut, getenv); code != 0 || errOut.String() != "" {
		t.Fatalf("accounts on the migrated schema: exit %d, stderr %q", code, errOut.String())
	}
}
