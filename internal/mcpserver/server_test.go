package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A wait may last longer than the HTTP server's write timeout (the worker's is made for
// the reply API): the MCP endpoint lifts it, and bounds its waits itself.
func TestAWaitOutlastsTheHTTPServersWriteTimeout(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	token, err := st.CreateMCPAgent(ctx, time.Now(), "patient", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := mcpserver.New(mcpserver.Config{Store: st, Replies: http.NotFoundHandler()})
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: bearer{token.Reveal()}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolWait, Arguments: map[string]any{"timeout_seconds": 3}})
	if err != nil {
		t.Fatalf("a 3 s wait behind a 1 s write timeout: %v", err)
	}
	if res.IsError {
		t.Fatalf("the wait was refused: %+v", res.Content)
	}
	if out, ok := res.StructuredContent.(map[string]any); !ok || out["timed_out"] != true {
		t.Fatalf("the wait answered %#v", res.StructuredContent)
	}
}
