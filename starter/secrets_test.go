package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The secrets the environment of TestNoSecretInHelpLogsOrErrors holds: none may appear in
// anything the commands print.
const (
	secretDBPassword   = "s3cretpw"
	secretTemporalKey  = "tak-fake-temporal-api-key-0123456789"
	secretWebhook      = "whsec-fake-webhook-secret-0123456789abcdef"
	secretCodecToken   = "codec-fake-token-0123456789abcdef0123"
	secretUIToken      = "ui-fake-operator-token-0123456789abcdef"
	secretClientKeyPEM = "fake-temporal-client-key-data-0123456789"
)

// buildCommands builds the real starter and worker binaries into a temporary directory.
func buildCommands(t *testing.T) (starter, worker string) {
	t.Helper()
	dir := t.TempDir()
	starter, worker = filepath.Join(dir, "starter"), filepath.Join(dir, "worker")
	for bin, pkg := range map[string]string{starter: ".", worker: "../worker"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return starter, worker
}

// secretEnv is the process environment without any ilinkflow or Temporal setting, plus
// set.
func secretEnv(set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || strings.HasPrefix(k, "ILINKFLOW_") || strings.HasPrefix(k, "TEMPORAL_") ||
			strings.HasPrefix(k, "ILINK_") || strings.HasPrefix(k, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// assertNoSecret fails t when out shows any of the secrets.
func assertNoSecret(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// No secret in --help, logs or errors: with DATABASE_URL holding a password and every
// secret-bearing variable set (TEMPORAL_API_KEY, the Temporal client key, the sealing
// keys, the webhook secret, the codec and web front end tokens), `worker --help` and
// `starter <command> --help` show none of them (the database URL appears with its
// password as xxxxx); and a worker and the starter's database commands that cannot
// connect (a port nothing listens on), the worker logging at debug level, fail without
// showing the password, for a URL and for a keyword/value DSN.
func TestNoSecretInHelpLogsOrErrors(t *testing.T) {
	t.Parallel()
	starter, worker := buildCommands(t)
	sealingKey := strings.TrimPrefix(testkit.KeySpec, "1:")
	secrets := []string{secretDBPassword, secretTemporalKey, secretWebhook, secretCodecToken, secretUIToken,
		secretClientKeyPEM, sealingKey}
	helpEnv := secretEnv(map[string]string{
		"DATABASE_URL":                 "postgres://u:" + secretDBPassword + "@127.0.0.1:5432/test",
		"TEMPORAL_API_KEY":             secretTemporalKey,
		"TEMPORAL_TLS_CLIENT_KEY_DATA": secretClientKeyPEM,
		sealing.EnvKeys:                testkit.KeySpec,
		"ILINKFLOW_WEBHOOK_SECRET":     secretWebhook,
		"ILINKFLOW_CODEC_TOKEN":        secretCodecToken,
		"ILINKFLOW_UI_TOKEN":           secretUIToken,
	})
	run := func(env []string, bin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("help", func(t *testing.T) {
		out, err := run(helpEnv, worker, "--help")
		if err != nil || !strings.Contains(out, "--database-url") {
			t.Fatalf("worker --help: %v\n%s", err, out)
		}
		assertNoSecret(t, "worker --help", out, secrets...)
		for _, cmd := range []string{"", "migrate", "keygen", "enroll", "accounts", "windows", "held", "quarantine", "pause", "resume", "remove", "forget", "dev"} {
			args := []string{"--help"}
			if cmd != "" {
				args = []string{cmd, "--help"}
			}
			out, err := run(helpEnv, starter, args...)
			if err != nil || !strings.Contains(out, "usage: starter") {
				t.Fatalf("starter %s --help: %v\n%s", cmd, err, out)
			}
			assertNoSecret(t, "starter "+cmd+" --help", out, secrets...)
			if strings.Contains(out, "-database-url") && !strings.Contains(out, "postgres://u:xxxxx@127.0.0.1:5432/test") {
				t.Errorf("starter %s --help does not show the redacted default of --database-url:\n%s", cmd, out)
			}
		}
	})

	t.Run("failed connect", func(t *testing.T) {
		port := testkit.FreeAddr(t) // nothing listens there
		_, p, _ := strings.Cut(port, ":")
		for _, dbURL := range []string{
			"postgres://u:" + secretDBPassword + "@127.0.0.1:" + p + "/test?sslmode=disable",
			"host=127.0.0.1 port=" + p + " user=u password=" + secretDBPassword + " dbname=test sslmode=disable",
		} {
			env := secretEnv(map[string]string{
				"DATABASE_URL":        dbURL,
				"TEMPORAL_API_KEY":    secretTemporalKey,
				"TEMPORAL_ADDRESS":    "127.0.0.1:9", // never dialed: PostgreSQL comes first
				sealing.EnvKeys:       testkit.KeySpec,
				"ILINKFLOW_LOG_LEVEL": "debug",
				"ILINKFLOW_HTTP_ADDR": "off",
			})
			out, err := run(env, worker)
			if err == nil || !strings.Contains(out, "worker: ") {
				t.Fatalf("worker on a closed port: %v, want a failure\n%s", err, out)
			}
			assertNoSecret(t, "worker's log and error", out, secrets...)
			for _, cmd := range [][]string{{"accounts"}, {"windows"}, {"held", "list"}, {"quarantine"}, {"migrate"}, {"pause", "--account", "ilk_x", "--for", "1h"}} {
				out, err := run(env, starter, cmd...)
				if err == nil || !strings.Contains(out, "starter: cannot connect to PostgreSQL") {
					t.Fatalf("starter %s on a closed port: %v, want a failure naming PostgreSQL\n%s", cmd[0], err, out)
				}
				assertNoSecret(t, "starter "+cmd[0]+"'s error", out, secrets...)
			}
			out, err = run(env, starter, "dev")
			if err == nil || !strings.Contains(out, "starter: PostgreSQL at DATABASE_URL is not reachable") {
				t.Fatalf("starter dev on a closed port: %v, want a failure naming PostgreSQL\n%s", err, out)
			}
			assertNoSecret(t, "starter dev's error", out, secrets...)
			// Given on the command line too, the URL is not echoed in the error.
			out, err = run(env, starter, "accounts", "--database-url", dbURL)
			if err == nil {
				t.Fatalf("starter accounts --database-url on a closed port succeeded:\n%s", out)
			}
			assertNoSecret(t, "starter accounts --database-url's error", out, secrets...)
		}
	})
}
