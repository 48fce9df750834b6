package egressproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stripe/smokescreen/pkg/smokescreen"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// fakeResolver resolves test names to stand-in addresses; a name it does
// not know does not exist. It is the test hook that keeps every name of
// these tests on this machine.
type fakeResolver map[string][]net.IP

func (f fakeResolver) LookupIP(_ context.Context, _, host string) ([]net.IP, error) {
	if ips, ok := f[strings.TrimSuffix(host, ".")]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (fakeResolver) LookupPort(_ context.Context, _, service string) (int, error) {
	return strconv.Atoi(service)
}

// world is a proxy on loopback in front of an HTTPS target on loopback.
type world struct {
	proxyURL string
	target   *httptest.Server
	port     int
	logs     *lockedbuf.Buffer
	reg      *prometheus.Registry
	proxy    *Proxy
}

// startWorld starts a target and a proxy whose allow-list holds hosts on
// the target's port. Loopback is allowed (allowRanges) only when
// allowLoopback is set: the targets of a test must stay on this machine,
// and the proxy refuses loopback addresses otherwise, as it must in a pod.
func startWorld(t testing.TB, hosts []string, res fakeResolver, allowLoopback bool) *world {
	t.Helper()
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the target")
	}))
	t.Cleanup(target.Close)
	port := target.Listener.Addr().(*net.TCPAddr).Port
	logs := &lockedbuf.Buffer{}
	reg := prometheus.NewRegistry()
	opts := Options{
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: reg,
		resolver:   res,
	}
	if allowLoopback {
		opts.allowRanges = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	p, err := New(allow.List{Company: "acme", Hosts: hosts, Ports: []int{port}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &world{proxyURL: "http://" + ln.Addr().String(), target: target, port: port, logs: logs, reg: reg, proxy: p}
}

// client is an HTTPS client through the proxy as agent (none: no user
// info), trusting the target's certificate for any name.
func (w *world) client(t testing.TB, agent string) *http.Client {
	t.Helper()
	pu, err := url.Parse(w.proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	if agent != "" {
		pu.User = url.User(agent)
	}
	pool := x509.NewCertPool()
	pool.AddCert(w.target.Certificate())
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(pu),
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "example.com"},
		DisableKeepAlives: true,
	}}
}

// get fetches u through the proxy: the body, or the error.
func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

// logLines are the proxy's JSON log lines with the given message.
func (w *world) logLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(w.logs.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			delete(m, "time")
			out = append(out, m)
		}
	}
	return out
}

func (w *world) refused(reason string) float64 {
	return testutil.ToFloat64(w.proxy.metrics.refused.WithLabelValues(reason))
}

var loopback = []net.IP{net.ParseIP("127.0.0.1")}

// TestProxyAllowsAndRefuses: an allowed name is reached through the
// proxy; a name outside the allow-list, a port outside it, and allowed
// names that resolve to the metadata address or a private one are
// refused, each logged with company, agent, host and port (no path, no
// query) and counted by reason.
func TestProxyAllowsAndRefuses(t *testing.T) {
	res := fakeResolver{
		"allowed.test":  loopback,
		"other.test":    loopback,
		"metadata.test": {net.ParseIP("169.254.169.254")},
		"private.test":  {net.ParseIP("10.1.2.3")},
	}
	w := startWorld(t, []string{"allowed.test", "metadata.test", "private.test"}, res, true)
	c := w.client(t, "coder")
	secret := "/private/path?token=hunter2"

	body, err := get(c, fmt.Sprintf("https://allowed.test:%d%s", w.port, secret))
	if err != nil || body != "hello from the target" {
		t.Fatalf("allowed.test: body %q, err %v; want the target's answer", body, err)
	}
	for _, host := range []string{"other.test", "metadata.test", "private.test"} {
		if body, err := get(c, fmt.Sprintf("https://%s:%d%s", host, w.port, secret)); err == nil {
			t.Errorf("%s: reached (%q), want refused", host, body)
		}
	}
	// A port outside the list, of an allowed name.
	if _, err := get(c, fmt.Sprintf("https://allowed.test:%d%s", w.port+1, secret)); err == nil {
		t.Errorf("allowed.test on another port: reached, want refused")
	}
	// A plain-HTTP proxy request, by an agent that did not name itself: to
	// port 80, which its Host does not name.
	if _, err := get(w.client(t, ""), "http://other.test"+secret); err == nil {
		t.Errorf("http://other.test: reached, want refused")
	}

	got := w.logLines(t, "egress refused")
	want := []map[string]any{
		{"level": "WARN", "msg": "egress refused", "company": "acme", "agent": "coder", "host": "other.test", "port": float64(w.port), "reason": ReasonHost},
		{"level": "WARN", "msg": "egress refused", "company": "acme", "agent": "coder", "host": "metadata.test", "port": float64(w.port), "reason": ReasonAddress},
		{"level": "WARN", "msg": "egress refused", "company": "acme", "agent": "coder", "host": "private.test", "port": float64(w.port), "reason": ReasonAddress},
		{"level": "WARN", "msg": "egress refused", "company": "acme", "agent": "coder", "host": "allowed.test", "port": float64(w.port + 1), "reason": ReasonPort},
		{"level": "WARN", "msg": "egress refused", "company": "acme", "agent": UnknownAgent, "host": "other.test", "port": float64(80), "reason": ReasonHost},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("refusal log lines (-want +got):\n%s", d)
	}
	if all := w.logs.String(); strings.Contains(all, "/private/path") || strings.Contains(all, "hunter2") {
		t.Errorf("a log line holds the URL's path or query:\n%s", all)
	}
	for reason, n := range map[string]float64{ReasonHost: 2, ReasonAddress: 2, ReasonPort: 1, ReasonRequest: 0} {
		if got := w.refused(reason); got != n {
			t.Errorf("%s{reason=%q} = %v, want %v", RefusedTotalName, reason, got, n)
		}
	}
	if got := testutil.ToFloat64(w.proxy.metrics.allowed.WithLabelValues()); got != 1 {
		t.Errorf("%s = %v, want 1", AllowedTotalName, got)
	}
	if n, err := testutil.GatherAndCount(w.reg, RefusedTotalName); err != nil || n != 4 {
		t.Errorf("registry holds %d series of %s (err %v), want 4 (one per reason, no host label)", n, RefusedTotalName, err)
	}
}

// TestProxyRefusesLoopback: without the test hook, an allowed name that
// resolves to loopback is refused, as a pod's proxy refuses it; the
// control (the same name, the hook on) is reached in
// TestProxyAllowsAndRefuses.
func TestProxyRefusesLoopback(t *testing.T) {
	w := startWorld(t, []string{"allowed.test"}, fakeResolver{"allowed.test": loopback}, false)
	if body, err := get(w.client(t, "coder"), fmt.Sprintf("https://allowed.test:%d/", w.port)); err == nil {
		t.Fatalf("allowed.test on loopback: reached (%q), want refused", body)
	}
	if got := w.refused(ReasonAddress); got != 1 {
		t.Errorf("%s{reason=%q} = %v, want 1", RefusedTotalName, ReasonAddress, got)
	}
}

func TestAgentOf(t *testing.T) {
	tests := []struct {
		header string
		want   string
	}{
		{"", UnknownAgent},
		{"Basic " + b64("coder:"), "coder"},
		{"basic " + b64("coder"), "coder"},
		{"Basic " + b64("coder:some-password"), "coder"},
		{"Bearer abc", UnknownAgent},
		{"Basic !!!", UnknownAgent},
		{"Basic " + b64("bad name\n:"), UnknownAgent},
		{"Basic " + b64(strings.Repeat("a", 64)+":"), UnknownAgent},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodConnect, "http://x.test:443", nil)
		if tt.header != "" {
			r.Header.Set("Proxy-Authorization", tt.header)
		}
		if got := agentOf(r); got != tt.want {
			t.Errorf("agentOf(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestRefusedHostPort: a refusal is logged with the port the request went
// to, also when its Host names none (a plain HTTP request).
func TestRefusedHostPort(t *testing.T) {
	for _, tc := range []struct {
		name     string
		s        smokescreen.SmokescreenContext
		wantHost string
		wantPort int
	}{
		{"CONNECT", smokescreen.SmokescreenContext{ProxyType: "connect", RequestedHost: "a.test:443"}, "a.test", 443},
		{"plain HTTP, no port", smokescreen.SmokescreenContext{ProxyType: "http", RequestedHost: "a.test"}, "a.test", 80},
		{"plain HTTP, its URL's port", smokescreen.SmokescreenContext{ProxyType: "http", RequestedHost: "a.test:8080"}, "a.test", 8080},
		{"plain HTTP, the decision's port", smokescreen.SmokescreenContext{ProxyType: "http", RequestedHost: "a.test",
			Decision: &smokescreen.ACLDecision{OutboundHost: "a.test:443"}}, "a.test", 443},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, port := refusedHostPort(&tc.s)
			if host != tc.wantHost || port != tc.wantPort {
				t.Errorf("refusedHostPort = %s, %d; want %s, %d", host, port, tc.wantHost, tc.wantPort)
			}
		})
	}
}
