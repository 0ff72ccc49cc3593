package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// MinCodecTokenBytes is the minimum length of the codec endpoint's token.
const MinCodecTokenBytes = 16

// CodecPath is where the HTTP server mounts the payload codec endpoint: the Temporal UI
// and CLI call CodecPath+"decode" and CodecPath+"encode" (--codec-endpoint
// http://HOST:PORT/codec).
const CodecPath = "/codec/"

// setCodecCORSOrigin parses --codec-cors-origin: an http(s) origin, scheme://host[:port].
func setCodecCORSOrigin(c *Config, v string) error {
	if err := checkOrigin(v); err != nil {
		return err
	}
	c.CodecCORSOrigin = strings.TrimSuffix(v, "/")
	return nil
}

func checkOrigin(v string) error {
	u, err := url.Parse(strings.TrimSuffix(v, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want an origin such as http://127.0.0.1:8233 (scheme, host and port only)")
	}
	return nil
}

// validateCodec checks the codec endpoint's settings.
func (c Config) validateCodec() error {
	var errs []error
	if !c.CodecToken.IsZero() && len(c.CodecToken.Reveal()) < MinCodecTokenBytes {
		errs = append(errs, fmt.Errorf("%s is shorter than %d bytes", EnvCodecToken, MinCodecTokenBytes))
	}
	if c.CodecCORSOrigin != "" {
		if err := checkOrigin(c.CodecCORSOrigin); err != nil {
			errs = append(errs, fmt.Errorf("codec CORS origin %q: %v", c.CodecCORSOrigin, err))
		}
	}
	return errors.Join(errs...)
}

// codecHandler is the codec endpoint of the HTTP server (mounted at CodecPath): the
// payload codec of cfg.Keyring behind the bearer token; 404 when no token is set. With
// devUIOrigin (Options.DevUICodecOrigin, `starter dev` only) the Temporal dev server's UI
// at that origin is let through without the token (devUICodec); devUIOrigin must pass
// checkDevUICodec.
func codecHandler(cfg Config, devUIOrigin string) (http.Handler, error) {
	if devUIOrigin != "" {
		if err := checkDevUICodec(cfg, devUIOrigin); err != nil {
			return nil, err
		}
		cfg.CodecCORSOrigin = strings.TrimSuffix(devUIOrigin, "/")
	}
	if cfg.CodecToken.IsZero() {
		return http.NotFoundHandler(), nil
	}
	codec, err := payloadcodec.New(cfg.Keyring)
	if err != nil {
		return nil, fmt.Errorf("payload codec: %w", err)
	}
	var h http.Handler = payloadcodec.NewHTTPHandler(codec,
		payloadcodec.HTTPConfig{Token: cfg.CodecToken, CORSOrigin: cfg.CodecCORSOrigin})
	if devUIOrigin != "" {
		h = devUICodec(h, cfg.CodecCORSOrigin, cfg.CodecToken)
	}
	return http.StripPrefix(strings.TrimSuffix(CodecPath, "/"), h), nil
}

// checkDevUICodec checks Options.DevUICodecOrigin against cfg: an http(s) origin on a
// loopback host (an IP literal or "localhost"), a codec token to serve the endpoint
// with, and no other CORS origin configured.
func checkDevUICodec(cfg Config, origin string) error {
	origin = strings.TrimSuffix(origin, "/")
	if err := checkOrigin(origin); err != nil {
		return fmt.Errorf("dev UI codec origin %q: %w", origin, err)
	}
	u, _ := url.Parse(origin)
	if !loopbackHost(u.Hostname()) {
		return fmt.Errorf("dev UI codec origin %q: not a loopback host (the token-less codec path is for a local Temporal dev server's UI only)", origin)
	}
	if cfg.CodecToken.IsZero() {
		return fmt.Errorf("dev UI codec origin %q: no codec token (%s) is set, so there is no codec endpoint", origin, EnvCodecToken)
	}
	if cfg.CodecCORSOrigin != "" && cfg.CodecCORSOrigin != origin {
		return fmt.Errorf("dev UI codec origin %q: the codec CORS origin is %q; the endpoint allows one origin", origin, cfg.CodecCORSOrigin)
	}
	return nil
}

// checkDevUICodecListener refuses to serve the token-less codec path
// (Options.DevUICodecOrigin) on a listener that is not on a loopback address.
func checkDevUICodecListener(origin string, ln net.Listener) error {
	if origin == "" || ln == nil {
		return nil
	}
	if !loopbackAddr(ln.Addr()) {
		return fmt.Errorf("dev UI codec origin %q: the codec endpoint's listener %s is not on a loopback address", origin, ln.Addr())
	}
	return nil
}

// devUICodec serves next (the codec endpoint behind token) to the Temporal dev server's
// UI at origin without the token: that UI has no login and sends no Authorization header
// (its settings carry only the endpoint; passAccessToken would send its own login's
// access token, which a dev UI has none of). A request is served as if it carried
// "Authorization: Bearer <token>" when it has no Authorization header, its Origin is
// exactly origin (which a browser sets and a page cannot forge) and its connection is
// loopback at both ends. Every other request reaches next unchanged: a missing token is
// 401, a wrong one still 401, another origin 403 (docs/payload-codec.md).
func devUICodec(next http.Handler, origin string, token sealing.Secret) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, sent := r.Header["Authorization"]; !sent && r.Header.Get("Origin") == origin && overLoopback(r) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+token.Reveal())
		}
		next.ServeHTTP(w, r)
	})
}

// overLoopback reports whether r came over a connection whose both ends are loopback
// addresses.
func overLoopback(r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !loopbackAddr(local) {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackAddr reports whether a is a TCP address on a loopback IP.
func loopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// loopbackHost reports whether host is a loopback IP literal or "localhost".
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
