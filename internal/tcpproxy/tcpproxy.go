// Package tcpproxy is a TCP proxy that tests cut and restore, to take a dependency (e.g.
// PostgreSQL) away from the code under test without stopping it: while cut, the proxy
// closes every open connection and refuses new ones; restored, it forwards again.
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
}

// New listens on a free port of 127.0.0.1 and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, refused: make(chan struct{}, 1024), conns: map[net.Conn]struct{}{}}
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

// Restore forwards new connections again.
func (p *Proxy) Restore() { p.setCut(false) }

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

// pipe copies from src to dst, then closes both and forgets them.
func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
