package ilink

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults used by [Config] when a field is left at its zero value.
const (
	DefaultBaseURL           = "https://ilinkai.weixin.qq.com"
	DefaultCDNBaseURL        = "https://novac2c.cdn.weixin.qq.com/c2c"
	DefaultAppID             = "bot"
	DefaultClientVersion     = "2.4.9"
	DefaultBotAgent          = "ilinkflow/0.1"
	DefaultMaxBodyBytes      = 8 << 20
	DefaultMaxMediaBytes     = 100 << 20
	DefaultPollTimeout       = 35 * time.Second
	DefaultPollMargin        = 5 * time.Second
	DefaultMaxPollTimeout    = 2 * time.Minute
	DefaultSendTimeout       = 15 * time.Second
	DefaultControlTimeout    = 10 * time.Second
	DefaultQRStatusTimeout   = 35 * time.Second
	DefaultCDNTimeout        = 120 * time.Second
	DefaultCDNUploadAttempts = 3
	DefaultCDNRetryDelay     = time.Second
	DefaultRedirectScheme    = "https"
	DefaultClientIDPrefix    = "ilinkflow"
	// BotType is the bot_type query value of get_bot_qrcode for this channel.
	BotType = "3"
	// maxBotAgentBytes is the documented limit of base_info.bot_agent.
	maxBotAgentBytes = 256
	// maxLocalTokens is how many tokens get_bot_qrcode's local_token_list carries.
	maxLocalTokens = 10
)

// Config configures a [Client]. Every zero field takes the default named
// after it (DefaultXxx). For the call timeouts (SendTimeout, ControlTimeout,
// QRCodeTimeout, QRStatusTimeout, CDNTimeout) a negative value means "no
// client timeout" (the context alone bounds the call); a negative PollMargin
// or CDNRetryDelay means zero.
type Config struct {
	// BaseURL is the API base: the baseurl returned at QR confirmation, or
	// DefaultBaseURL.
	BaseURL string
	// CDNBaseURL is the media CDN base, used when the server gives no full URL.
	CDNBaseURL string
	// AppID is sent as iLink-App-Id.
	AppID string
	// ClientVersion is a semver "MAJOR.MINOR.PATCH" (each part 0..255). It is
	// sent as base_info.channel_version and, packed as 0x00MMNNPP in decimal,
	// as iLink-App-ClientVersion.
	ClientVersion string
	// BotAgent is base_info.bot_agent: printable ASCII, at most 256 bytes.
	BotAgent string
	// RouteTag, when set, is sent as the SKRouteTag header.
	RouteTag string
	// HTTPClient performs the requests. Nil means a client with its own clone
	// of http.DefaultTransport that follows redirects of GET requests only.
	// Leave its Timeout at zero: the client bounds each call with a context
	// deadline. Its Transport should be an *http.Transport: the "not sent"
	// versus "outcome unknown" classification relies on its httptrace events,
	// and with any other transport every transport failure counts as
	// outcome unknown.
	HTTPClient *http.Client
	// MaxBodyBytes caps every API response body.
	MaxBodyBytes int64
	// MaxMediaBytes caps a CDN download and an upload's plaintext.
	MaxMediaBytes int64
	// PollTimeout is the first long-poll duration of getupdates, before the
	// server suggests one with longpolling_timeout_ms.
	PollTimeout time.Duration
	// PollMargin is added to the long-poll duration to get the HTTP timeout.
	PollMargin time.Duration
	// MaxPollTimeout caps the long-poll duration the server may suggest.
	MaxPollTimeout time.Duration
	// SendTimeout bounds sendmessage and getuploadurl.
	SendTimeout time.Duration
	// ControlTimeout bounds getconfig, sendtyping, notifystart and notifystop.
	ControlTimeout time.Duration
	// QRCodeTimeout bounds get_bot_qrcode. Zero means no client timeout, as
	// in the official plugin.
	QRCodeTimeout time.Duration
	// QRStatusTimeout bounds one get_qrcode_status long poll.
	QRStatusTimeout time.Duration
	// CDNTimeout bounds one CDN upload or download attempt.
	CDNTimeout time.Duration
	// CDNUploadAttempts is how many times an upload is tried on 5xx or
	// transport errors.
	CDNUploadAttempts int
	// CDNRetryDelay is the pause between upload attempts.
	CDNRetryDelay time.Duration
	// RedirectScheme is put in front of a bare redirect_host ("https").
	RedirectScheme string
	// ClientIDPrefix starts generated client_id values: "<prefix>:<ms>-<8 hex>".
	ClientIDPrefix string
}

// withDefaults returns a copy with defaults filled in.
func (c Config) withDefaults() Config {
	str := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	dur := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	str(&c.BaseURL, DefaultBaseURL)
	str(&c.CDNBaseURL, DefaultCDNBaseURL)
	str(&c.AppID, DefaultAppID)
	str(&c.ClientVersion, DefaultClientVersion)
	str(&c.BotAgent, DefaultBotAgent)
	str(&c.RedirectScheme, DefaultRedirectScheme)
	str(&c.ClientIDPrefix, DefaultClientIDPrefix)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxMediaBytes <= 0 {
		c.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if c.CDNUploadAttempts <= 0 {
		c.CDNUploadAttempts = DefaultCDNUploadAttempts
	}
	dur(&c.PollTimeout, DefaultPollTimeout)
	dur(&c.PollMargin, DefaultPollMargin)
	dur(&c.MaxPollTimeout, DefaultMaxPollTimeout)
	dur(&c.SendTimeout, DefaultSendTimeout)
	dur(&c.ControlTimeout, DefaultControlTimeout)
	dur(&c.QRStatusTimeout, DefaultQRStatusTimeout)
	dur(&c.CDNTimeout, DefaultCDNTimeout)
	dur(&c.CDNRetryDelay, DefaultCDNRetryDelay)
	if c.PollTimeout < 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	if c.PollMargin < 0 {
		c.PollMargin = 0
	}
	if c.MaxPollTimeout < 0 {
		c.MaxPollTimeout = DefaultMaxPollTimeout
	}
	if c.CDNRetryDelay < 0 {
		c.CDNRetryDelay = 0
	}
	return c
}

// ClientVersionNumber packs a semver "MAJOR.MINOR.PATCH" into the uint32
// 0x00MMNNPP sent in iLink-App-ClientVersion: 2.4.9 → 132105. A pre-release
// or build suffix ("2.4.9-beta.0") is ignored.
func ClientVersionNumber(semver string) (uint32, error) {
	core := semver
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return 0, fmt.Errorf("client version %q is not MAJOR.MINOR.PATCH", semver)
	}
	var v uint32
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || p == "" || (len(p) > 1 && p[0] == '0') {
			return 0, fmt.Errorf("client version %q: part %q is not a number in 0..255", semver, p)
		}
		v = v<<8 | uint32(n)
	}
	return v, nil
}

// validBotAgent reports whether s is printable ASCII within the size limit.
func validBotAgent(s string) bool {
	if len(s) > maxBotAgentBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// parseBase parses an http(s) base URL and makes sure its path ends in "/",
// so that endpoint paths join below it.
func parseBase(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want an absolute http(s) URL", name, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%s %q: must not carry user info, a query or a fragment", name, raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	return u, nil
}

// validHeaderValue rejects control characters that net/http would refuse.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 && s[i] != '\t' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
