package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/lockedbuf"
)

// freeAddr is a loopback address no one listens on (just closed).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// connect sends a CONNECT for target through the proxy as agent and
// returns the answer's status code.
func connect(t *testing.T, proxy, target, agent string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth := base64.StdEncoding.EncodeToString([]byte(agent + ":"))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestEgressProxyCommand: `pcsync egress-proxy` reads the allow-list (a
// file here; render passes it as --allow-list, as TestEgressProxyAllowListFlag checks),
// serves the proxy and its metrics, refuses a host outside the list and an
// allowed name that resolves to loopback (localhost: nothing is sent
// anywhere), logs both refusals with the agent and host, and counts them
// by reason on /metrics; it stops when its context ends.
func TestEgressProxyCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "allow.json")
	if err := os.WriteFile(cfg, []byte(`{"company":"acme","hosts":["localhost","api.example.com"],"ports":[443]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	listen, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"egress-proxy", "--config", cfg, "--listen", listen, "--metrics", metrics}, io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + metrics + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not start; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	if code := connect(t, listen, "evil.example.net:443", "coder"); code != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT evil.example.net:443: status %d, want 407 (refused)", code)
	}
	if code := connect(t, listen, "localhost:443", "coder"); code != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT localhost:443 (allowed name, loopback address): status %d, want 407 (refused)", code)
	}

	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`pcsync_egress_proxy_refused_total{company="acme",reason="host_not_allowed"} 1`,
		`pcsync_egress_proxy_refused_total{company="acme",reason="address_not_public"} 1`,
		`pcsync_egress_proxy_allowed_total{company="acme"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logs := stderr.String()
	for _, want := range []string{
		`msg="egress refused" company=acme agent=coder host=evil.example.net port=443 reason=host_not_allowed`,
		`msg="egress refused" company=acme agent=coder host=localhost port=443 reason=address_not_public`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr lacks %s:\n%s", want, logs)
		}
	}
}

// TestEgressProxyAllowListFlag: the allow-list as render passes it (the
// Deployment's --allow-list) is read; a bad one stops the command before
// it listens; --config and --allow-list exclude each other.
func TestEgressProxyAllowListFlag(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"egress-proxy", "--allow-list", `{"company":"acme","hosts":["*"]}`, "--listen", freeAddr(t)}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--allow-list") || !strings.Contains(stderr.String(), "matches every host") {
		t.Errorf("a pattern of wildcards only: exit %d, stderr %q; want a refusal naming --allow-list", code, stderr.String())
	}
	stderr.Reset()
	code = run(context.Background(), []string{"egress-proxy", "--allow-list", "{}", "--config", "x"}, io.Discard, &stderr)
	if code == 0 {
		t.Errorf("--allow-list with --config: exit 0, want a usage error; stderr %q", stderr.String())
	}
}
