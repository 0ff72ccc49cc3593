package e2e_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The worker command with --migrate=false on a database that was never migrated exits 1
// at once with one line that names the database (its URL without the password) and
// "starter migrate", and leaves the database as it was.
func TestAWorkerWithMigrateOffRefusesAnUnmigratedDatabaseInOneLine(t *testing.T) {
	t.Parallel()
	schema := dbtest.NewSchema(t)
	bin := workerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--migrate=false")
	cmd.Env = crashEnv(map[string]string{
		"DATABASE_URL":         dbtest.SchemaURL(schema),
		sealing.EnvKeys:        testkit.KeySpec,
		"ILINKFLOW_HTTP_ADDR":  "off",
		"TEMPORAL_ADDRESS":     "127.0.0.1:9", // never dialed
		"TEMPORAL_CONFIG_FILE": emptyConfigFile,
	})
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker --migrate=false on an unmigrated database: %v, want exit status 1:\n%s", err, out)
	}
	var naming []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "starter migrate") {
			naming = append(naming, line)
		}
	}
	want := "worker: the database at " + dbtest.SchemaURL(schema) + " is not migrated (schema version 0, this build needs "
	if len(naming) != 1 || !strings.HasPrefix(naming[0], want) || !strings.HasSuffix(naming[0], `): run "starter migrate"`) {
		t.Fatalf("want one line %q...%q, got:\n%s", want, `): run "starter migrate"`, out)
	}
	t.Logf("%s", naming[0])
	var tables int
	if err := dbtest.NewPool(t).QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the worker wrote to the unmigrated schema: %d tables, %v", tables, err)
	}
}
