package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
)

// The reply API's store timeout and upload bound come from their flags, then their
// environment variables, then the documented defaults (5s, 4), and are refused out of
// their bounds.
func TestReplyAPIStoreTimeoutAndUploadBoundAreSettings(t *testing.T) {
	t.Parallel()
	def := gateway.DefaultConfig()
	if replyapi.DefaultStoreTimeout != 5*time.Second || replyapi.DefaultMaxUploads != 4 {
		t.Fatalf("documented defaults changed: %v %d", replyapi.DefaultStoreTimeout, replyapi.DefaultMaxUploads)
	}
	if def.APIStoreTimeout != replyapi.DefaultStoreTimeout || def.APIMaxUploads != replyapi.DefaultMaxUploads {
		t.Fatalf("the worker's defaults %v %d are not the reply API's", def.APIStoreTimeout, def.APIMaxUploads)
	}
	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		timeout time.Duration
		uploads int
	}{
		{"defaults", nil, nil, 5 * time.Second, 4},
		{"environment", map[string]string{"ILINKFLOW_API_STORE_TIMEOUT": "2s", "ILINKFLOW_API_MAX_UPLOADS": "8"}, nil, 2 * time.Second, 8},
		{"flags win", map[string]string{"ILINKFLOW_API_STORE_TIMEOUT": "2s"}, []string{"--api-store-timeout", "750ms", "--api-max-uploads", "1"},
			750 * time.Millisecond, 1},
	} {
		cfg, err := gateway.ConfigFromEnv(envOf(withKeys(c.env)), c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.APIStoreTimeout != c.timeout || cfg.APIMaxUploads != c.uploads {
			t.Errorf("%s: %v %d, want %v %d", c.name, cfg.APIStoreTimeout, cfg.APIMaxUploads, c.timeout, c.uploads)
		}
	}
	for _, args := range [][]string{
		{"--api-store-timeout", "0s"}, {"--api-store-timeout", "-1s"}, {"--api-store-timeout", "2m"}, {"--api-store-timeout", "soon"},
		{"--api-max-uploads", "0"}, {"--api-max-uploads", "65"}, {"--api-max-uploads", "many"},
	} {
		if _, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	var usage strings.Builder
	gateway.Usage(&usage)
	for _, want := range []string{"--api-store-timeout (ILINKFLOW_API_STORE_TIMEOUT, default 5s)", "--api-max-uploads (ILINKFLOW_API_MAX_UPLOADS, default 4)"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}
