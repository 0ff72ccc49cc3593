package handoff

import (
	"bytes"
	"context"
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

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// Limits of a webhook answer.
const (
	maxAnswerBytes = 256 << 10
	maxReplies     = 100
	maxSnippet     = 200
)

// Webhook POSTs deliveries to an HTTP endpoint. A 2xx answer is a success (its body, if
// any, a webhook.Answer); 408, 429, 5xx and transport failures are retryable errors (the
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

// checkURL accepts an absolute http(s) URL with a host and without user info or a
// fragment (the store's rule for a route's URL).
func checkURL(raw string) error { return store.CheckWebhookURL(raw) }

// Body returns the JSON body of a delivery. File names are shown as vocab.SafeFileName
// makes them, in the attachments and in the summary.
func Body(d Delivery) ([]byte, error) {
	msg := webhook.Message{MessageKey: d.Message.MessageKey, AccountKey: d.Message.AccountKey, PeerID: d.Message.PeerID,
		SentAt: d.Message.SentAt, Attachments: []webhook.Attachment{}}
	summary, attachments := shown(d.Message.Payload)
	msg.Summary = summary
	for i, a := range attachments {
		msg.Attachments = append(msg.Attachments, webhook.Attachment{Kind: a.Kind, Position: a.Position, Name: a.Name, Size: a.Size,
			Text: a.Text, FetchPath: fetchPath(d.Message.MessageKey, i, a)})
	}
	return json.Marshal(webhook.Delivery{
		Message: msg, SessionToken: d.SessionToken.Reveal(), SessionID: d.SessionID,
		Window: webhook.Window{ReplyWindowID: d.Window.ReplyWindowID, ExpiresAt: d.Window.ExpiresAt, SendsLeft: d.Window.SendsLeft()},
	})
}

// Deliver POSTs the delivery and reads the answer. No error text holds the session token.
func (h *Webhook) Deliver(ctx context.Context, d Delivery) (ans Answer, err error) {
	// With tracing on, the POST is a span of the hand-off, and its W3C traceparent goes in
	// the request's headers so the agent can continue the message's trace.
	ctx, span := tracing.Child(ctx, "handoff", "webhook", trace.SpanKindClient)
	defer func() { tracing.End(span, FailureCode(err)) }()
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
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(h.secret, ts, body))
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
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

// parseAnswer reads a 2xx body: empty, or a webhook.Answer. A body that is not one (not
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
	var a webhook.Answer
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

// FailureCode is the stable code of a failed delivery for its span: a permanent error's
// code, else "permanent" or "retryable" (an error's text is never recorded); "" for nil.
func FailureCode(err error) string {
	var perm *PermanentError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &perm) && perm.Code != "":
		return perm.Code
	case errors.As(err, &perm):
		return "permanent"
	}
	return "retryable"
}
