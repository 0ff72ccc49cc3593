// Package tcpproxy is a TCP proxy that tests cut and restore, to take a dependency (e.g.
// PostgreSQL) away from the code under test without stopping it: while cut, the proxy
// closes every open connection and refuses new ones; restored, it forwards again. A
// blackholed proxy is a dependency that hangs instead: it accepts connections and reads
// what they send, but answers nothing and forwards nothing, on open connections too.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards the connections it accepts to one target address.
type Proxy struct {
	ln       net.Listener
	target   string
	refused  chan struct{}
	refusals atomic.Int64

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	// blackhole drops what every connection sends (forwarding nothing) while set;
	// held are the connections accepted meanwhile, which have no upstream.
	blackhole atomic.Bool
	held      map[net.Conn]struct{}
}

// New listens on a free port of 127.0.0.1 and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, refused: make(chan struct{}, 1024), conns: map[net.Conn]struct{}{},
		held: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Refused receives one value per connection refused while the proxy is cut (values are
// dropped when nobody reads; Refusals counts them all).
func (p *Proxy) Refused() <-chan struct{} { return p.refused }

// Refusals is the number of connections refused while cut.
func (p *Proxy) Refusals() int64 { return p.refusals.Load() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() { p.setCut(true) }

// Restore forwards new connections again. After a blackhole it first closes every
// connection open during it (what they sent meanwhile was dropped).
func (p *Proxy) Restore() {
	if p.blackhole.Swap(false) {
		p.setCut(true)
	}
	p.setCut(false)
}

// Blackhole makes the proxy hang until Restore (or Cut): open connections stay open but
// nothing they send is forwarded or answered, and new connections are accepted and held
// the same way, as a database host that stopped answering without closing anything.
func (p *Proxy) Blackhole() { p.blackhole.Store(true) }

// Close stops listening and closes every open connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.setCut(true)
	return err
}

func (p *Proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
		for c := range p.held {
			_ = c.Close()
		}
		clear(p.held)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			_ = c.Close()
			p.refusals.Add(1)
			select {
			case p.refused <- struct{}{}:
			default:
			}
			continue
		}
		if p.blackhole.Load() {
			p.held[c] = struct{}{}
			p.mu.Unlock()
			go p.hold(c)
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut || p.closed { // cut while dialing
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// hold reads and drops what a connection accepted during a blackhole sends, until it is
// closed.
func (p *Proxy) hold(c net.Conn) {
	_, _ = io.Copy(io.Discard, c)
	_ = c.Close()
	p.mu.Lock()
	delete(p.held, c)
	p.mu.Unlock()
}

// pipe copies from src to dst (dropping what src sends during a blackhole), then closes
// both and forgets them.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.blackhole.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
