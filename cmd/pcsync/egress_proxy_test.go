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

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
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

// TestEgressProxyCredentialRoute: with --credentials, the proxy serves the
// credential route beside the proxy: a token the pod's annotations file
// names is taken (and its request forwarded: the upstream here listens
// nowhere, so 502), another is refused with 403, an unknown credential is
// 404, and nothing of either token is logged. (The forwarding itself, over
// TLS with the key, is package inject's test.)
func TestEgressProxyCredentialRoute(t *testing.T) {
	dir := t.TempDir()
	token, err := inject.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	hash := agentpod.TokenHash(token)
	files := map[string]string{
		"allow.json":  `{"company":"acme","hosts":["api.anthropic.com"],"ports":[443]}`,
		"annotations": fmt.Sprintf("%s=%q\n", inject.AnnotationKey(hash), hash),
		"key":         "sk-ant-never-logged\n",
		"credentials.json": fmt.Sprintf(`{"company":"acme","tokensFile":%q,"credentials":[{"name":"claude","provider":"anthropic","type":"apiKey","upstream":"https://%s","keyFile":%q}]}`,
			filepath.Join(dir, "annotations"), freeAddr(t), filepath.Join(dir, "key")),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"egress-proxy", "--config", filepath.Join(dir, "allow.json"), "--listen", listen,
			"--metrics", metrics, "--credentials", filepath.Join(dir, "credentials.json")}, io.Discard, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
		}
	}()
	post := func(path, tok string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+path, strings.NewReader("{}"))
		req.Header.Set("x-api-key", tok)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST %s: %v", path, err)
			}
		}
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/credentials/claude/v1/messages", token, http.StatusBadGateway},
		{"/credentials/claude/v1/messages", "pcsync-run-forged", http.StatusForbidden},
		{"/credentials/nope/v1/messages", token, http.StatusNotFound},
	} {
		if got := post(tc.path, tc.token); got != tc.want {
			t.Errorf("POST %s: %d, want %d", tc.path, got, tc.want)
		}
	}
	for _, secret := range []string{token, "sk-ant-never-logged"} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("the proxy's log holds a token or the key:\n%s", stderr.String())
		}
	}
}
