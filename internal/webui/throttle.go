package webui

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Wrong operator tokens are throttled per client address: after LoginBurst of them, one
// more per LoginEvery (Config.FailedLoginEvery); the login form answers 429 meanwhile.
// Over all addresses together, wrong tokens have a ceiling too (GlobalLoginBurst, then one
// per GlobalLoginEvery), but it holds back only addresses that sent a wrong token before:
// an address with none is always heard, so the correct token from an operator's own
// address logs in whatever others send.
const (
	LoginBurst       = 10
	LoginEvery       = 6 * time.Second
	GlobalLoginBurst = 100
	GlobalLoginEvery = time.Second
	// maxThrottled bounds the addresses remembered; beyond it the oldest are forgotten
	// first once their own limit is lifted, and a new address counts as one that failed.
	maxThrottled = 10000
)

// loginThrottle counts wrong tokens per client address and over all of them.
type loginThrottle struct {
	every time.Duration

	mu     sync.Mutex
	addrs  map[string]*addrFailures
	global *rate.Limiter
}

type addrFailures struct {
	lim  *rate.Limiter
	last time.Time
}

func newLoginThrottle(every time.Duration) *loginThrottle {
	return &loginThrottle{every: every, addrs: map[string]*addrFailures{},
		global: rate.NewLimiter(rate.Every(GlobalLoginEvery), GlobalLoginBurst)}
}

// allowed reports whether a login from addr is looked at now.
func (t *loginThrottle) allowed(addr string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.addrs[addr]
	if a == nil {
		// A clean address is heard unless the table is full and the ceiling reached.
		return len(t.addrs) < maxThrottled || t.global.TokensAt(now) >= 1
	}
	return a.lim.TokensAt(now) >= 1 && t.global.TokensAt(now) >= 1
}

// failed counts a wrong token from addr.
func (t *loginThrottle) failed(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.global.AllowN(now, 1)
	a := t.addrs[addr]
	if a == nil {
		if len(t.addrs) >= maxThrottled {
			t.forget(now)
		}
		if len(t.addrs) >= maxThrottled {
			return
		}
		a = &addrFailures{lim: rate.NewLimiter(rate.Every(t.every), LoginBurst)}
		t.addrs[addr] = a
	}
	a.lim.AllowN(now, 1)
	a.last = now
}

// forget drops the addresses whose limit is lifted again (no wrong token for a whole
// burst's refill).
func (t *loginThrottle) forget(now time.Time) {
	idle := time.Duration(LoginBurst) * t.every
	for k, a := range t.addrs {
		if now.Sub(a.last) > idle {
			delete(t.addrs, k)
		}
	}
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
