package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/db"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
)

// The deployment settings: --migrate (on by default; a bare --migrate means true), the
// migration timeouts, and --admin-addr (unset by default: one listener), from flags or the
// environment, with a clear refusal of a bad value.
func TestMigrateAndAdminAddressSettings(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Migrate || cfg.AdminAddr != "" || cfg.MigrateLockTimeout != db.DefaultLockTimeout || cfg.MigrateStatementTimeout != db.DefaultStatementTimeout {
		t.Fatalf("defaults: migrate %v, admin %q, timeouts %v %v", cfg.Migrate, cfg.AdminAddr, cfg.MigrateLockTimeout, cfg.MigrateStatementTimeout)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withKeys(map[string]string{
		"ILINKFLOW_MIGRATE": "false", gateway.EnvAdminAddr: "0.0.0.0:9090",
		gateway.EnvMigrateLockTimeout: "3s", gateway.EnvMigrateStatementTimeout: "1h",
	})), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Migrate || cfg.AdminAddr != "0.0.0.0:9090" || cfg.MigrateLockTimeout != 3*time.Second || cfg.MigrateStatementTimeout != time.Hour {
		t.Fatalf("from the environment: migrate %v, admin %q, timeouts %v %v", cfg.Migrate, cfg.AdminAddr, cfg.MigrateLockTimeout, cfg.MigrateStatementTimeout)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withKeys(map[string]string{"ILINKFLOW_MIGRATE": "false"})), []string{"--migrate", "--admin-addr", ""})
	if err != nil || !cfg.Migrate || cfg.AdminAddr != "" {
		t.Fatalf("bare --migrate over the environment: migrate %v, admin %q, %v", cfg.Migrate, cfg.AdminAddr, err)
	}
	if cfg, err = gateway.ConfigFromEnv(envOf(withKeys(nil)), []string{"--migrate=false"}); err != nil || cfg.Migrate {
		t.Fatalf("--migrate=false: %v, %v", cfg.Migrate, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--migrate=maybe"}, "--migrate"},
		{[]string{"--admin-addr", "nowhere"}, "--admin-addr"},
		{[]string{"--http-addr", "127.0.0.1:8090", "--admin-addr", "127.0.0.1:8090"}, "admin address"},
		{[]string{"--migrate-lock-timeout", "0s"}, "--migrate-lock-timeout"},
	} {
		_, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	var usage strings.Builder
	gateway.Usage(&usage)
	for _, want := range []string{"--admin-addr", gateway.EnvAdminAddr, "--migrate ", "ILINKFLOW_MIGRATE,", gateway.EnvMigrateLockTimeout, gateway.EnvMigrateStatementTimeout} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}
