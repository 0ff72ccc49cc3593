//go:build !linux

package ilinksim

import "net"

// peerClosed reports false: only Linux peeks at the socket; elsewhere a closed client
// counts until the server notices the close.
func peerClosed(net.Conn) bool { return false }
