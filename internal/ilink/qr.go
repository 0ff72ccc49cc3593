package ilink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// QRCode is a get_bot_qrcode answer.
type QRCode struct {
	// QRCode is the opaque key to poll get_qrcode_status with.
	QRCode string
	// ImageContent is a URL to render as a QR code (not image bytes).
	ImageContent string
}

// QRStatus is get_qrcode_status's status.
type QRStatus string

// QR login statuses (the spelling "scaned" is the server's).
const (
	// QRWait: not scanned yet; keep polling. Also reported when a poll hit
	// the client's own timeout.
	QRWait QRStatus = "wait"
	// QRScanned: scanned, waiting for confirmation on the phone; also the
	// answer to a correct verify code.
	QRScanned QRStatus = "scaned"
	// QRNeedVerifyCode: the operator must type the number shown on the
	// phone; poll again with VerifyCode. Seeing it again means a wrong code.
	QRNeedVerifyCode QRStatus = "need_verifycode"
	// QRVerifyCodeBlocked: too many wrong codes; fetch a new QR code.
	QRVerifyCodeBlocked QRStatus = "verify_code_blocked"
	// QRExpired: the QR code expired; fetch a new one.
	QRExpired QRStatus = "expired"
	// QRScannedRedirect: poll again at RedirectHost.
	QRScannedRedirect QRStatus = "scaned_but_redirect"
	// QRBindedRedirect: the scanner's bot is already bound to this install
	// (matched through local_token_list); keep the existing credentials.
	QRBindedRedirect QRStatus = "binded_redirect"
	// QRConfirmed: login complete; BotToken, ILinkBotID, BaseURL and
	// ILinkUserID are set.
	QRConfirmed QRStatus = "confirmed"
)

// QRCodeStatus is a get_qrcode_status answer with every field it returns.
type QRCodeStatus struct {
	// Status is the login state.
	Status QRStatus
	// RedirectHost is the host (no scheme) to poll next after
	// scaned_but_redirect.
	RedirectHost string
	// BotToken is the new bearer token (confirmed).
	BotToken Secret
	// ILinkBotID is the new bot account id (confirmed); new on every binding.
	ILinkBotID string
	// BaseURL is the API base to use from now on (confirmed); may be empty.
	BaseURL string
	// ILinkUserID is the WeChat user who confirmed: the bot's owner, not the
	// bot itself.
	ILinkUserID string
	// TimedOut is true when the client's own deadline passed before an
	// answer; Status is then QRWait, as in the official plugin.
	TimedOut bool
}

// GetBotQRCode starts a QR login: POST get_bot_qrcode?bot_type=3 with
// local_token_list (the newest locally stored bot tokens, newest first; at
// most 10 are sent). No Authorization and no base_info are sent.
func (c *Client) GetBotQRCode(ctx context.Context, localTokens []Secret) (*QRCode, error) {
	if len(localTokens) > maxLocalTokens {
		localTokens = localTokens[:maxLocalTokens]
	}
	list := make([]Secret, 0, len(localTokens))
	list = append(list, localTokens...)
	data, err := json.Marshal(getBotQRCodeRequest{LocalTokenList: list})
	if err != nil {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetBotQRCode, Err: fmt.Errorf("encode request: %w", err)}
	}
	resp, err := c.do(ctx, request{
		op: opGetBotQRCode, method: http.MethodPost,
		url:  endpoint(c.base, pathGetBotQRCode, url.Values{"bot_type": {BotType}}),
		body: data, ctype: contentTypeJSON, json: true, ilink: true,
		timeout: c.cfg.QRCodeTimeout, limit: c.cfg.MaxBodyBytes,
	})
	if err != nil {
		return nil, err
	}
	return parseBotQRCode(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
}

// QRStatusRequest is the input of GetQRCodeStatus.
type QRStatusRequest struct {
	// QRCode is the poll key from GetBotQRCode.
	QRCode string
	// VerifyCode is the number the operator typed after need_verifycode.
	VerifyCode string
	// Host selects where to poll: "" for the client's base URL, a bare host
	// such as a redirect_host (Config.RedirectScheme is put in front), or an
	// absolute http(s) base URL.
	Host string
}

// GetQRCodeStatus polls the login state once (GET get_qrcode_status). When
// the client's own deadline (Config.QRStatusTimeout) passes before an answer
// it returns Status QRWait with TimedOut set instead of an error.
func (c *Client) GetQRCodeStatus(ctx context.Context, r QRStatusRequest) (*QRCodeStatus, error) {
	if r.QRCode == "" {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetQRCodeStatus, Err: errors.New("qrcode is empty")}
	}
	base, err := c.pollBase(r.Host)
	if err != nil {
		return nil, err
	}
	q := url.Values{"qrcode": {r.QRCode}}
	if r.VerifyCode != "" {
		q.Set("verify_code", r.VerifyCode)
	}
	resp, err := c.do(ctx, request{
		op: opGetQRCodeStatus, method: http.MethodGet, url: endpoint(base, pathGetQRCodeStatus, q),
		ilink: true, timeout: c.cfg.QRStatusTimeout, limit: c.cfg.MaxBodyBytes,
	})
	if err != nil {
		var e *Error
		if isClientTimeout(err) && ctx.Err() == nil && errors.As(err, &e) && e.Status == 0 {
			return &QRCodeStatus{Status: QRWait, TimedOut: true}, nil
		}
		return nil, err
	}
	return parseQRStatus(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
}

// pollBase resolves QRStatusRequest.Host.
func (c *Client) pollBase(host string) (*url.URL, error) {
	if host == "" {
		return c.base, nil
	}
	raw := host
	if !strings.Contains(host, "://") {
		if strings.ContainsAny(host, "/?#@ ") {
			return nil, &Error{Code: CodeInvalidInput, Op: opGetQRCodeStatus, Err: errors.New("redirect host is not a host name")}
		}
		raw = c.cfg.RedirectScheme + "://" + host
	}
	u, err := parseBase("poll host", raw)
	if err != nil {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetQRCodeStatus, Err: err}
	}
	return u, nil
}
