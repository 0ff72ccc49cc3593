// Package webhook is what an agent that receives ilinkflow's webhook deliveries imports:
// the delivery's JSON shape, the optional answer, and the request signature (Sign,
// Verify). It depends on the standard library alone (no database driver, no Temporal).
//
// A receiver reads the raw body, checks it with
//
//	err := webhook.Verify(secret, r.Header.Get(webhook.HeaderTimestamp),
//		r.Header.Get(webhook.HeaderSignature), body, time.Now(), 0)
//
// then decodes a Delivery, replies with its session token through the reply API, and may
// answer 2xx with an Answer.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Webhook headers. The signature covers the timestamp header's value, a dot and the raw
// request body: hex(HMAC-SHA256(secret, timestamp + "." + body)), sent as "v1=<hex>".
const (
	// HeaderTimestamp carries the request's Unix time in seconds (decimal).
	HeaderTimestamp = "X-Ilinkflow-Timestamp"
	// HeaderSignature carries "v1=<hex>"; a receiver accepts any of several
	// comma-separated values (to rotate secrets).
	HeaderSignature = "X-Ilinkflow-Signature"
	// SignatureVersion prefixes the signature.
	SignatureVersion = "v1"
	// DefaultTolerance is the largest clock difference Verify accepts by default.
	DefaultTolerance = 5 * time.Minute
)

// Verification errors.
var (
	ErrMissingSignature = errors.New("webhook: missing timestamp or signature header")
	ErrBadTimestamp     = errors.New("webhook: timestamp is not Unix seconds")
	ErrStaleTimestamp   = errors.New("webhook: timestamp is outside the tolerance")
	ErrBadSignature     = errors.New("webhook: signature does not match")
)

// Sign returns the signature header value of a request body signed at ts (Unix seconds):
// "v1=" + hex(HMAC-SHA256(secret, strconv.FormatInt(ts, 10) + "." + body)).
func Sign(secret []byte, ts int64, body []byte) string {
	return SignatureVersion + "=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts, 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a webhook request: timestamp and signature are the values of the
// X-Ilinkflow-Timestamp and X-Ilinkflow-Signature headers, body the raw request body.
// It refuses a timestamp more than tolerance away from now (0: DefaultTolerance), so a
// captured request cannot be replayed later, and compares signatures in constant time.
// Receivers should also drop a delivery whose session_id they already processed.
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	if timestamp == "" || signature == "" {
		return ErrMissingSignature
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts <= 0 || strconv.FormatInt(ts, 10) != timestamp {
		return ErrBadTimestamp
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrStaleTimestamp
	}
	want := mac(secret, timestamp, body)
	ok := false
	for _, part := range strings.Split(signature, ",") {
		v, sig, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || v != SignatureVersion {
			continue
		}
		got, err := hex.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}

// Delivery is the JSON body the gateway's webhook hand-off POSTs.
type Delivery struct {
	Message Message `json:"message"`
	// SessionToken is the agent's bearer capability for the reply API
	// (Authorization: Bearer <token>); keep it secret.
	SessionToken string `json:"session_token"`
	SessionID    string `json:"session_id"`
	Window       Window `json:"window"`
}

// Message is the delivered message.
type Message struct {
	MessageKey  string       `json:"message_key"`
	AccountKey  string       `json:"account_key"`
	PeerID      string       `json:"peer_id"`
	SentAt      time.Time    `json:"sent_at"`
	Summary     string       `json:"summary"`
	Attachments []Attachment `json:"attachments"`
}

// Attachment is one attachment of the delivered message: its descriptor and, when
// it has media to download, the reply API path that fetches it with the session token
// (GET <gateway><fetch_path>, Authorization: Bearer <session_token>).
type Attachment struct {
	// Kind is image, file, voice or video.
	Kind string `json:"kind"`
	// Position is the attachment's position among the message's media (images 0..3,
	// other media from 500).
	Position int `json:"position,omitempty"`
	// Name is a file's name as the gateway shows it: no path parts, no control or bidi
	// characters, bounded (the stored name is as the user's client sent it).
	Name string `json:"name,omitempty"`
	// Size is the plaintext size in bytes, when known.
	Size int64 `json:"size,omitempty"`
	// Text is a voice message's transcript.
	Text      string `json:"text,omitempty"`
	FetchPath string `json:"fetch_path,omitempty"`
}

// Window is the reply window of the message.
type Window struct {
	ReplyWindowID int64     `json:"reply_window_id"`
	ExpiresAt     time.Time `json:"expires_at"`
	SendsLeft     int32     `json:"sends_left"`
}

// Answer is the optional JSON body of a 2xx answer: replies to send at once, in
// order, and whether the message is handled once they are sent.
type Answer struct {
	Replies []string `json:"replies"`
	Handled bool     `json:"handled"`
}
