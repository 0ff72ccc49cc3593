package ilinksim

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the peer of c has closed the connection (an orderly close or
// a reset), without consuming any data and without waiting: a peek at the socket. The
// server's own reader of the connection is left alone (Control takes no read lock).
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.ECONNRESET):
			closed = true
		}
	})
	return closed
}
