package ilinksim

import (
	"context"
	"net"
	"net/http"
)

// connKey is the context key under which ConnContext keeps a request's connection.
type connKey struct{}

// ConnContext is an http.Server's ConnContext for a server of the simulator: it keeps each
// request's connection, so that a getupdates whose client's connection is already closed
// (a killed process) no longer counts as outstanding when another poll of its bot
// arrives, even before the server has noticed the close (on a busy machine that takes a
// while). Without it a closed client counts until its handler returns.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// requestConn returns the connection ConnContext kept for r (nil: none).
func requestConn(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// heldPoll is one outstanding getupdates of a bot.
type heldPoll struct {
	conn net.Conn // nil: unknown
}

// clientGone reports whether the held poll's client closed its connection.
func (h *heldPoll) clientGone() bool {
	return h.conn != nil && peerClosed(h.conn)
}
