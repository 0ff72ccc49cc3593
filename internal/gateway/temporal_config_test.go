package gateway_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/temporalconn"
)

// withConnFile keeps the user's own Temporal client config file out of a test.
func withConnFile(t *testing.T, m map[string]string) map[string]string {
	t.Helper()
	if _, ok := m["TEMPORAL_CONFIG_FILE"]; !ok {
		p := filepath.Join(t.TempDir(), "temporal.toml")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		m["TEMPORAL_CONFIG_FILE"] = p
	}
	return withKeys(m)
}

func TestWorkerReadsTheTemporalConnectionFromAProfileAndFlagsWin(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(file, []byte("[profile.prod]\naddress = \"prod.example:7233\"\nnamespace = \"prod\"\napi_key = \"k-0123456789abcdef\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{"TEMPORAL_CONFIG_FILE": file})), []string{"--temporal-profile", "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalAddress != "prod.example:7233" || cfg.TemporalNamespace != "prod" || !cfg.Temporal.APIKey || !cfg.Temporal.TLS {
		t.Fatalf("from the profile: %+v", cfg.Temporal)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "prod"})),
		[]string{"--temporal-address", "flag.example:7233"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TemporalAddress != "flag.example:7233" || cfg.TemporalNamespace != "prod" {
		t.Fatalf("the flag wins over the profile: %s %s", cfg.TemporalAddress, cfg.TemporalNamespace)
	}
	var log bytes.Buffer
	cfg.NewLogger(&log).Info("worker starting", "config", cfg)
	if strings.Contains(log.String(), "k-0123456789abcdef") || !strings.Contains(log.String(), "config.temporal.api_key=true") {
		t.Fatalf("the log must say an API key is used, never show it: %s", log.String())
	}
	_, err = gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{"TEMPORAL_CONFIG_FILE": file})), []string{"--temporal-profile", "staging"})
	if temporalconn.CodeOf(err) != temporalconn.CodeProfileNotFound {
		t.Fatalf("a missing profile: %v", err)
	}
}

func TestWorkerVersioningNeedsBothDeploymentNameAndBuildID(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{
		"TEMPORAL_DEPLOYMENT_NAME": "ilinkflow", "TEMPORAL_WORKER_BUILD_ID": "2026-12-02.1"})), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Versioned() || cfg.DeploymentName != "ilinkflow" || cfg.BuildID != "2026-12-02.1" {
		t.Fatalf("got %q %q", cfg.DeploymentName, cfg.BuildID)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{"TEMPORAL_DEPLOYMENT_NAME": "ilinkflow"})),
		[]string{"--build-id", "b2"})
	if err != nil || cfg.BuildID != "b2" {
		t.Fatalf("the flag gives the build id: %v %q", err, cfg.BuildID)
	}
	_, err = gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{"TEMPORAL_DEPLOYMENT_NAME": "ilinkflow"})), nil)
	if err == nil || !strings.Contains(err.Error(), "TEMPORAL_WORKER_BUILD_ID") {
		t.Fatalf("a deployment name without a build id: %v", err)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withConnFile(t, map[string]string{})), nil)
	if err != nil || cfg.Versioned() {
		t.Fatalf("without the settings the worker is unversioned: %v %v", err, cfg.Versioned())
	}
}

func TestUsageNamesTheTemporalSettingsAndShowsNoSecret(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	gateway.Usage(&out)
	for _, want := range []string{"--temporal-profile", "--temporal-config-file", "--deployment-name", "--build-id",
		"TEMPORAL_API_KEY", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_WORKER_BUILD_ID"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("usage lacks %s:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "--temporal-api-key") {
		t.Fatal("the API key must have no flag")
	}
}
