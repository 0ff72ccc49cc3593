// Package mcpserver is the gateway's MCP server: agents that speak the Model Context
// Protocol (streamable HTTP transport) connect to it on the agent-facing address, at
// [Path], with a bearer token of an MCP agent (store.CreateMCPAgent), and answer the bots
// routed to that agent (route kind mcp) with its tools:
//
//   - wait_for_message: long-polls for the next message offered to the agent, and claims it
//     for the MCP session;
//   - reply_text, reply_media: a reply, with an idempotency key the agent gives;
//   - fetch_attachment: an inbound attachment's bytes;
//   - typing: show or cancel "typing";
//   - finish: the message's verdict (handled or failed).
//
// Every tool but the wait acts through the reply API ([replyapi.API], in process) under
// the session of the message's latest offer, so that it keeps the reply API's rules:
// quota, pacing, idempotency, the unknown outcome and its typed refusals. A refusal is a
// tool error whose text is the JSON {"code":…,"status":…,"message":…} (status is the
// HTTP status the reply API would answer; 403 bot_not_routed_to_agent for a message or a
// bot of another agent).
//
// Durability: a message handed to an MCP agent is stored in the agent's inbox
// (store.OfferToMCP) before the hand-off succeeds. A wait claims it for its MCP session;
// the claim lasts while the session lives here (the server renews it) and is released
// when the session ends (the client closes it, or it stays idle for the session timeout),
// so a message a client took and dropped is offered again to the next wait of the same
// agent. If the gateway dies, its claims lapse after the lease. The window's re-offers
// keep a live claim, so a message is never given to two sessions at once.
//
// No token (the agent's or a session's) and no message text is logged.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/version"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// Path is where the MCP server is served on the agent-facing address.
const Path = "/mcp"

// Defaults of [Config].
const (
	DefaultLease          = 30 * time.Second
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultWait           = 30 * time.Second
	MaxWait               = 120 * time.Second
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxMediaBytes bounds a media reply's bytes given inline (base64).
	DefaultMaxMediaBytes = 20 << 20
)

// Error codes of the MCP server's own refusals (the reply API's keep their names).
const (
	// CodeInvalidToken: no bearer token, or one that is unknown or revoked (HTTP 401).
	CodeInvalidToken = "invalid_mcp_token"
	// CodeBotNotRouted: the message or bot is not routed to this agent (403).
	CodeBotNotRouted = "bot_not_routed_to_agent"
	// CodeMessageNotFound: no such message (404).
	CodeMessageNotFound = "message_not_found"
	// CodeMessageNotOffered: the message was not (yet) offered to an MCP agent (409).
	CodeMessageNotOffered = "message_not_offered"
	// CodeInvalidArgument: a tool argument is malformed (400).
	CodeInvalidArgument = "invalid_argument"
	// CodeStoreUnavailable: the database did not answer (503).
	CodeStoreUnavailable = "store_unavailable"
	// CodeInternal: anything else (500).
	CodeInternal = "internal"
)

// Store is what the server reads and claims in (a *store.Store).
type Store interface {
	MCPAgentByToken(ctx context.Context, token sealing.Secret) (string, bool, error)
	ClaimMCPOffer(ctx context.Context, now time.Time, agent, accountKey, session string, lease time.Duration) (store.MCPOffer, bool, error)
	GetMCPOffer(ctx context.Context, messageKey string) (store.MCPOffer, bool, error)
	RenewMCPClaims(ctx context.Context, until time.Time, sessions []string) (int64, error)
	ReleaseMCPClaims(ctx context.Context, session string) (int64, error)
	DeleteSettledMCPOffers(ctx context.Context, now time.Time) (int64, error)
	GetRoute(ctx context.Context, accountKey string) (store.Route, bool, error)
	GetMessage(ctx context.Context, messageKey string) (store.Message, error)
	GetWindow(ctx context.Context, windowID int64) (store.Window, error)
}

// Config configures the server.
type Config struct {
	Store Store
	// Replies is the reply API (replyapi.API) the tools act through.
	Replies http.Handler
	Logger  *slog.Logger
	// Metrics counts tool calls by tool and answer code (nil: none).
	Metrics *metrics.Product
	// Lease is how long a claim outlives its session's last renewal (default 30 s): the
	// delay before a crashed gateway's claims are offered again.
	Lease time.Duration
	// PollInterval is how often a wait looks for an offer (default 500 ms).
	PollInterval time.Duration
	// SessionTimeout closes an MCP session idle that long (default 10 min), releasing its
	// claims.
	SessionTimeout time.Duration
	// MaxMediaBytes bounds a media reply given inline (default 20 MiB; the reply API's
	// own cap applies too).
	MaxMediaBytes int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Server is the MCP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mcp     *mcp.Server
	handler http.Handler
	// ended counts the sessions followed to their end; closed is set by Close, after
	// which no session is followed (they end with the server).
	mu     sync.Mutex
	closed bool
	ended  sync.WaitGroup
}

// New builds the server; Handler serves it and Run keeps its claims.
func New(cfg Config) *Server {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.MaxMediaBytes <= 0 {
		cfg.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "ilinkflow", Version: version.Get().Version}, &mcp.ServerOptions{
		Instructions: "You answer WeChat users of the bots routed to you. Call wait_for_message, answer with reply_text " +
			"or reply_media (each reply with a new idempotency_key; repeat a call with the same key to retry it), " +
			"then call finish. A window allows a bounded number of replies (window.sends_left) until window.expires_at.",
		InitializedHandler: s.sessionStarted,
	})
	s.addTools()
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: cfg.SessionTimeout, MaxRequestBodyBytes: int64(cfg.MaxMediaBytes)*4/3 + 64<<10})
	// The SDK's bearer middleware ties each MCP session to its agent (TokenInfo.UserID);
	// authenticate answers the typed refusals before it.
	bearer := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		a, ok := ctx.Value(agentKey{}).(agent)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: a.name, Expiration: s.cfg.Now().Add(time.Hour), Extra: map[string]any{tokenExtra: a.token}}, nil
	}, nil)
	s.handler = s.authenticate(bearer(streamable))
	return s
}

// Handler serves the MCP endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// agent is an authenticated MCP agent, in a request's context.
type agent struct {
	name  string
	token sealing.Secret
}

type agentKey struct{}

// tokenExtra is the TokenInfo.Extra key of the agent's token (kept in memory only, to
// check at each wait that it was not revoked meanwhile).
const tokenExtra = "ilinkflow_agent_token"

// authenticate resolves the bearer token to its agent, or answers 401 invalid_mcp_token
// (503 store_unavailable when the database does not answer) as JSON.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			writeError(w, &ToolError{Code: CodeInvalidToken, Status: http.StatusUnauthorized, Message: "send an MCP agent's token as Authorization: Bearer <token>"})
			return
		}
		name, found, err := s.cfg.Store.MCPAgentByToken(r.Context(), token)
		switch {
		case err != nil:
			s.log.Warn("MCP authentication: the store did not answer", "code", string(store.CodeOf(err)))
			writeError(w, &ToolError{Code: CodeStoreUnavailable, Status: http.StatusServiceUnavailable, Message: "the store did not answer; try again"})
			return
		case !found:
			writeError(w, &ToolError{Code: CodeInvalidToken, Status: http.StatusUnauthorized, Message: "the token is unknown or revoked"})
			return
		}
		// A wait lasts up to MaxWait and the session's event stream as long as the session:
		// the server's write timeout (made for the reply API) must not cut them. The MCP
		// server bounds its own waits.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentKey{}, agent{name: name, token: token})))
	})
}

// bearerToken reads "Bearer <token>".
func bearerToken(h string) (sealing.Secret, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return sealing.Secret{}, false
	}
	t := h[len(prefix):]
	if t == "" || len(t) > 512 {
		return sealing.Secret{}, false
	}
	return sealing.NewSecret(t), true
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func writeError(w http.ResponseWriter, e *ToolError) {
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ilinkflow-mcp"`)
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

// ToolError is a typed refusal of a tool (or of the endpoint). Its Error text is its
// JSON, which an MCP client receives as the tool result's text.
type ToolError struct {
	Code    string `json:"code"`
	Status  int    `json:"status"`
	Message string `json:"message"`
	// RetryAfterSeconds is set for a throttled reply.
	RetryAfterSeconds int64 `json:"retry_after_seconds,omitempty"`
	// Attempt is the reply attempt a refusal concerns, when one was made.
	Attempt json.RawMessage `json:"attempt,omitempty"`
}

// Error implements error: the JSON of the refusal.
func (e *ToolError) Error() string {
	b, err := json.Marshal(e)
	if err != nil {
		return e.Code
	}
	return string(b)
}

// sessionStarted follows an MCP session to its end, and then releases its claims.
func (s *Server) sessionStarted(_ context.Context, req *mcp.InitializedRequest) {
	ss := req.Session
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.ended.Add(1)
	go func() {
		defer s.ended.Done()
		_ = ss.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n, err := s.cfg.Store.ReleaseMCPClaims(ctx, ss.ID()); err != nil {
			s.log.Warn("MCP session ended; its claims lapse after the lease", "code", string(store.CodeOf(err)))
		} else if n > 0 {
			s.log.Info("MCP session ended; its unfinished messages are offered again", "messages", n)
		}
	}()
}

// Close ends every MCP session here and waits until their claims are released, so that
// what they took and did not finish is offered again at once.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	s.ended.Wait()
}

// Run renews the claims of the sessions that live here every third of the lease and
// deletes the offers nobody can answer any more, until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	sweep := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ids []string
		for ss := range s.mcp.Sessions() {
			if id := ss.ID(); id != "" {
				ids = append(ids, id)
			}
		}
		if _, err := s.cfg.Store.RenewMCPClaims(ctx, s.cfg.Now().Add(s.cfg.Lease), ids); err != nil && ctx.Err() == nil {
			s.log.Warn("renew MCP claims", "code", string(store.CodeOf(err)))
		}
		if sweep++; sweep%6 == 0 {
			if _, err := s.cfg.Store.DeleteSettledMCPOffers(ctx, s.cfg.Now()); err != nil && ctx.Err() == nil {
				s.log.Warn("delete settled MCP offers", "code", string(store.CodeOf(err)))
			}
		}
	}
}

// callerOf is the agent of a tool call (set by authenticate, carried by the SDK).
func callerOf(req *mcp.CallToolRequest) (agent, *ToolError) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if t, ok := req.Extra.TokenInfo.Extra[tokenExtra].(sealing.Secret); ok && req.Extra.TokenInfo.UserID != "" {
			return agent{name: req.Extra.TokenInfo.UserID, token: t}, nil
		}
	}
	return agent{}, &ToolError{Code: CodeInvalidToken, Status: http.StatusUnauthorized, Message: "the call carries no MCP agent token"}
}

// storeRefusal is the tool error of a failed store call.
func (s *Server) storeRefusal(tool string, err error) *ToolError {
	code := store.CodeOf(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || code == "store_unavailable" {
		return &ToolError{Code: CodeStoreUnavailable, Status: http.StatusServiceUnavailable, Message: "the store did not answer; try again"}
	}
	s.log.Error("MCP tool: store failure", "tool", tool, "code", string(code))
	return &ToolError{Code: CodeInternal, Status: http.StatusInternalServerError, Message: fmt.Sprintf("%s failed (%s)", tool, code)}
}
