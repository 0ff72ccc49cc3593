package payloadcodec

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ilinkflow/ilinkflow/sealing"
)

// HTTPConfig configures [NewHTTPHandler].
type HTTPConfig struct {
	// Token is the bearer token a request must carry ("Authorization: Bearer <Token>",
	// the scheme in any case; the Temporal CLI sends --codec-auth as the header). Empty
	// disables the endpoint: every request is answered 404.
	Token sealing.Secret
	// CORSOrigin is the one browser origin (the Temporal UI, e.g.
	// "http://127.0.0.1:8233") allowed to call the endpoint from a page; empty allows
	// none. Requests from any other Origin are refused (403).
	CORSOrigin string
	// Logger receives the reasons behind refused bodies (default slog.Default()); it never
	// gets a payload, a token or a key.
	Logger *slog.Logger
}

// Codes of the endpoint's refusals of a body, each answered with a fixed message (the
// request's bytes are never echoed).
const (
	// CodeBodyTooLarge: the body is over MaxRequestBytes (413). A body that cannot be
	// read or is not a JSON Payloads object is CodeInvalidInput (400); a payload that
	// does not encode or decode has the codec's code (400).
	CodeBodyTooLarge = "body_too_large"
)

// MaxRequestBytes bounds a request body (Temporal's payload limit is 2 MiB per payload;
// a history page decodes in several requests).
const MaxRequestBytes = 16 << 20

// Paths of the remote codec protocol, after the endpoint's prefix.
const (
	encodePath = "/encode"
	decodePath = "/decode"
)

// refusals are the fixed messages of the endpoint's 4xx and 5xx answers, by code.
var refusals = map[string]string{
	CodeBodyTooLarge:      "the request body is too large",
	CodeInvalidInput:      "the request body is not a JSON Payloads object",
	CodeUnknownGeneration: "a payload was encrypted with a key generation this worker does not have",
	CodeDecryptFailed:     "a payload does not decrypt (tampered, truncated or relabelled)",
	CodeEncryptFailed:     "a payload could not be encrypted",
}

// NewHTTPHandler serves the codec's remote codec protocol (POST .../encode and
// .../decode with a JSON Payloads body, as the Temporal UI and CLI call it) behind the
// bearer token and the CORS origin of cfg. It answers 404 when no token is configured,
// 403 for a foreign Origin, the CORS preflight (OPTIONS) for the configured origin only,
// 401 without the right token (the scheme is case-insensitive, the token compared in
// constant time, never logged or echoed), and only then looks at the method (405), the
// path (404) and the body: at most MaxRequestBytes (413, unread when its declared length is over), a JSON Payloads object (400).
// A payload that does not encode or decode is a 400. Every refusal is "<code>: <fixed
// message>": nothing of the request is echoed.
func NewHTTPHandler(c *Codec, cfg HTTPConfig) http.Handler {
	var want [32]byte
	if !cfg.Token.IsZero() {
		want = sha256.Sum256([]byte(cfg.Token.Reveal()))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	origin := strings.TrimSuffix(strings.TrimSpace(cfg.CORSOrigin), "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg.Token.IsZero() {
			http.NotFound(w, r)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if origin == "" || o != origin {
				http.Error(w, "origin not allowed", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Namespace")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusOK)
				return
			}
		}
		// Authentication comes before anything of the request but its headers is read.
		tok, ok := bearer(r.Header.Get("Authorization"))
		got := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ilinkflow codec"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		encode := strings.HasSuffix(r.URL.Path, encodePath)
		if !encode && !strings.HasSuffix(r.URL.Path, decodePath) {
			http.NotFound(w, r)
			return
		}
		if r.ContentLength > MaxRequestBytes {
			refuse(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge) // refused unread
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				refuse(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge)
				return
			}
			log.Warn("payload codec endpoint: the request body could not be read", "read", len(raw))
			refuse(w, http.StatusBadRequest, CodeInvalidInput)
			return
		}
		var in commonpb.Payloads
		if err := protojson.Unmarshal(raw, &in); err != nil {
			// The parser's message quotes the input (for /encode, plaintext): not logged.
			log.Warn("payload codec endpoint: the body is not a JSON Payloads object", "bytes", len(raw))
			refuse(w, http.StatusBadRequest, CodeInvalidInput)
			return
		}
		var out []*commonpb.Payload
		if encode {
			out, err = c.Encode(in.Payloads)
		} else {
			out, err = c.Decode(in.Payloads)
		}
		if err != nil {
			code := CodeDecryptFailed
			var ce *Error
			if errors.As(err, &ce) && refusals[ce.Code] != "" {
				code = ce.Code
			}
			// The codec's errors never hold payload bytes or keys: the detail is logged.
			log.Warn("payload codec endpoint: a payload was refused", "encode", encode, "code", code, "error", err)
			refuse(w, http.StatusBadRequest, code)
			return
		}
		var body bytes.Buffer
		// The SDK's remote codec protocol answers with encoding/json of the Payloads message.
		if err := json.NewEncoder(&body).Encode(&commonpb.Payloads{Payloads: out}); err != nil {
			log.Error("payload codec endpoint: the answer does not encode", "encode", encode)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body.Bytes())
	})
}

// bearer returns the credentials of an "Authorization: Bearer <token>" header value. The
// scheme is matched without regard to case and may be followed by several spaces (RFC
// 7235); the token is everything after them.
func bearer(header string) (string, bool) {
	scheme, rest, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok := strings.TrimLeft(rest, " ")
	return tok, tok != ""
}

// refuse answers a refusal of the body with its code's fixed message.
func refuse(w http.ResponseWriter, status int, code string) {
	http.Error(w, code+": "+refusals[code], status)
}
