//go:build integration

package testnet

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNetTargets(t *testing.T) {
	// New waits for another test binary's Net (the machine's testnet lock,
	// up to 15 min): the deadline covers that wait.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	n, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join("/sys/class/net", n.HostLink())); err == nil {
			t.Errorf("veth %s left after Close", n.HostLink())
		}
		if err := n.CheckRoute(context.Background(), PublicAddress); err == nil {
			t.Errorf("route to %s still resolves to the veth after Close", PublicAddress)
		}
	})
	for _, a := range n.Addrs() {
		ln, err := n.Listen("tcp4", net.JoinHostPort(a, "8080"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		ServeBanner(ln, "target "+a)
		pc, err := n.ListenPacket("udp4", net.JoinHostPort(a, "53"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		ServeUDPEcho(pc, "dns "+a)
	}
	ln, err := n.Listen("tcp4", net.JoinHostPort(PublicAddress, "443"))
	if err != nil {
		t.Fatal(err)
	}
	srv, pool, err := ServeHTTPS(ln, []string{PublicAddress, "public.test"},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	for _, a := range n.Addrs() {
		if err := n.CheckRoute(ctx, a); err != nil {
			t.Fatal(err)
		}
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(a, "8080"), 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		if got, want := strings.TrimSpace(line), "target "+a; got != want {
			t.Errorf("%s:8080 answered %q, want %q", a, got, want)
		}
		u, err := net.DialTimeout("udp4", net.JoinHostPort(a, "53"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = u.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = u.Write([]byte("q"))
		buf := make([]byte, 64)
		k, err := u.Read(buf)
		_ = u.Close()
		if err != nil || strings.TrimSpace(string(buf[:k])) != "dns "+a {
			t.Errorf("%s:53/udp answered %q, %v", a, buf[:k], err)
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + PublicAddress + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("https://%s/ = %q", PublicAddress, body)
	}

	// The checks refuse what is not the namespace's.
	if err := n.CheckRoute(ctx, "192.0.2.77"); err == nil || !strings.Contains(err.Error(), "not an address of this namespace") {
		t.Errorf("CheckRoute(192.0.2.77) = %v, want a refusal", err)
	}
	if _, err := New(ctx, Options{Addrs: []string{MetadataAddress}}); err == nil {
		t.Error("New with the real metadata address succeeded")
	}
}

func TestCheckRouteFailsWithoutRoute(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := New(ctx, Options{Addrs: []string{"203.0.113.77"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.CheckRoute(ctx, "203.0.113.77"); err != nil {
		t.Fatal(err)
	}
	// Without the host route the address would leave by the default route: the
	// check must fail (and nothing is sent).
	if err := n.ip(ctx, "route", "del", "203.0.113.77/32"); err != nil {
		t.Fatal(err)
	}
	err = n.CheckRoute(ctx, "203.0.113.77")
	if err == nil || !strings.Contains(err.Error(), "not the namespace's veth") {
		t.Fatalf("CheckRoute without the route = %v, want a refusal", err)
	}
}

// TestNewSweepsAKilledNet: a Net whose process was killed leaves its
// namespace, veth pair and host routes (its lock goes with the process);
// the next New removes them and takes the routes, where it used to fail
// with "File exists".
func TestNewSweepsAKilledNet(t *testing.T) {
	ctx := context.Background()
	killed, err := New(ctx, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	killed.lock.Unlock() // the process's end, without Close
	n, err := New(ctx, DefaultOptions())
	if err != nil {
		t.Fatalf("New after a killed Net: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if _, err := os.Stat(filepath.Join("/run/netns", killed.Name())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed Net's namespace %s is still there (%v)", killed.Name(), err)
	}
	if err := n.CheckRoute(ctx, PublicAddress); err != nil {
		t.Errorf("the new Net's route: %v", err)
	}
}
