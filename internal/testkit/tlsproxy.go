package testkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TLSProxy terminates TLS in front of a plaintext gRPC server (the Temporal dev server),
// as a TLS-terminating load balancer or a TLS frontend does: it offers ALPN h2, requires
// a client certificate signed by ClientCAs when set, and forwards the decrypted bytes.
// It reads the HTTP/2 stream from each client on the way through and records every
// request's path and authorization header, so a test can check the metadata a client
// sends without changing the traffic.
type TLSProxy struct {
	// Addr is the proxy's TLS address.
	Addr string

	ln      net.Listener
	backend string

	mu       sync.Mutex
	requests []Request
	refused  []string // handshake errors, as the proxy saw them
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Request is one HTTP/2 request a client sent through a TLSProxy.
type Request struct {
	// Path is the gRPC method, e.g. /temporal.api.workflowservice.v1.WorkflowService/GetSystemInfo.
	Path string
	// Authorization is the authorization header ("" when absent).
	Authorization string
}

// NewTLSProxy listens on 127.0.0.1 with serverCert and forwards to backend; clientCAs
// (nil: no client certificate asked for) are the authorities a client certificate must
// chain to. tb's cleanup closes it.
func NewTLSProxy(tb testing.TB, backend string, serverCert tls.Certificate, clientCAs *x509.CertPool) *TLSProxy {
	tb.Helper()
	cfg := &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		NextProtos:   []string{"h2"},
		MinVersion:   tls.VersionTLS12,
	}
	if clientCAs != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = clientCAs
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	p := &TLSProxy{Addr: ln.Addr().String(), ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.Close)
	return p
}

// Requests returns the requests seen so far.
func (p *TLSProxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

// Refused returns the handshake errors of the connections the proxy refused.
func (p *TLSProxy) Refused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
}

// Close stops listening and closes every connection.
func (p *TLSProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *TLSProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
		return true
	}
	delete(p.conns, c)
	return true
}

func (p *TLSProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			p.handle(c.(*tls.Conn))
		}()
	}
}

func (p *TLSProxy) handle(c *tls.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := c.HandshakeContext(ctx)
	cancel()
	if err != nil {
		p.mu.Lock()
		p.refused = append(p.refused, err.Error())
		p.mu.Unlock()
		return
	}
	var d net.Dialer
	b, err := d.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	if !p.track(b, true) {
		_ = b.Close()
		return
	}
	defer p.track(b, false)
	defer b.Close()
	pr, pw := io.Pipe()
	tapped := make(chan struct{})
	go func() {
		defer close(tapped)
		p.tap(pr)
	}()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(io.MultiWriter(b, pw), c)
		_ = pw.Close()
		if tc, ok := b.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, b)
		_ = c.CloseWrite()
		done <- struct{}{}
	}()
	<-done
	_ = c.Close()
	_ = b.Close()
	<-done
	_ = pw.Close()
	<-tapped
}

// tap reads the client's HTTP/2 stream and records each request's headers. It always
// reads r to its end, so it never holds the forwarding back.
func (p *TLSProxy) tap(r *io.PipeReader) {
	defer func() { _, _ = io.Copy(io.Discard, r) }()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(r, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1 << 24)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			return
		}
		mh, ok := f.(*http2.MetaHeadersFrame)
		if !ok {
			continue
		}
		req := Request{Path: mh.PseudoValue("path")}
		for _, hf := range mh.RegularFields() {
			if hf.Name == "authorization" {
				req.Authorization = hf.Value
			}
		}
		p.mu.Lock()
		p.requests = append(p.requests, req)
		p.mu.Unlock()
	}
}
