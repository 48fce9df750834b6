package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// apiProxy makes the API server reachable from the real node's pods: it listens on
// the pod bridge's gateway address (the pods' way to the host; the API server itself
// listens on 127.0.0.1 only, which a pod cannot reach) and copies every connection
// to the API server's port on 127.0.0.1, bytes only: TLS ends at the API server, whose
// serving certificate holds the gateway address (newPKI).
type apiProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// gatewayIP is the address the CNI bridge plugin gives the bridge (isGateway): the
// first address of the pod subnet, as host-local IPAM picks it.
func gatewayIP(podSubnet string) (net.IP, error) {
	_, n, err := net.ParseCIDR(podSubnet)
	if err != nil {
		return nil, fmt.Errorf("pod subnet %q: %w", podSubnet, err)
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("pod subnet %q: not IPv4", podSubnet)
	}
	gw := make(net.IP, len(ip))
	copy(gw, ip)
	gw[3]++
	return gw, nil
}

// startAPIProxy listens on host (a free port) and forwards to target. The address
// need not exist yet: the pod bridge, and the gateway address on it, appear with the
// node's first pod, so the socket is bound with IP_FREEBIND.
func startAPIProxy(host, target string) (*apiProxy, error) {
	lc := net.ListenConfig{Control: freebind}
	ln, err := lc.Listen(context.Background(), "tcp4", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("API server proxy: listen on %s: %w", host, err)
	}
	p := &apiProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// addr returns the proxy's host and port.
func (p *apiProxy) addr() (host, port string) {
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), strconv.Itoa(a.Port)
}

func (p *apiProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, an aborted connection)
		}
		if !p.track(conn) {
			_ = conn.Close()
			return
		}
		p.wg.Add(1)
		go p.forward(conn)
	}
}

// track records a connection for close; false once the proxy is closed.
func (p *apiProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *apiProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// forward copies one connection both ways until either side ends.
func (p *apiProxy) forward(in net.Conn) {
	defer p.wg.Done()
	defer p.untrack(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the API server is stopped (StopAPIServer): the client sees a reset
	}
	if !p.track(out) {
		_ = out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
}

// close stops listening, breaks the open connections and waits for their goroutines.
func (p *apiProxy) close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("API server proxy: %w", err)
	}
	return nil
}
