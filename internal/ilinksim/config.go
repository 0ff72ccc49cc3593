// Package ilinksim is a local simulator of the WeChat iLink bot HTTP API
// (ilink/bot/... endpoints, the c2c CDN and the QR login flow), with a
// control API under /_sim/ for tests and demos.
//
// The simulator keeps all of its state in memory. Its notion of "now" (the
// sim clock) starts at the real time when the Server is created and only
// moves forward through the control API (POST /_sim/clock/advance), so every
// time-based rule (reply window, throttle penalty, QR expiry) can be tested
// without sleeping. With Config.RealTime the sim clock follows the real clock
// instead (plus whatever was advanced), for demos where limits must refill as
// they do on iLink. Long-poll holds use real timers (Config.LongPollHold).
package ilinksim

import (
	"fmt"
	"log/slog"
	"time"
)

// Context-token check modes for Config.ContextTokenMode.
const (
	// TokenIgnore accepts any context_token, including none.
	TokenIgnore = "ignore"
	// TokenPresent requires a context_token that this simulator issued to the
	// same (bot, peer) at some point.
	TokenPresent = "present"
	// TokenLatest requires the latest context_token issued to the (bot, peer).
	TokenLatest = "latest"
)

// Success body styles for Config.SendSuccessStyle.
const (
	// SendSuccessMessageID answers {"ret":0,"message_id":N}.
	SendSuccessMessageID = "message_id"
	// SendSuccessRet0 answers {"ret":0}.
	SendSuccessRet0 = "ret0"
	// SendSuccessEmpty answers {}.
	SendSuccessEmpty = "empty"
)

// Stale-token body styles for Config.StaleTokenStyle.
const (
	// StaleErrcode answers {"errcode":-14,"errmsg":"session timeout"}.
	StaleErrcode = "errcode"
	// StaleRet answers {"ret":-14,"errmsg":"session timeout"}.
	StaleRet = "ret"
	// StaleBoth answers {"ret":-14,"errcode":-14,"errmsg":"session timeout"}.
	StaleBoth = "both"
)

// getuploadurl response styles for Config.UploadURLStyle.
const (
	// UploadFull returns only upload_full_url.
	UploadFull = "full"
	// UploadParam returns only upload_param (the older form).
	UploadParam = "param"
	// UploadBoth returns upload_full_url and upload_param.
	UploadBoth = "both"
)

// Config holds every limit and behaviour knob of the simulator. Durations
// marked "sim" are measured on the sim clock; the others are real time.
// Use DefaultConfig and change what a test needs.
type Config struct {
	// RealTime makes the sim clock follow the real clock (Advance still adds to it), so a
	// burst limit refills and a penalty ends by itself as on iLink (default false: the clock
	// moves only through Advance). A delayed duplicate becomes visible at the first poll
	// after its delay, not by waking a held poll.
	RealTime bool
	// ReplyQuota is the number of accepted sends per (bot, peer) allowed
	// after each inbound message from that peer (default 10; 0 = unlimited).
	ReplyQuota int
	// ReplyWindow (sim) is how long after the peer's last inbound message the
	// bot may still send (default 24h; 0 = unlimited).
	ReplyWindow time.Duration
	// IdleStaleAfter (sim): a send to a peer whose last inbound message is at
	// least this old answers errcode -14 (default 66h; 0 = never).
	IdleStaleAfter time.Duration
	// ContextTokenMode is one of TokenIgnore, TokenPresent (default), TokenLatest.
	ContextTokenMode string

	// ThrottleBurst is the number of send attempts per bot within
	// ThrottleInterval that starts a penalty (default 3; 0 = no throttle).
	ThrottleBurst int
	// ThrottleInterval (sim) is the sliding window of the burst detector (default 2s).
	ThrottleInterval time.Duration
	// ThrottlePenalty (sim) is how long every send is refused with
	// {"ret":-2,"errmsg":"prepare failed"} once the burst detector fires (default 1h).
	ThrottlePenalty time.Duration
	// ThrottleExtendOnAttempt restarts the penalty on every send attempt made
	// during it (default false).
	ThrottleExtendOnAttempt bool

	// MaxTextBytes is the largest text_item.text in UTF-8 bytes (default 16384).
	MaxTextBytes int

	// LongPollHold (real time) is how long getupdates is held when nothing is
	// queued (default 35s). Tests set it short.
	LongPollHold time.Duration
	// LongPollTimeoutMS is the longpolling_timeout_ms value returned by
	// getupdates; 0 means LongPollHold in milliseconds (default 0).
	LongPollTimeoutMS int
	// MaxBatch is the most messages one getupdates returns (default 100).
	MaxBatch int
	// ReplayOnEmptyCursor is how many already delivered messages an empty
	// get_updates_buf brings back again (default 0).
	ReplayOnEmptyCursor int
	// ReplayMaxAge (sim) limits that replay to messages this recent (default 24h).
	ReplayMaxAge time.Duration

	// QRTTL (sim) is how long a QR code lives before "expired" (default 120s).
	QRTTL time.Duration
	// QRPollHold (real time) holds get_qrcode_status until the status changes
	// or this elapses (default 0: answer at once).
	QRPollHold time.Duration
	// VerifyMaxWrong is the wrong verify_code count that answers
	// verify_code_blocked (default 3: the 1st and 2nd wrong codes answer
	// need_verifycode, the 3rd verify_code_blocked).
	VerifyMaxWrong int
	// RedirectHost is the redirect_host of scaned_but_redirect when the
	// control call does not name one; "" means the Host of the polling request.
	RedirectHost string
	// QRImageBase prefixes qrcode_img_content (default "https://liteapp.weixin.qq.com/q/").
	QRImageBase string

	// SendSuccessStyle is SendSuccessMessageID (default), SendSuccessRet0 or SendSuccessEmpty.
	SendSuccessStyle string
	// StaleTokenStyle is StaleErrcode (default), StaleRet or StaleBoth.
	StaleTokenStyle string
	// UploadURLStyle is UploadBoth (default), UploadFull or UploadParam.
	UploadURLStyle string
	// NumericItemIDs writes item msg_id and ref_msg.svr_id as JSON numbers
	// instead of decimal strings (the protocol doc's types are strings; default false).
	NumericItemIDs bool
	// MessageIDBase is the first server message_id issued (default
	// 7000000000000000000, above 2^53). Set near 2^64 to test lossless parsing.
	MessageIDBase uint64

	// MaxBodyBytes caps JSON request bodies; larger ones get HTTP 413 (default 1 MiB).
	MaxBodyBytes int64
	// MaxUploadBytes caps CDN uploads; larger ones get HTTP 413 (default 100 MiB).
	MaxUploadBytes int64
	// CDNStrict checks on upload that the body size equals getuploadurl's
	// filesize and that it decrypts (with the announced aeskey) to rawsize
	// bytes with rawfilemd5 (default true).
	CDNStrict bool

	// StrictClient rejects requests that miss the headers or base_info the
	// official plugin sends, with HTTP 200 {"ret":-2,"errmsg":"strict client: ..."}
	// (default false; problems are always recorded on the request).
	StrictClient bool
	// RequireNotifyStart marks accepted sends as not rendered, except the
	// first per connection, while the bot has not called msg/notifystart (default false).
	RequireNotifyStart bool

	// BaseURL is the baseurl handed out at QR confirmation and by the control
	// API; "" means http://<Host of the request>.
	BaseURL string
	// CDNBaseURL is the CDN base used in upload_full_url and full_url; ""
	// means http://<Host of the request>/c2c.
	CDNBaseURL string
	// MaxRecordedRequests bounds the request log (default 10000, oldest dropped).
	MaxRecordedRequests int

	// Logger receives one debug line per request; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the configuration with the defaults documented on
// each Config field (iLink's behaviour as observed; docs/simulator.md#configuration).
func DefaultConfig() Config {
	return Config{
		ReplyQuota:          10,
		ReplyWindow:         24 * time.Hour,
		IdleStaleAfter:      66 * time.Hour,
		ContextTokenMode:    TokenPresent,
		ThrottleBurst:       3,
		ThrottleInterval:    2 * time.Second,
		ThrottlePenalty:     time.Hour,
		MaxTextBytes:        16384,
		LongPollHold:        35 * time.Second,
		MaxBatch:            100,
		ReplayMaxAge:        24 * time.Hour,
		QRTTL:               120 * time.Second,
		VerifyMaxWrong:      3,
		QRImageBase:         "https://liteapp.weixin.qq.com/q/",
		SendSuccessStyle:    SendSuccessMessageID,
		StaleTokenStyle:     StaleErrcode,
		UploadURLStyle:      UploadBoth,
		MessageIDBase:       7000000000000000000,
		MaxBodyBytes:        1 << 20,
		MaxUploadBytes:      100 << 20,
		CDNStrict:           true,
		MaxRecordedRequests: 10000,
	}
}

// Validate reports the first invalid setting, wrapped in ErrConfig.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch c.ContextTokenMode {
	case TokenIgnore, TokenPresent, TokenLatest:
	default:
		return bad("context token mode %q", c.ContextTokenMode)
	}
	switch c.SendSuccessStyle {
	case SendSuccessMessageID, SendSuccessRet0, SendSuccessEmpty:
	default:
		return bad("send success style %q", c.SendSuccessStyle)
	}
	switch c.StaleTokenStyle {
	case StaleErrcode, StaleRet, StaleBoth:
	default:
		return bad("stale token style %q", c.StaleTokenStyle)
	}
	switch c.UploadURLStyle {
	case UploadFull, UploadParam, UploadBoth:
	default:
		return bad("upload url style %q", c.UploadURLStyle)
	}
	for name, v := range map[string]int{
		"reply quota": c.ReplyQuota, "throttle burst": c.ThrottleBurst, "max text bytes": c.MaxTextBytes,
		"long-poll timeout ms": c.LongPollTimeoutMS, "max batch": c.MaxBatch,
		"replay on empty cursor": c.ReplayOnEmptyCursor, "verify max wrong": c.VerifyMaxWrong,
		"max recorded requests": c.MaxRecordedRequests,
	} {
		if v < 0 {
			return bad("%s must not be negative (%d)", name, v)
		}
	}
	for name, v := range map[string]time.Duration{
		"reply window": c.ReplyWindow, "idle stale after": c.IdleStaleAfter, "throttle interval": c.ThrottleInterval,
		"throttle penalty": c.ThrottlePenalty, "long-poll hold": c.LongPollHold, "replay max age": c.ReplayMaxAge,
		"qr ttl": c.QRTTL, "qr poll hold": c.QRPollHold,
	} {
		if v < 0 {
			return bad("%s must not be negative (%s)", name, v)
		}
	}
	if c.MaxBodyBytes <= 0 || c.MaxUploadBytes <= 0 {
		return bad("body limits must be positive")
	}
	return nil
}
