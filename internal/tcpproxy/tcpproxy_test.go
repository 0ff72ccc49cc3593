package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

// A cut proxy closes the connections it forwards and refuses new ones until it is
// restored; then it forwards again.
func TestACutProxyClosesOpenConnectionsAndRefusesNewOnesUntilRestored(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if got, err := roundTrip(open, "before"); err != nil || got != "before" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Cut()
	if _, err := roundTrip(open, "during"); err == nil {
		t.Fatal("a connection open at the cut still forwards")
	}
	refused, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err) // the listener accepts, then closes at once
	}
	defer refused.Close()
	if _, err := roundTrip(refused, "during"); err == nil {
		t.Fatal("a connection made during the cut forwards")
	}
	select {
	case <-p.Refused():
	case <-time.After(10 * time.Second):
		t.Fatal("the refusal was not reported")
	}
	if p.Refusals() < 1 {
		t.Fatalf("refusals %d", p.Refusals())
	}

	p.Restore()
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := roundTrip(again, "after"); err != nil || got != "after" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
}
