package handoff

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/vocab"
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

// Limits of a webhook answer.
const (
	maxAnswerBytes = 256 << 10
	maxReplies     = 100
	maxSnippet     = 200
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

// WebhookDelivery is the JSON body the webhook handler POSTs.
type WebhookDelivery struct {
	Message WebhookMessage `json:"message"`
	// SessionToken is the agent's bearer capability for the reply API
	// (Authorization: Bearer <token>); keep it secret.
	SessionToken string        `json:"session_token"`
	SessionID    string        `json:"session_id"`
	Window       WebhookWindow `json:"window"`
}

// WebhookMessage is the delivered message.
type WebhookMessage struct {
	MessageKey  string              `json:"message_key"`
	AccountKey  string              `json:"account_key"`
	PeerID      string              `json:"peer_id"`
	SentAt      time.Time           `json:"sent_at"`
	Summary     string              `json:"summary"`
	Attachments []WebhookAttachment `json:"attachments"`
}

// WebhookAttachment is one attachment of the delivered message: its descriptor and, when
// it has media to download, the reply API path that fetches it with the session token
// (GET <gateway><fetch_path>, Authorization: Bearer <session_token>).
type WebhookAttachment struct {
	store.Attachment
	FetchPath string `json:"fetch_path,omitempty"`
}

// WebhookWindow is the reply window of the message.
type WebhookWindow struct {
	ReplyWindowID int64     `json:"reply_window_id"`
	ExpiresAt     time.Time `json:"expires_at"`
	SendsLeft     int32     `json:"sends_left"`
}

// WebhookAnswer is the optional JSON body of a 2xx answer: replies to send at once, in
// order, and whether the message is handled once they are sent.
type WebhookAnswer struct {
	Replies []string `json:"replies"`
	Handled bool     `json:"handled"`
}

// Webhook POSTs deliveries to an HTTP endpoint. A 2xx answer is a success (its body, if
// any, a WebhookAnswer); 408, 429, 5xx and transport failures are retryable errors (the
// HandOff activity's retry policy backs off); a 3xx (redirects are not followed) or other
// 4xx is a *PermanentError and the message is marked failed.
type Webhook struct {
	url    string
	host   string
	secret []byte
	client *http.Client
	// now is the signing clock (time.Now).
	now func() time.Time
}

// NewWebhook returns a webhook handler for an absolute http(s) URL, signing with secret,
// each request bounded by timeout (0: DefaultTimeout).
func NewWebhook(rawURL string, secret sealing.Secret, timeout time.Duration) (*Webhook, error) {
	if err := checkURL(rawURL); err != nil {
		return nil, fmt.Errorf("handler webhook: webhook URL: %w", err)
	}
	if n := len(secret.Reveal()); n < MinSecretBytes {
		return nil, fmt.Errorf("handler webhook: the webhook secret must be at least %d bytes (it has %d)", MinSecretBytes, n)
	}
	if timeout < 0 || timeout > MaxTimeout {
		return nil, fmt.Errorf("handler webhook: timeout %v must be between 0 and %v", timeout, MaxTimeout)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	u, _ := url.Parse(rawURL)
	return &Webhook{url: rawURL, host: u.Host, secret: []byte(secret.Reveal()), now: time.Now, client: &http.Client{
		Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirected POST would lose its body or its signature's meaning
		},
	}}, nil
}

// checkURL accepts an absolute http(s) URL with a host and without user info.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an absolute http or https URL")
	case u.Host == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("user info in the URL is not allowed (the request is signed instead)")
	case u.Fragment != "":
		return errors.New("the URL has a fragment")
	}
	return nil
}

// Body returns the JSON body of a delivery. File names are shown as vocab.SafeFileName
// makes them, in the attachments and in the summary.
func Body(d Delivery) ([]byte, error) {
	msg := WebhookMessage{MessageKey: d.Message.MessageKey, AccountKey: d.Message.AccountKey, PeerID: d.Message.PeerID,
		SentAt: d.Message.SentAt, Attachments: []WebhookAttachment{}}
	summary, attachments := shown(d.Message.Payload)
	msg.Summary = summary
	for i, a := range attachments {
		msg.Attachments = append(msg.Attachments, WebhookAttachment{Attachment: a, FetchPath: fetchPath(d.Message.MessageKey, i, a)})
	}
	return json.Marshal(WebhookDelivery{
		Message: msg, SessionToken: d.SessionToken.Reveal(), SessionID: d.SessionID,
		Window: WebhookWindow{ReplyWindowID: d.Window.ReplyWindowID, ExpiresAt: d.Window.ExpiresAt, SendsLeft: d.Window.SendsLeft()},
	})
}

// Deliver POSTs the delivery and reads the answer. No error text holds the session token.
func (h *Webhook) Deliver(ctx context.Context, d Delivery) (Answer, error) {
	body, err := Body(d)
	if err != nil {
		return Answer{}, &PermanentError{Code: CodeDeliveryInvalid, Reason: "the delivery does not encode as JSON"}
	}
	ts := h.now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return Answer{}, &PermanentError{Code: CodeDeliveryInvalid, Reason: "webhook request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ilinkflow-webhook/1")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(h.secret, ts, body))
	resp, err := h.client.Do(req)
	if err != nil {
		// Retryable. The url.Error text would repeat the URL (which may hold a key):
		// name the host and the cause only.
		var ue *url.Error
		cause := err
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return Answer{}, fmt.Errorf("webhook POST to %s timed out: %v", h.host, cause)
		}
		return Answer{}, fmt.Errorf("webhook POST to %s: %v", h.host, cause)
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	secrets := []string{d.SessionToken.Reveal(), string(h.secret)}
	switch c := resp.StatusCode; {
	case c >= 200 && c <= 299:
		if rerr != nil {
			return Answer{}, fmt.Errorf("webhook POST to %s: reading the %d answer: %v", h.host, c, rerr)
		}
		return parseAnswer(c, raw)
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return Answer{}, fmt.Errorf("webhook POST to %s answered %d%s", h.host, c, snippet(raw, secrets...))
	case c >= 300 && c <= 499:
		reason := fmt.Sprintf("webhook answered %d%s", c, snippet(raw, secrets...))
		if c < 400 {
			reason = fmt.Sprintf("webhook answered %d (redirects are not followed)", c)
		}
		return Answer{}, &PermanentError{Code: CodeWebhookRefused, Reason: reason}
	default:
		return Answer{}, fmt.Errorf("webhook POST to %s answered %d", h.host, c)
	}
}

// parseAnswer reads a 2xx body: empty, or a WebhookAnswer. A body that is not one (not
// JSON of its shape, longer than maxAnswerBytes: whitespace counts, an answer is never
// judged by a prefix; not valid UTF-8; a member twice; more than maxReplies replies) is a
// contract violation that retrying cannot fix, and so is a reply that breaks the rule for
// outbound text (vocab.CheckText): the whole answer is refused, never sent in part or
// altered. Blank replies are skipped. The reason never quotes the body.
func parseAnswer(status int, raw []byte) (Answer, error) {
	invalid := func(format string, args ...any) (Answer, error) {
		return Answer{}, &PermanentError{Code: CodeAnswerInvalid, Reason: fmt.Sprintf("webhook answered %d with ", status) + fmt.Sprintf(format, args...)}
	}
	if len(raw) > maxAnswerBytes {
		return invalid("a body over %d bytes", maxAnswerBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return Answer{}, nil
	}
	if !jsontext.Valid(raw) {
		// The decoder would send U+FFFD for what the agent wrote: refuse, as the reply API does.
		return invalid("text that is not valid UTF-8 (or has an unpaired surrogate escape)")
	}
	if _, dup := jsontext.DuplicateKey(raw); dup {
		// The decoder would keep the last of the two without a word: refuse, as the reply API does.
		return invalid("a JSON object that holds one member twice")
	}
	var a WebhookAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return invalid(`a body that is not {"replies": [...], "handled": bool}`)
	}
	if len(a.Replies) > maxReplies {
		return invalid("%d replies (at most %d)", len(a.Replies), maxReplies)
	}
	var replies []string
	for i, r := range a.Replies {
		switch fault := vocab.CheckText(r, vocab.MaxTextBytes); fault {
		case vocab.TextOK:
			replies = append(replies, r)
		case vocab.TextEmpty:
			// A blank reply is skipped, as documented.
		default:
			return Answer{}, &PermanentError{Code: CodeReplyRefused, Fault: fault, Reason: fmt.Sprintf(
				"webhook answered %d with reply %d of %d refused, so none was sent: %s", status, i+1, len(a.Replies),
				fault.Describe(len(r), vocab.MaxTextBytes))}
		}
	}
	return Answer{Replies: replies, Handled: a.Handled}, nil
}

// snippet is ": " and the start of an answer body on one printable line, without the
// secrets (the session token, the webhook secret), or "" for an empty body.
func snippet(raw []byte, secrets ...string) string {
	s := string(raw)
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, sealing.Redacted)
		}
	}
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if s == "" {
		return ""
	}
	return ": " + s
}
