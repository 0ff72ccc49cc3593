package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
)

func TestConfigRetentionDefaultsAreThirtyDaysOfContentAndNinetyOfRows(t *testing.T) {
	t.Parallel()
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Retention
	if r.Content != 720*time.Hour || r.Rows != 2160*time.Hour || r.Quarantine != 720*time.Hour ||
		r.Audit != 8760*time.Hour || cfg.RetentionEvery != time.Hour {
		t.Fatalf("retention defaults %+v every %v", r, cfg.RetentionEvery)
	}
	cfg, err = gateway.ConfigFromEnv(envOf(withKeys(map[string]string{"ILINKFLOW_RETAIN_CONTENT": "0",
		"ILINKFLOW_RETAIN_ROWS": "0", "ILINKFLOW_RETAIN_QUARANTINE": "0"})), []string{"--retain-audit", "0", "--retention-every", "10m"})
	if err != nil || !cfg.Retention.KeepsEverything() || cfg.RetentionEvery != 10*time.Minute {
		t.Fatalf("0 keeps forever: %+v, %v", cfg.Retention, err)
	}
	var b strings.Builder
	gateway.Usage(&b)
	for _, want := range []string{"--retain-content", "ILINKFLOW_RETAIN_ROWS", "--retain-quarantine", "--retain-audit",
		"--retention-every", "default 720h", "default 2160h"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage does not mention %q", want)
		}
	}
}

func TestConfigRefusesARetentionThatDeletesRowsBeforeTheirContentOrTooSoonForDedupe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"content longer than rows", []string{"--retain-content", "2200h"}, "must not be longer than retain-rows"},
		{"rows without content", []string{"--retain-content", "0"}, "retain-content 0 keeps forever"},
		{"rows under a week", []string{"--retain-content", "24h", "--retain-rows", "48h"}, "must be at least 168h"},
		{"negative horizon", []string{"--retain-audit", "-1h"}, "flag --retain-audit"},
		{"interval too short", []string{"--retention-every", "10s"}, "retention-every 10s must be at least 1m0s"},
		{"interval zero", []string{"--retention-every", "0"}, "flag --retention-every"},
	} {
		_, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
}
