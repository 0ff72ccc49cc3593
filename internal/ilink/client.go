package ilink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// BotConfig is a getconfig answer.
type BotConfig struct {
	// TypingTicket is the ticket for sendtyping.
	TypingTicket Secret
}

// Operation names used in errors.
const (
	opGetUpdates      = "getupdates"
	opSendMessage     = "sendmessage"
	opGetUploadURL    = "getuploadurl"
	opGetConfig       = "getconfig"
	opSendTyping      = "sendtyping"
	opNotifyStart     = "notifystart"
	opNotifyStop      = "notifystop"
	opGetBotQRCode    = "get_bot_qrcode"
	opGetQRCodeStatus = "get_qrcode_status"
	opCDNUpload       = "cdn upload"
	opCDNDownload     = "cdn download"
	opNew             = "new client"
)

// Endpoint paths, relative to the base URL.
const (
	pathGetUpdates      = "ilink/bot/getupdates"
	pathSendMessage     = "ilink/bot/sendmessage"
	pathGetUploadURL    = "ilink/bot/getuploadurl"
	pathGetConfig       = "ilink/bot/getconfig"
	pathSendTyping      = "ilink/bot/sendtyping"
	pathNotifyStart     = "ilink/bot/msg/notifystart"
	pathNotifyStop      = "ilink/bot/msg/notifystop"
	pathGetBotQRCode    = "ilink/bot/get_bot_qrcode"
	pathGetQRCodeStatus = "ilink/bot/get_qrcode_status"
)

const contentTypeJSON = "application/json"

// Client talks to the iLink bot API for one bot token (or none, for QR
// login). It is safe for concurrent use.
type Client struct {
	cfg           Config
	token         Secret
	http          *http.Client
	traced        bool // the transport reports httptrace events
	base          *url.URL
	cdn           *url.URL
	versionHeader string
	baseInfo      BaseInfo
	pollHint      atomic.Int64 // last server long-poll hint, nanoseconds
}

// New returns a client for cfg (defaults applied) authenticating with token.
// token may be empty for the QR login endpoints.
func New(cfg Config, token Secret) (*Client, error) {
	cfg = cfg.withDefaults()
	invalid := func(err error) error { return &Error{Code: CodeInvalidInput, Op: opNew, Err: err} }
	base, err := parseBase("base URL", cfg.BaseURL)
	if err != nil {
		return nil, invalid(err)
	}
	cdn, err := parseBase("CDN base URL", cfg.CDNBaseURL)
	if err != nil {
		return nil, invalid(err)
	}
	ver, err := ClientVersionNumber(cfg.ClientVersion)
	if err != nil {
		return nil, invalid(err)
	}
	if !validBotAgent(cfg.BotAgent) {
		return nil, invalid(errors.New("bot agent must be printable ASCII of at most 256 bytes"))
	}
	for _, v := range []string{cfg.AppID, cfg.RouteTag, token.Reveal()} {
		if !validHeaderValue(v) {
			return nil, invalid(errors.New("app id, route tag and token must not contain control characters"))
		}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{CheckRedirect: getRedirectsOnly}
		if tr, ok := http.DefaultTransport.(*http.Transport); ok {
			hc.Transport = tr.Clone()
		}
	}
	_, traced := hc.Transport.(*http.Transport)
	return &Client{
		cfg:           cfg,
		token:         token,
		http:          hc,
		traced:        traced || hc.Transport == nil,
		base:          base,
		cdn:           cdn,
		versionHeader: strconv.FormatUint(uint64(ver), 10),
		baseInfo:      BaseInfo{ChannelVersion: cfg.ClientVersion, BotAgent: cfg.BotAgent},
	}, nil
}

// NewSharedHTTPClient returns an HTTP client meant to be shared by the clients of many bots
// (Config.HTTPClient): one connection pool for every bot of a worker, keeping up to
// idlePerHost idle connections per iLink host so that a thousand long polls reuse their
// connections instead of opening new ones. It follows redirects like the default client.
func NewSharedHTTPClient(idlePerHost int) *http.Client {
	hc := &http.Client{CheckRedirect: getRedirectsOnly}
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		t := tr.Clone()
		t.MaxIdleConns = 0 // no overall bound: per host only
		t.MaxIdleConnsPerHost = idlePerHost
		hc.Transport = t
	}
	return hc
}

// getRedirectsOnly lets the default HTTP client follow redirects of GET
// requests (CDN downloads) but never turns a POST into another request.
func getRedirectsOnly(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 || via[0].Method != http.MethodGet {
		return http.ErrUseLastResponse
	}
	return nil
}

// Config returns the effective configuration (defaults applied).
func (c *Client) Config() Config { return c.cfg }

// BaseInfo returns the base_info sent on every authenticated POST.
func (c *Client) BaseInfo() BaseInfo { return c.baseInfo }

// endpoint joins an endpoint path below base.
func endpoint(base *url.URL, path string, query url.Values) string {
	u := *base
	u.Path = base.Path + path
	u.RawPath = ""
	u.RawQuery = query.Encode()
	return u.String()
}

// post marshals body and POSTs it to path with the bot headers. The
// returned body is at most Config.MaxBodyBytes long.
func (c *Client) post(ctx context.Context, op, path string, timeout time.Duration, body any) (*response, error) {
	return c.postBy(ctx, op, path, timeout, time.Time{}, body)
}

// postBy is post with a send-by instant (zero: none): a request not completely written
// by then is never sent.
func (c *Client) postBy(ctx context.Context, op, path string, timeout time.Duration, sendBy time.Time, body any) (*response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, &Error{Code: CodeInvalidInput, Op: op, Err: fmt.Errorf("encode request: %w", err)}
	}
	return c.do(ctx, request{
		op: op, method: http.MethodPost, url: endpoint(c.base, path, nil), body: data,
		ctype: contentTypeJSON, json: true, auth: true, ilink: true,
		timeout: timeout, limit: c.cfg.MaxBodyBytes, sendBy: sendBy,
	})
}

// GetConfig calls getconfig for a user and returns the typing ticket.
// contextToken is optional.
func (c *Client) GetConfig(ctx context.Context, userID string, contextToken Secret) (*BotConfig, error) {
	if userID == "" {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetConfig, Err: errors.New("user id is empty")}
	}
	resp, err := c.post(ctx, opGetConfig, pathGetConfig, c.cfg.ControlTimeout,
		getConfigRequest{ILinkUserID: userID, ContextToken: contextToken, BaseInfo: c.baseInfo})
	if err != nil {
		return nil, err
	}
	return parseConfig(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
}

// SendTyping shows (TypingStart) or cancels (TypingStop) the typing
// indicator for a user, with a ticket from GetConfig.
func (c *Client) SendTyping(ctx context.Context, userID string, ticket Secret, status TypingStatus) error {
	if userID == "" {
		return &Error{Code: CodeInvalidInput, Op: opSendTyping, Err: errors.New("user id is empty")}
	}
	return c.postPlain(ctx, opSendTyping, pathSendTyping,
		sendTypingRequest{ILinkUserID: userID, TypingTicket: ticket, Status: status, BaseInfo: c.baseInfo})
}

// NotifyStart tells the server the bot is online (msg/notifystart). Call it
// before the poll loop starts.
func (c *Client) NotifyStart(ctx context.Context) error {
	return c.postPlain(ctx, opNotifyStart, pathNotifyStart, baseOnlyRequest{BaseInfo: c.baseInfo})
}

// NotifyStop tells the server the bot goes offline (msg/notifystop).
func (c *Client) NotifyStop(ctx context.Context) error {
	return c.postPlain(ctx, opNotifyStop, pathNotifyStop, baseOnlyRequest{BaseInfo: c.baseInfo})
}

// postPlain posts a control request whose answer is only an envelope.
func (c *Client) postPlain(ctx context.Context, op, path string, body any) error {
	resp, err := c.post(ctx, op, path, c.cfg.ControlTimeout, body)
	if err != nil {
		return err
	}
	return parsePlain(op, bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
}
