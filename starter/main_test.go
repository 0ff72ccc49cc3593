package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// TestMain lets the CLI's tests wait together: they mostly wait on dev servers, worker
// processes and a user typing at human speed.
func TestMain(m *testing.M) {
	testkit.WaitingParallel(8)
	os.Exit(m.Run())
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t) // already migrated once by the harness
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	url := dbtest.URL()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	url += sep + "search_path=" + schema
	for i := 0; i < 2; i++ {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"migrate", "--database-url", url}, nil, &out, &bytes.Buffer{}, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "(0 migration(s) applied)") {
			t.Fatalf("second migration applied something: %s", out.String())
		}
	}
}

func TestKeygenPrintsAUsableKeySpec(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keygen", "--generation", "3"}, nil, &out, &bytes.Buffer{}, nil); err != nil {
		t.Fatal(err)
	}
	k, err := sealing.ParseKeyring(strings.TrimSpace(out.String()))
	if err != nil || k.Current() != 3 {
		t.Fatalf("keygen output does not parse: %v", err)
	}
}

func TestUnknownCommandFails(t *testing.T) {
	t.Parallel()
	if err := run(context.Background(), []string{"frobnicate"}, nil, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil {
		t.Fatal("unknown command accepted")
	}
}
