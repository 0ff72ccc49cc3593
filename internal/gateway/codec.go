package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
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
// payload codec of cfg.Keyring behind the bearer token; 404 when no token is set.
func codecHandler(cfg Config) (http.Handler, error) {
	if cfg.CodecToken.IsZero() {
		return http.NotFoundHandler(), nil
	}
	codec, err := payloadcodec.New(cfg.Keyring)
	if err != nil {
		return nil, fmt.Errorf("payload codec: %w", err)
	}
	return http.StripPrefix(strings.TrimSuffix(CodecPath, "/"), payloadcodec.NewHTTPHandler(codec,
		payloadcodec.HTTPConfig{Token: cfg.CodecToken, CORSOrigin: cfg.CodecCORSOrigin})), nil
}
