package egressproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/stripe/goproxy"
	"github.com/stripe/smokescreen/pkg/smokescreen"
	"github.com/stripe/smokescreen/pkg/smokescreen/conntrack"
)

// tunnelChunk is how much a tunnel moves between two renewals of its idle
// deadline: a tunnel is cut when a chunk does not move within IdleTimeout
// (below tunnelChunk/IdleTimeout bytes a second, about 220 B/s at the
// default 5 minutes).
const tunnelChunk = 64 << 10

// copyTunnel carries a CONNECT tunnel's bytes both ways (goproxy's
// ConnectCopyHandler). smokescreen wraps both ends to renew their idle
// deadline on every Read and Write, which hides the TCP connections from
// io.Copy: every byte then goes through user space. Here the wrappers are
// taken off, so that the kernel splices the bytes from one socket to the
// other, and the idle deadline is renewed once per tunnelChunk instead.
// The wrappers are still what is closed, so that smokescreen's connection
// tracker sees the tunnel end.
func copyTunnel(idle time.Duration) func(*goproxy.ProxyCtx, net.Conn, net.Conn) {
	return func(_ *goproxy.ProxyCtx, client, target net.Conn) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); pipe(unwrap(target), unwrap(client), idle) }()
		go func() { defer wg.Done(); pipe(unwrap(client), unwrap(target), idle) }()
		wg.Wait()
		client.Close()
		target.Close()
	}
}

// pipe copies src to dst until src ends, then half-closes dst (or closes
// both on an error, which ends the other direction too).
func pipe(dst, src net.Conn, idle time.Duration) {
	for {
		deadline := time.Now().Add(idle)
		_ = src.SetReadDeadline(deadline)
		_ = dst.SetWriteDeadline(deadline)
		n, err := io.Copy(dst, &io.LimitedReader{R: src, N: tunnelChunk})
		if err != nil {
			src.Close()
			dst.Close()
			return
		}
		if n < tunnelChunk {
			// EOF from src.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && !errors.Is(cw.CloseWrite(), net.ErrClosed) {
				return
			}
			dst.Close()
			return
		}
	}
}

// unwrap is the connection under smokescreen's wrappers.
func unwrap(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case *smokescreen.TimeoutConn:
			c = w.Conn
		case *conntrack.InstrumentedConn:
			c = w.Conn
		default:
			return c
		}
	}
}
