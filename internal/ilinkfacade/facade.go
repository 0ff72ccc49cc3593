// Package ilinkfacade is the gateway's iLink facade (docs/ilink-facade.md): it serves the
// iLink bot HTTP API (as the simulator, docs/simulator.md, speaks it) to the iLink clients people already run (the
// official OpenClaw plugin, WeClaw, ...), so that they answer ilinkflow's bots unchanged.
// Each client (store.CreateILinkClient) answers the bots routed to it (route kind ilink).
//
//   - get_bot_qrcode / get_qrcode_status: a client's QR login; an operator approves it for
//     one of the installation's accounts, and the client collects a bot id and token of
//     the facade's own making (never the account's real ones);
//   - getupdates: a long poll over the client's queue (store.OfferToILinkClient), with a
//     cursor the facade issues; a message leaves the queue only when the client's next
//     poll moves past it, so a client that crashed before it got a page gets it again;
//   - sendmessage, sendtyping, getuploadurl and the CDN: replies through the reply API
//     ([replyapi.API], in process) under the session of the message's latest offer, so
//     that they keep its rules (quota, pacing, the throttle breaker, idempotency by
//     client_id, held replies); context tokens handed to clients are the facade's own;
//   - getconfig, msg/notifystart, msg/notifystop: answered as iLink answers them.
//
// A request is answered in iLink's shapes: HTTP 200 with ret/errcode/errmsg; an unknown,
// revoked or missing token is errcode -14 "session timeout", as iLink answers a dead
// token; a malformed request is ret -2 "invalid arguments". Each refusal is also logged
// and counted with a stable code. No token (a client's, a bot's or a session's) and no
// message text is logged.
package ilinkfacade

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// BotPath is the prefix of the iLink bot API on the agent-facing address: a client's base
// URL is the address itself (the clients join "ilink/bot/..." to it).
const BotPath = "/ilink/bot/"

// CDNPath is the prefix of the facade's CDN (uploads and downloads of media).
const CDNPath = "/ilink/cdn/"

// LoginPath is the page a login's QR code opens: it shows the code an operator approves.
const LoginPath = "/ilink/login/"

// Defaults of [Config].
const (
	// DefaultLongPoll is how long a getupdates is held: answers advertise it plus a
	// margin as longpolling_timeout_ms (35 s, iLink's own).
	DefaultLongPoll     = 30 * time.Second
	pollMargin          = 5 * time.Second
	DefaultPollInterval = time.Second
	DefaultLoginTTL     = 5 * time.Minute
	DefaultStoreTimeout = 5 * time.Second
	// MaxPage bounds the messages of one getupdates answer.
	MaxPage = 100
	// maxBodyBytes bounds a bot API request body (a sendmessage carries at most one item).
	maxBodyBytes = 256 << 10
)

// Refusal codes of the facade's logs and metrics (the client sees iLink's shapes).
const (
	CodeStaleToken     = "stale_token"
	CodeInvalidRequest = "invalid_request"
	CodeNotYours       = "not_your_message"
	CodeStoreFailed    = "store_unavailable"
	CodeReplyRefused   = "reply_refused"
	CodeUploadRefused  = "upload_refused"
)

// Store is what the facade reads and writes (a *store.Store).
type Store interface {
	ILinkCallerByToken(ctx context.Context, token sealing.Secret) (store.ILinkCaller, bool, error)
	ILinkClientOffers(ctx context.Context, client, accountKey string, after int64, max int32) ([]store.ILinkOffer, error)
	GetILinkClientOffer(ctx context.Context, messageKey string) (store.ILinkOffer, bool, error)
	LatestILinkClientOffer(ctx context.Context, client, accountKey, peerID string) (store.ILinkOffer, bool, error)
	ILinkClientCursor(ctx context.Context, client, botID string) (int64, error)
	AckILinkClientCursor(ctx context.Context, now time.Time, client, botID string, seq int64) error
	SweepILinkClients(ctx context.Context, now, loginsBefore, uploadsBefore time.Time) (int64, error)
	ListenILinkOffers(ctx context.Context, wake func(client string)) error
	StartILinkLogin(ctx context.Context, now time.Time, ttl time.Duration) (store.ILinkLoginStart, error)
	PollILinkLogin(ctx context.Context, now time.Time, qrcode sealing.Secret) (store.ILinkLoginState, error)
	ScanILinkLogin(ctx context.Context, now time.Time, code string) (bool, error)
	StageILinkUpload(ctx context.Context, now time.Time, client, accountKey string, mediaType int32, data []byte) (string, error)
	GetILinkUpload(ctx context.Context, id string) (store.ILinkUpload, bool, error)
	GetMessage(ctx context.Context, messageKey string) (store.Message, error)
	GetWindow(ctx context.Context, windowID int64) (store.Window, error)
	GetAccount(ctx context.Context, accountKey string) (store.Account, error)
}

// Config configures the facade.
type Config struct {
	Store Store
	// Replies is the reply API (replyapi.API) replies, typing and attachments go through.
	Replies http.Handler
	// Keys seals the facade's upload and download references.
	Keys *sealing.Keyring
	// PublicURL is the agent-facing address as clients reach it (its scheme, host and
	// path prefix, without a trailing slash); "" takes http://<Host> of each request.
	PublicURL string
	Logger    *slog.Logger
	// Metrics counts the facade's requests by endpoint and outcome (nil: none).
	Metrics *metrics.Product
	// LongPoll is how long a getupdates waits for a message (default 30 s).
	LongPoll time.Duration
	// PollInterval is how often a waiting getupdates looks on its own, besides the wake-ups
	// of new offers (default 1 s).
	PollInterval time.Duration
	// LoginTTL is how long a QR login waits for its approval (default 5 min).
	LoginTTL time.Duration
	// StoreTimeout bounds each store call made for a request (default 5 s).
	StoreTimeout time.Duration
	// NoListen leaves the wake-ups of new offers out (the connection bound has no room for
	// the listener's connection): a waiting poll looks every PollInterval.
	NoListen bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Facade is the iLink facade.
type Facade struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	// closing is closed by Close: long polls answer at once.
	closing   chan struct{}
	closeOnce sync.Once
	// polled is closed by the first long poll: the listener connects then.
	polled     chan struct{}
	polledOnce sync.Once
}

// Close ends the long polls (each answers an empty page, its cursor unchanged) and makes
// every later one answer at once: the worker drains.
func (f *Facade) Close() { f.closeOnce.Do(func() { close(f.closing) }) }

// New builds the facade; Handler serves it and Run wakes its long polls.
func New(cfg Config) *Facade {
	if cfg.LongPoll <= 0 {
		cfg.LongPoll = DefaultLongPoll
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.LoginTTL <= 0 {
		cfg.LoginTTL = DefaultLoginTTL
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Facade{cfg: cfg, log: cfg.Logger, waiters: map[string]map[chan struct{}]struct{}{}, closing: make(chan struct{}), polled: make(chan struct{})}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.log = f.log.With("component", "ilink-facade")
	m := http.NewServeMux()
	m.HandleFunc(BotPath+"get_bot_qrcode", f.getBotQRCode)
	m.HandleFunc(BotPath+"get_qrcode_status", f.getQRCodeStatus)
	m.HandleFunc(BotPath+"getupdates", f.bot("getupdates", f.getUpdates))
	m.HandleFunc(BotPath+"sendmessage", f.bot("sendmessage", f.sendMessage))
	m.HandleFunc(BotPath+"getconfig", f.bot("getconfig", f.getConfig))
	m.HandleFunc(BotPath+"sendtyping", f.bot("sendtyping", f.sendTyping))
	m.HandleFunc(BotPath+"getuploadurl", f.bot("getuploadurl", f.getUploadURL))
	m.HandleFunc(BotPath+"msg/notifystart", f.bot("msg/notifystart", f.notify))
	m.HandleFunc(BotPath+"msg/notifystop", f.bot("msg/notifystop", f.notify))
	m.HandleFunc(CDNPath+"upload", f.cdnUpload)
	m.HandleFunc(CDNPath+"download", f.cdnDownload)
	m.HandleFunc(LoginPath+"{code}", f.loginPage)
	f.mux = m
	return f
}

// Handler serves the facade's paths (BotPath, CDNPath, LoginPath).
func (f *Facade) Handler() http.Handler { return f.mux }

// Run listens for new offers, waking the long polls of their client, and sweeps what the
// facade no longer needs, until ctx ends.
func (f *Facade) Run(ctx context.Context) {
	go func() {
		// The listener connects at the first long poll: a worker no iLink client polls holds
		// no connection for it.
		select {
		case <-ctx.Done():
			return
		case <-f.polled:
		}
		for !f.cfg.NoListen && ctx.Err() == nil {
			if err := f.cfg.Store.ListenILinkOffers(ctx, f.wake); err != nil {
				f.log.Warn("listening for iLink offers failed; polls look on their own meanwhile", "error", err)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
		}
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := f.cfg.Now()
			if n, err := f.cfg.Store.SweepILinkClients(ctx, now, now.Add(-time.Hour), now.Add(-time.Hour)); err != nil {
				f.log.Warn("sweeping iLink client rows failed", "error", err)
			} else if n > 0 {
				f.log.Info("swept iLink client rows", "rows", n)
			}
		}
	}
}

// wake wakes the long polls of a client.
func (f *Facade) wake(client string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.waiters[client] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// waiter registers a long poll of a client; the returned func unregisters it.
func (f *Facade) waiter(client string) (chan struct{}, func()) {
	f.polledOnce.Do(func() { close(f.polled) })
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	if f.waiters[client] == nil {
		f.waiters[client] = map[chan struct{}]struct{}{}
	}
	f.waiters[client][ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.waiters[client], ch)
		if len(f.waiters[client]) == 0 {
			delete(f.waiters, client)
		}
		f.mu.Unlock()
	}
}

// ---------------------------------------------------------------------------
// Requests and answers

// call is one authenticated bot API request.
type call struct {
	w        http.ResponseWriter
	r        *http.Request
	body     []byte
	token    sealing.Secret // the bearer token the caller authenticated with
	caller   store.ILinkCaller
	endpoint string
	log      *slog.Logger
}

type botHandler func(c *call)

// bot wraps an authenticated bot endpoint: POST only, a bounded body, the headers and
// base_info iLink requires, then the token. A refused request is answered in iLink's
// shape, logged and counted with its code.
func (f *Facade) bot(endpoint string, h botHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		log := f.log.With("endpoint", endpoint)
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if len(body) > maxBodyBytes {
			f.refuse(w, log, endpoint, CodeInvalidRequest, "body over the limit", invalidArgs())
			return
		}
		if problem := checkHeaders(r); problem != "" {
			f.refuse(w, log, endpoint, CodeInvalidRequest, problem, invalidArgs())
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			f.refuse(w, log, endpoint, CodeStaleToken, "no bearer token", staleBody())
			return
		}
		secret := sealing.NewSecret(token)
		ctx, cancel := f.storeContext(r.Context())
		caller, found, err := f.cfg.Store.ILinkCallerByToken(ctx, secret)
		cancel()
		switch {
		case err != nil:
			f.storeFailed(w, log, endpoint, err)
			return
		case !found:
			f.refuse(w, log, endpoint, CodeStaleToken, "unknown token", staleBody())
			return
		case caller.Revoked:
			f.refuse(w, log.With("client", caller.Client), endpoint, CodeStaleToken, "revoked token", staleBody())
			return
		}
		if problem := checkBaseInfo(body); problem != "" {
			f.refuse(w, log, endpoint, CodeInvalidRequest, problem, invalidArgs())
			return
		}
		log = log.With("client", caller.Client)
		if caller.BotID != "" {
			log = log.With("bot_id", caller.BotID, "account", caller.AccountKey)
		}
		h(&call{w: w, r: r, body: body, token: secret, caller: caller, endpoint: endpoint, log: log})
	}
}

// checkHeaders returns what is wrong with a bot POST's iLink headers ("" when nothing).
func checkHeaders(r *http.Request) string {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "Content-Type is not application/json"
	}
	if r.Header.Get("AuthorizationType") != "ilink_bot_token" {
		return "AuthorizationType is not ilink_bot_token"
	}
	return ""
}

// checkBaseInfo returns what is wrong with a body's base_info ("" when nothing).
func checkBaseInfo(body []byte) string {
	var env struct {
		BaseInfo *struct {
			ChannelVersion *string `json:"channel_version"`
			BotAgent       *string `json:"bot_agent"`
		} `json:"base_info"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return "body is not a JSON object"
	}
	if env.BaseInfo == nil {
		return "missing base_info"
	}
	if a := env.BaseInfo.BotAgent; a != nil {
		if len(*a) > 256 {
			return "base_info.bot_agent longer than 256 bytes"
		}
		for i := 0; i < len(*a); i++ {
			if (*a)[i] < 0x20 || (*a)[i] > 0x7e {
				return "base_info.bot_agent is not printable ASCII"
			}
		}
	}
	return ""
}

// staleBody is iLink's answer to a dead token, with both ret and errcode -14 (a shape
// iLink was seen to answer): the official plugin refuses a send only on a non-zero ret,
// and pauses its poll on either.
func staleBody() map[string]any {
	return map[string]any{"ret": -14, "errcode": -14, "errmsg": "session timeout"}
}

func invalidArgs() map[string]any { return map[string]any{"ret": -2, "errmsg": "invalid arguments"} }

func retMinus2(msg string) map[string]any { return map[string]any{"ret": -2, "errmsg": msg} }

// refuse answers a refused request in iLink's shape (HTTP 200) and logs and counts it.
func (f *Facade) refuse(w http.ResponseWriter, log *slog.Logger, endpoint, code, why string, body any) {
	log.Info("iLink facade request refused", "code", code, "why", why)
	f.count(endpoint, code)
	writeJSON(w, http.StatusOK, body)
}

func (f *Facade) storeFailed(w http.ResponseWriter, log *slog.Logger, endpoint string, err error) {
	log.Warn("iLink facade store call failed", "error", err)
	f.count(endpoint, CodeStoreFailed)
	// iLink's own failures reach clients as 5xx; the clients back off and retry.
	http.Error(w, "the gateway's store did not answer", http.StatusServiceUnavailable)
}

func (f *Facade) count(endpoint, outcome string) {
	if f.cfg.Metrics != nil {
		f.cfg.Metrics.ILinkFacadeRequest(endpoint, outcome)
	}
}

func (f *Facade) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), f.cfg.StoreTimeout)
}

// publicURL is the base clients reach the facade at.
func (f *Facade) publicURL(r *http.Request) string {
	if f.cfg.PublicURL != "" {
		return strings.TrimSuffix(f.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ok answers a bot call that succeeded, and counts it.
func (c *call) ok(f *Facade, v any) {
	f.count(c.endpoint, "ok")
	writeJSON(c.w, http.StatusOK, v)
}

var errNotYours = errors.New("the message is not offered to this caller")
