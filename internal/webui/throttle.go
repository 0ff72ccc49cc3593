package webui

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// Wrong operator tokens are throttled per client address: after LoginBurst of them, one
// more per LoginEvery (Config.FailedLoginEvery); the login form answers 429 meanwhile.
// Over all addresses together, wrong tokens have a ceiling too (GlobalLoginBurst, then one
// per GlobalLoginEvery), but it holds back only addresses that sent a wrong token before
// (within their last LoginBurst×FailedLoginEvery): an address with none is always heard,
// so the correct token from an operator's own address logs in whatever others send.
//
// The counts are rows of the store (webui_login_throttle), not a worker's memory: every
// worker behind a load balancer counts the same wrong tokens, so N workers give an
// attacker one budget, not N.
const (
	LoginBurst       = 10
	LoginEvery       = 6 * time.Second
	GlobalLoginBurst = 100
	GlobalLoginEvery = time.Second
	// maxThrottled bounds the addresses remembered; beyond it a new address counts as one
	// that failed before (and is not remembered) until some are forgotten.
	maxThrottled = 10000
)

// loginThrottle asks the store whether a login is looked at and counts wrong tokens.
type loginThrottle struct {
	store Store
	rule  store.LoginThrottle
}

func newLoginThrottle(st Store, every time.Duration) *loginThrottle {
	return &loginThrottle{store: st, rule: store.LoginThrottle{Burst: LoginBurst, Every: every,
		AllBurst: GlobalLoginBurst, AllEvery: GlobalLoginEvery, MaxAddresses: maxThrottled}}
}

// attempt reports whether a login from addr is looked at now, and counts its token when
// wrong (the token is compared first, so that a right and a wrong token make the same
// request of the store until the answer differs anyway). An error means the store could
// not be asked: the login must not go on.
func (t *loginThrottle) attempt(ctx context.Context, addr string, wrong bool) (bool, error) {
	return t.store.WebUILoginAttempt(ctx, t.rule, addr, wrong)
}

// clientAddress is the address logins are counted by: the connection's peer, or, when
// Config.ClientAddressHeader names a header set by a trusted reverse proxy, the last
// address in it (the one the proxy saw). IPv6 addresses count by their /64.
func (s *server) clientAddress(r *http.Request) string {
	raw := ""
	if h := s.cfg.ClientAddressHeader; h != "" {
		if v := r.Header.Values(h); len(v) > 0 {
			parts := strings.Split(v[len(v)-1], ",")
			raw = strings.TrimSpace(parts[len(parts)-1])
		}
	}
	if raw == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		raw = host
	}
	ip, err := netip.ParseAddr(strings.Trim(raw, "[]"))
	if err != nil {
		return raw
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
