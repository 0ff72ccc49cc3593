package tcpproxy

import (
	"bufio"
	"errors"
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

// silent reports whether a line sent on c gets no answer and no close before a short
// read deadline (the proxy holds the connection without answering).
func silent(t *testing.T, c net.Conn, line string) bool {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var b [64]byte
	n, err := c.Read(b[:])
	var ne net.Error
	return n == 0 && errors.As(err, &ne) && ne.Timeout()
}

// A blackholed proxy hangs: open connections stay open but get no answer, new ones are
// accepted and held the same way; restored, it closes what it held and forwards again.
func TestABlackholedProxyHoldsConnectionsWithoutAnsweringUntilRestored(t *testing.T) {
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

	p.Blackhole()
	if !silent(t, open, "during") {
		t.Fatal("a connection open at the blackhole was answered or closed")
	}
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if !silent(t, held, "during") {
		t.Fatal("a connection made during the blackhole was answered or closed")
	}
	if p.Refusals() != 0 {
		t.Fatalf("a blackholed proxy refused %d connections", p.Refusals())
	}

	p.Restore()
	for _, c := range []net.Conn{open, held} {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var ne net.Error
		if _, err := io.ReadAll(c); errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a connection of the blackhole was not closed at the restore")
		}
	}
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := roundTrip(again, "after"); err != nil || got != "after" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
}
