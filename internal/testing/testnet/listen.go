package testnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// inNamespace runs f on an OS thread that has joined the namespace, then returns
// the thread to the host's namespace. Sockets created by f stay in the namespace
// whichever thread later uses them. A thread that cannot return is left locked, so
// that the Go runtime ends it instead of reusing it.
func (n *Net) inNamespace(f func() error) error {
	runtime.LockOSThread()
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testnet %s: host namespace: %w", n.opts.Name, err)
	}
	defer unix.Close(host)
	target, err := unix.Open(filepath.Join("/run/netns", n.opts.Name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testnet %s: %w", n.opts.Name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("testnet %s: setns: %w", n.opts.Name, err)
	}
	ferr := f()
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("testnet %s: back to the host namespace: %w", n.opts.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen listens inside the namespace ("tcp4", "203.0.113.10:443").
func (n *Net) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := n.inNamespace(func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet %s: listen %s %s: %w", n.opts.Name, network, address, err)
	}
	return ln, nil
}

// ListenPacket listens for datagrams inside the namespace ("udp4", "203.0.113.10:53").
func (n *Net) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := n.inNamespace(func() error {
		var err error
		pc, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testnet %s: listen %s %s: %w", n.opts.Name, network, address, err)
	}
	return pc, nil
}

// ServeBanner writes banner and a newline to each connection ln accepts, then
// closes it, until ln is closed (internal/testing/testcluster's pause -dial prints it).
func ServeBanner(ln net.Listener, banner string) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_, _ = fmt.Fprintln(c, banner)
			_ = c.Close()
		}
	}()
}

// ServeUDPEcho answers each datagram pc receives with banner and a newline, until
// pc is closed.
func ServeUDPEcho(pc net.PacketConn, banner string) {
	go func() {
		buf := make([]byte, 2048)
		for {
			_, addr, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_, _ = pc.WriteTo([]byte(banner+"\n"), addr)
		}
	}()
}

// ServeHTTPS serves h over TLS on ln with a new self-signed certificate for names
// (IP addresses and DNS names), until ln is closed, and returns the pool that
// trusts it. Close the returned server (or ln) to stop.
func ServeHTTPS(ln net.Listener, names []string, h http.Handler) (*http.Server, *x509.CertPool, error) {
	cert, pool, err := selfSigned(names)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Serve(tl) }()
	return srv, pool, nil
}

// ServeHTTPSPEM is ServeHTTPS, and returns the certificate in PEM, for a
// client in another process (a pod's) to trust.
func ServeHTTPSPEM(ln net.Listener, names []string, h http.Handler) (*http.Server, []byte, error) {
	cert, _, err := selfSigned(names)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Serve(tl) }()
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), nil
}

// selfSigned makes a certificate for names that is its own CA.
func selfSigned(names []string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("testnet: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("testnet: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "pcsync testnet target"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, name := range names {
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("testnet: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("testnet: certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}
