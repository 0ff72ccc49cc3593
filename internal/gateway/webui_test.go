package gateway_test

import (
	"net/http"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The worker serves the enrollment front end under /ui/ only when an operator token is
// configured, and behind its login: a page without a session goes to the login form.
func TestRunServesTheWebUIOnlyWithAnOperatorToken(t *testing.T) {
	t.Parallel()
	srv := devserver.Start(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(url string) *http.Response {
		t.Helper()
		resp, err := noRedirect.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	ns, _ := srv.NewNamespace(t)
	off := runHTTPWith(t, srv, ns, func(*gateway.Config) {})
	if resp := get(off + gateway.UIPath + "/"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("without %s: %d, want 404", webui.TokenEnv, resp.StatusCode)
	}
	ns2, _ := srv.NewNamespace(t)
	on := runHTTPWith(t, srv, ns2, func(c *gateway.Config) { c.UIToken = sealing.NewSecret("gateway-ui-token-0123456789") })
	resp := get(on + gateway.UIPath + "/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") == "" {
		t.Fatalf("a page without a session: %d %q, want a redirect to the login form", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// The web front end's proxy settings are read from flags or the environment, and a bad
// value is refused with the rule.
func TestTheWebUIsClientAddressHeaderAndPublicURLAreSettingsWithTheirRules(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ILINKFLOW_UI_CLIENT_ADDRESS_HEADER": "X-Forwarded-For", "ILINKFLOW_UI_PUBLIC_URL": "https://bots.example.com/ui/"}
	cfg, err := gateway.ConfigFromEnv(envOf(withKeys(env)), nil)
	if err != nil || cfg.UIClientAddressHeader != "X-Forwarded-For" || cfg.UIPublicURL != "https://bots.example.com/ui" {
		t.Fatalf("from the environment: %q %q (%v)", cfg.UIClientAddressHeader, cfg.UIPublicURL, err)
	}
	for _, args := range [][]string{
		{"--ui-client-address-header", "X-Forwarded-For: 1.2.3.4"},
		{"--ui-public-url", "bots.example.com"},
		{"--ui-public-url", "ftp://bots.example.com"},
		{"--ui-public-url", "https://bots.example.com/ui?x=1"},
	} {
		if _, err := gateway.ConfigFromEnv(envOf(withKeys(nil)), args); err == nil {
			t.Errorf("%v was taken", args)
		}
	}
}
