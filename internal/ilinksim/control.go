package ilinksim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ControlError is returned by Control when the control API answered with a
// non-2xx status.
type ControlError struct {
	// Op is the Control method that failed.
	Op string
	// StatusCode is the HTTP status of the control API answer.
	StatusCode int
	// Message is the control API's error text.
	Message string
}

// Error implements error.
func (e *ControlError) Error() string {
	return fmt.Sprintf("ilinksim control %s: HTTP %d: %s", e.Op, e.StatusCode, e.Message)
}

// ErrControlNotFound matches (errors.Is) a ControlError with status 404.
var ErrControlNotFound = errors.New("ilinksim control: not found")

// Is lets errors.Is(err, ErrControlNotFound) match 404 answers.
func (e *ControlError) Is(target error) bool {
	return target == ErrControlNotFound && e.StatusCode == http.StatusNotFound
}

// Control is a Go client for the simulator's control API (/_sim/...).
// It is safe for concurrent use.
type Control struct {
	base string
	hc   *http.Client
}

// NewControl returns a Control for the simulator at baseURL (for example
// "http://127.0.0.1:8089" or an httptest.Server URL). A nil hc means
// http.DefaultClient.
func NewControl(baseURL string, hc *http.Client) *Control {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Control{base: strings.TrimRight(baseURL, "/"), hc: hc}
}

// do sends one control request; in and out may be nil.
func (c *Control) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("ilinksim control %s: encode request: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("ilinksim control %s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("ilinksim control %s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("ilinksim control %s: read response: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &ControlError{Op: op, StatusCode: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("ilinksim control %s: decode response: %w", op, err)
	}
	return nil
}

func botPath(botID, suffix string) string {
	return "/_sim/bots/" + url.PathEscape(botID) + suffix
}

// CreateBot creates a bound bot directly, without a QR login.
func (c *Control) CreateBot(ctx context.Context, req CreateBotRequest) (BotInfo, error) {
	var out BotInfo
	err := c.do(ctx, "CreateBot", http.MethodPost, "/_sim/bots", req, &out)
	return out, err
}

// Bots lists every bot, live or dead.
func (c *Control) Bots(ctx context.Context) ([]BotInfo, error) {
	var out []BotInfo
	err := c.do(ctx, "Bots", http.MethodGet, "/_sim/bots", nil, &out)
	return out, err
}

// BotState returns a bot with its per-peer bookkeeping.
func (c *Control) BotState(ctx context.Context, botID string) (BotState, error) {
	var out BotState
	err := c.do(ctx, "BotState", http.MethodGet, botPath(botID, ""), nil, &out)
	return out, err
}

// KillBot makes the bot's token answer errcode -14 from now on.
func (c *Control) KillBot(ctx context.Context, botID string) error {
	return c.do(ctx, "KillBot", http.MethodPost, botPath(botID, "/kill"), struct{}{}, nil)
}

// Inject queues an inbound user message for the bot.
func (c *Control) Inject(ctx context.Context, botID string, req InjectRequest) (Injected, error) {
	var out Injected
	err := c.do(ctx, "Inject", http.MethodPost, botPath(botID, "/messages"), req, &out)
	return out, err
}

// InjectText queues an inbound text message from user ("" = the bot's owner).
func (c *Control) InjectText(ctx context.Context, botID, from, text string) (Injected, error) {
	return c.Inject(ctx, botID, InjectRequest{From: from, Kind: KindText, Text: text})
}

// Duplicate re-queues an earlier inbound message, identified by message_id.
func (c *Control) Duplicate(ctx context.Context, botID string, req DuplicateRequest) (Injected, error) {
	var out Injected
	err := c.do(ctx, "Duplicate", http.MethodPost, botPath(botID, "/duplicates"), req, &out)
	return out, err
}

// Sent lists the sendmessage calls of one bot ("" = all bots) with their outcomes.
func (c *Control) Sent(ctx context.Context, botID string) ([]SentMessage, error) {
	var out []SentMessage
	path := "/_sim/sent"
	if botID != "" {
		path = botPath(botID, "/sent")
	}
	err := c.do(ctx, "Sent", http.MethodGet, path, nil, &out)
	return out, err
}

// SentAfter lists the sendmessage calls of one bot ("" = all bots) whose Index is greater
// than after: pass the last Index seen to read only what is new.
func (c *Control) SentAfter(ctx context.Context, botID string, after int) ([]SentMessage, error) {
	var out []SentMessage
	path := "/_sim/sent"
	if botID != "" {
		path = botPath(botID, "/sent")
	}
	err := c.do(ctx, "SentAfter", http.MethodGet, path+"?after="+strconv.Itoa(after), nil, &out)
	return out, err
}

// Stats returns a summary of the simulator's state: bots, held getupdates calls, queued
// messages, the length of the send log.
func (c *Control) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.do(ctx, "Stats", http.MethodGet, "/_sim/stats", nil, &out)
	return out, err
}

// Now returns the sim clock.
func (c *Control) Now(ctx context.Context) (time.Time, error) {
	var out ClockInfo
	err := c.do(ctx, "Now", http.MethodGet, "/_sim/clock", nil, &out)
	return out.Now, err
}

// Advance moves the sim clock forward by d and returns the new time.
func (c *Control) Advance(ctx context.Context, d time.Duration) (time.Time, error) {
	var out ClockInfo
	err := c.do(ctx, "Advance", http.MethodPost, "/_sim/clock/advance", AdvanceRequest{By: Duration(d)}, &out)
	return out.Now, err
}

// QRSessions lists the QR login sessions, newest last.
func (c *Control) QRSessions(ctx context.Context) ([]QRInfo, error) {
	var out []QRInfo
	err := c.do(ctx, "QRSessions", http.MethodGet, "/_sim/qr", nil, &out)
	return out, err
}

func (c *Control) qr(ctx context.Context, op, action string, a QRAction) (QRInfo, error) {
	var out QRInfo
	err := c.do(ctx, op, http.MethodPost, "/_sim/qr/"+action, a, &out)
	return out, err
}

// ScanQR marks the QR code as scanned by userID ("" = a new user).
func (c *Control) ScanQR(ctx context.Context, qrcode, userID string) (QRInfo, error) {
	return c.qr(ctx, "ScanQR", "scan", QRAction{QRCode: qrcode, UserID: userID})
}

// RequireVerifyCode makes the next polls answer need_verifycode until code
// ("" = a generated one, returned in QRInfo.VerifyCode) is sent.
func (c *Control) RequireVerifyCode(ctx context.Context, qrcode, code string) (QRInfo, error) {
	return c.qr(ctx, "RequireVerifyCode", "verify", QRAction{QRCode: qrcode, Code: code})
}

// RedirectQR makes the next poll answer scaned_but_redirect with host ("" = configured default).
func (c *Control) RedirectQR(ctx context.Context, qrcode, host string) (QRInfo, error) {
	return c.qr(ctx, "RedirectQR", "redirect", QRAction{QRCode: qrcode, Host: host})
}

// ConfirmQR confirms the login on the phone: a new bot (or binded_redirect).
func (c *Control) ConfirmQR(ctx context.Context, qrcode string) (QRInfo, error) {
	return c.qr(ctx, "ConfirmQR", "confirm", QRAction{QRCode: qrcode})
}

// ExpireQR expires the QR code now.
func (c *Control) ExpireQR(ctx context.Context, qrcode string) (QRInfo, error) {
	return c.qr(ctx, "ExpireQR", "expire", QRAction{QRCode: qrcode})
}

// AddFault arms a fault for the next f.Count requests to f.Endpoint.
func (c *Control) AddFault(ctx context.Context, f Fault) error {
	return c.do(ctx, "AddFault", http.MethodPost, "/_sim/faults", f, nil)
}

// Faults lists the armed faults with their remaining counts.
func (c *Control) Faults(ctx context.Context) ([]Fault, error) {
	var out []Fault
	err := c.do(ctx, "Faults", http.MethodGet, "/_sim/faults", nil, &out)
	return out, err
}

// ClearFaults disarms every fault.
func (c *Control) ClearFaults(ctx context.Context) error {
	return c.do(ctx, "ClearFaults", http.MethodDelete, "/_sim/faults", nil, nil)
}

// Requests returns the recorded requests (oldest first).
func (c *Control) Requests(ctx context.Context) ([]RecordedRequest, error) {
	var out []RecordedRequest
	err := c.do(ctx, "Requests", http.MethodGet, "/_sim/requests", nil, &out)
	return out, err
}

// ClearRequests empties the request log.
func (c *Control) ClearRequests(ctx context.Context) error {
	return c.do(ctx, "ClearRequests", http.MethodDelete, "/_sim/requests", nil, nil)
}

// ExpireCDNObject removes a CDN object, as the real CDN forgets media: later downloads
// of it answer 404.
func (c *Control) ExpireCDNObject(ctx context.Context, encryptQueryParam string) error {
	return c.do(ctx, "ExpireCDNObject", http.MethodDelete, "/_sim/cdn?encrypted_query_param="+url.QueryEscape(encryptQueryParam), nil, nil)
}

// CDNObject reads a CDN object by its encrypt_query_param (x-encrypted-param).
func (c *Control) CDNObject(ctx context.Context, encryptQueryParam string) (CDNObject, error) {
	var out CDNObject
	err := c.do(ctx, "CDNObject", http.MethodGet, "/_sim/cdn?encrypted_query_param="+url.QueryEscape(encryptQueryParam), nil, &out)
	return out, err
}
