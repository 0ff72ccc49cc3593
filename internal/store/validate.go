package store

import (
	"net"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// providerIdentity checks a provider id (bot id, peer id, message id): non-empty,
// trimmed, bounded, no control characters.
func providerIdentity(value, label string) error {
	if value == "" || value != strings.TrimSpace(value) || len(value) > maxProviderIDBytes || !utf8.ValidString(value) {
		return fail(vocab.CodeInvalidInput, "%s is invalid", label)
	}
	for _, r := range value {
		if r < 0x20 || r == 0x7f {
			return fail(vocab.CodeInvalidInput, "%s is invalid", label)
		}
	}
	return nil
}

// validCursor checks an opaque getupdates cursor: at most 256 KiB, valid UTF-8, no NUL.
func validCursor(value, label string) error {
	if len(value) > maxCursorBytes || strings.IndexByte(value, 0) >= 0 || !utf8.ValidString(value) {
		return fail(vocab.CodeInvalidInput, "%s is invalid (over 256 KiB, NUL or not UTF-8)", label)
	}
	return nil
}

// validAccountFilter checks an optional account key filter ("" lists every account).
func validAccountFilter(accountKey string) error {
	if accountKey == "" {
		return nil
	}
	return validAccountKey(accountKey)
}

func validAccountKey(key string) error {
	if len(key) != 36 || !strings.HasPrefix(key, "ilk_") || !isLowerHex(key[4:]) {
		return fail(vocab.CodeInvalidInput, "account key is invalid")
	}
	return nil
}

func validMessageKey(key string) error {
	if len(key) != 35 || !strings.HasPrefix(key, "im_") || !isLowerHex(key[3:]) {
		return fail(vocab.CodeInvalidInput, "message key is invalid")
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

// NormalizeBaseURL normalises an iLink API base URL: https only (http only for a loopback
// host), no credentials, query or fragment, and a trailing slash so that endpoint paths
// join relative to it.
func NormalizeBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fail(vocab.CodeInvalidInput, "base URL is invalid")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return "", fail(vocab.CodeInvalidInput, "base URL must use https (http only for loopback)")
		}
	default:
		return "", fail(vocab.CodeInvalidInput, "base URL must use https")
	}
	u.Host = strings.ToLower(u.Host)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validOfferID(id string) error {
	if len(id) < 4 || len(id) > 131 || !strings.HasPrefix(id, "qo_") {
		return fail(vocab.CodeInvalidInput, "login offer id is invalid")
	}
	for _, r := range id[3:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fail(vocab.CodeInvalidInput, "login offer id is invalid")
		}
	}
	return nil
}

// ValidPeerID checks the form of a WeChat user's id (a peer id): 1..256 bytes of UTF-8,
// trimmed, without control characters.
func ValidPeerID(id string) error { return providerIdentity(id, "peer id") }

// ValidAccountKey checks the form of an account key: ilk_ and 32 lower-case hex digits.
func ValidAccountKey(key string) error { return validAccountKey(key) }
