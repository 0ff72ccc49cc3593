package payloadcodec

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/sealing"
)

// HTTPConfig configures [NewHTTPHandler].
type HTTPConfig struct {
	// Token is the bearer token a request must carry ("Authorization: Bearer <Token>";
	// the Temporal CLI sends --codec-auth as the header). Empty disables the endpoint:
	// every request is answered 404.
	Token sealing.Secret
	// CORSOrigin is the one browser origin (the Temporal UI, e.g.
	// "http://127.0.0.1:8233") allowed to call the endpoint from a page; empty allows
	// none. Requests from any other Origin are refused (403).
	CORSOrigin string
}

// NewHTTPHandler serves the codec's remote codec protocol (POST .../encode and
// .../decode with a JSON Payloads body, as the Temporal UI and CLI call it) through the
// SDK's converter.NewPayloadCodecHTTPHandler, behind the bearer token and the CORS
// origin of cfg. It answers 404 when no token is configured, 401 without the right
// token, 403 for a foreign Origin, and the CORS preflight (OPTIONS) for the configured
// origin only. The token is compared in constant time and never logged or echoed.
func NewHTTPHandler(c *Codec, cfg HTTPConfig) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	var want [32]byte
	if !cfg.Token.IsZero() {
		want = sha256.Sum256([]byte("Bearer " + cfg.Token.Reveal()))
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
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ilinkflow codec"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		inner.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body (Temporal's payload limit is 2 MiB per payload; a
// history page decodes in several requests).
const maxBody = 16 << 20
