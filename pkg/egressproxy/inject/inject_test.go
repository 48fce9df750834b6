package inject

import (
	"bufio"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/adapters"
)

const (
	realKey = "sk-ant-real-key-never-in-a-pod"
	runID   = "run-1"
)

// standIn is a provider's API on loopback: it records what each request
// carried, answers /v1/messages, refuses /refuse with 401 and streams
// /stream as server-sent events, holding the last until released.
type standIn struct {
	srv     *httptest.Server
	mu      sync.Mutex
	headers []http.Header
	paths   []string
	release chan struct{}
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{release: make(chan struct{})}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers, s.paths = append(s.headers, r.Header.Clone()), append(s.paths, r.URL.Path)
		s.mu.Unlock()
		switch r.URL.Path {
		case "/refuse":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message_start\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			<-s.release
			_, _ = io.WriteString(w, "event: message_stop\ndata: {}\n\n")
		default:
			_, _ = io.WriteString(w, `{"usage":{"input_tokens":3}}`)
		}
	}))
	t.Cleanup(func() { s.Release(); s.srv.Close() })
	return s
}

func (s *standIn) Release() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *standIn) last() (http.Header, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) == 0 {
		return nil, ""
	}
	return s.headers[len(s.headers)-1], s.paths[len(s.paths)-1]
}

// world is a Handler served on loopback for company acme, with a
// credential "claude" (Anthropic, API key) and "codex" (OpenAI) whose keys
// are files, and the run runID alive from 127.0.0.1.
type world struct {
	url     string
	token   string
	keyFile string
	logs    *lockedbuf.Buffer
	reg     *prometheus.Registry
}

// oneToken is a Verifier that takes token from loopback, and names ended
// as the token of an ended run.
type oneToken struct{ token, ended string }

func (o oneToken) Verify(token string, from netip.Addr) (run, why string) {
	switch {
	case token == o.token && from == netip.MustParseAddr("127.0.0.1"):
		return runID, ""
	case token == o.ended:
		return "", OutcomeRunEnded
	}
	return "", OutcomeBadToken
}

func newWorld(t *testing.T, up *standIn) *world {
	t.Helper()
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &world{token: token, keyFile: filepath.Join(dir, "anthropic"), logs: &lockedbuf.Buffer{},
		reg: prometheus.NewRegistry()}
	writeKey(t, w.keyFile, realKey)
	openaiKey := filepath.Join(dir, "openai")
	writeKey(t, openaiKey, "sk-openai-real")
	u, _ := url.Parse(up.srv.URL)
	routes := adapters.Routes()
	tr := up.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs}
	h, err := NewHandler([]Credential{
		{Name: "claude", Route: routes[adapters.ProviderAnthropic], Kind: adapters.KeyAPIKey, Upstream: u, Key: &FileKey{Path: w.keyFile}},
		{Name: "codex", Route: routes[adapters.ProviderOpenAI], Kind: adapters.KeyAPIKey, Upstream: u, Key: &FileKey{Path: openaiKey}},
	}, Options{
		Company: "acme", Tokens: oneToken{token: token, ended: "pcsync-run-ended"}, Transport: tr, Registerer: w.reg,
		Logger: slog.New(slog.NewTextHandler(w.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func writeKey(t *testing.T, path, key string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (w *world) do(t *testing.T, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, w.url+path, strings.NewReader(`{"model":"m"}`))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if a == b || !strings.HasPrefix(a, tokenPrefix) || len(a) < len(tokenPrefix)+43 {
		t.Errorf("tokens %q and %q: want two different, prefixed, 256-bit tokens", a, b)
	}
	if h := agentpod.TokenHash(a); len(h) != 64 || h == agentpod.TokenHash(b) {
		t.Errorf("agentpod.TokenHash(%q) = %q", a, h)
	}
}

// TestInjects: the provider gets the real key in its header (and none of
// the token), the CLI's path after the credential's prefix, and the
// answer; each refused token is answered 403 and counted, never logged.
func TestInjects(t *testing.T) {
	up := newStandIn(t)
	w := newWorld(t, up)
	token := w.token

	code, body := w.do(t, "/credentials/claude/v1/messages", map[string]string{"x-api-key": token})
	got, path := up.last()
	if code != http.StatusOK || !strings.Contains(body, "input_tokens") {
		t.Fatalf("forwarded: %d %s", code, body)
	}
	if got.Get("x-api-key") != realKey || path != "/v1/messages" {
		t.Errorf("the provider got x-api-key %q on %s; want the real key on /v1/messages", got.Get("x-api-key"), path)
	}

	code, _ = w.do(t, "/credentials/codex/v1/responses", map[string]string{"Authorization": "Bearer " + token, "x-api-key": token})
	got, _ = up.last()
	if code != http.StatusOK || got.Get("Authorization") != "Bearer sk-openai-real" {
		t.Errorf("openai: %d, Authorization %q", code, got.Get("Authorization"))
	}
	for _, h := range up.headers {
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("the provider got the token in %s", k)
				}
			}
		}
	}

	refused := []struct {
		name, path, token, outcome string
	}{
		{"forged", "/credentials/claude/v1/messages", "pcsync-run-forged", outcomeBadToken},
		{"ended run", "/credentials/claude/v1/messages", "pcsync-run-ended", outcomeRunEnded},
		{"the key itself", "/credentials/claude/v1/messages", realKey, outcomeBadToken},
		{"none", "/credentials/claude/v1/messages", "", outcomeBadToken},
	}
	n := len(up.headers)
	for _, tc := range refused {
		if code, body := w.do(t, tc.path, map[string]string{"x-api-key": tc.token}); code != http.StatusForbidden || !strings.Contains(body, tc.outcome) {
			t.Errorf("%s: %d %q; want 403 naming %s", tc.name, code, body, tc.outcome)
		}
		if v := countOf(t, w.reg, "claude", tc.outcome); v == 0 {
			t.Errorf("%s: not counted as %s", tc.name, tc.outcome)
		}
	}
	if code, _ := w.do(t, "/credentials/nope/v1/messages", map[string]string{"x-api-key": token}); code != http.StatusNotFound {
		t.Errorf("unknown credential: %d, want 404", code)
	}
	if len(up.headers) != n {
		t.Errorf("%d refused requests reached the provider", len(up.headers)-n)
	}
	for _, secret := range []string{token, realKey, "sk-openai-real"} {
		if strings.Contains(w.logs.String(), secret) {
			t.Errorf("the log holds a token or key:\n%s", w.logs)
		}
	}
}

// TestRefusedKeyNamesCredential: the provider's 401 reaches the CLI as a
// 403 with an error in Anthropic's format that names acme/claude.
func TestRefusedKeyNamesCredential(t *testing.T) {
	up := newStandIn(t)
	w := newWorld(t, up)
	code, body := w.do(t, "/credentials/claude/refuse", map[string]string{"x-api-key": w.token})
	if code != http.StatusForbidden || !strings.Contains(body, `"type":"authentication_error"`) ||
		!strings.Contains(body, "the credential acme/claude was refused") {
		t.Errorf("got %d %s", code, body)
	}
}

// TestStreams: an event of a streamed response reaches the client while
// the provider still holds the stream open.
func TestStreams(t *testing.T) {
	up := newStandIn(t)
	w := newWorld(t, up)
	req, _ := http.NewRequest(http.MethodPost, w.url+"/credentials/claude/stream", nil)
	req.Header.Set("x-api-key", w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "event: message_start\n" {
			t.Errorf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not pass while the stream was open: the response is buffered")
	}
	up.Release()
}

// TestKeyRotation: a new key in the file is used from the next request.
func TestKeyRotation(t *testing.T) {
	up := newStandIn(t)
	w := newWorld(t, up)
	token := w.token
	for i, key := range []string{realKey, "sk-ant-rotated"} {
		if i > 0 {
			writeKey(t, w.keyFile, key)
		}
		if code, _ := w.do(t, "/credentials/claude/v1/messages", map[string]string{"x-api-key": token}); code != http.StatusOK {
			t.Fatalf("request %d: %d", i, code)
		}
		if got, _ := up.last(); got.Get("x-api-key") != key {
			t.Errorf("request %d: x-api-key %q, want %q", i, got.Get("x-api-key"), key)
		}
	}
}

func TestServes(t *testing.T) {
	tests := []struct {
		req  *http.Request
		want bool
	}{
		{httptest.NewRequest(http.MethodPost, "/credentials/claude/v1/messages", nil), true},
		{httptest.NewRequest(http.MethodGet, "http://example.com/credentials/x", nil), false},
		{&http.Request{Method: http.MethodConnect, URL: &url.URL{Host: "example.com:443"}}, false},
		{httptest.NewRequest(http.MethodGet, "/metrics", nil), false},
	}
	for i, tc := range tests {
		if got := Serves(tc.req); got != tc.want {
			t.Errorf("%d %s %s: Serves %v", i, tc.req.Method, tc.req.URL, got)
		}
	}
}

// countOf is the credential route's request count of credential and
// outcome in reg.
func countOf(t *testing.T, reg *prometheus.Registry, credential, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pcsync_egress_proxy_credential_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["credential"] == credential && labels["outcome"] == outcome && labels["company"] == "acme" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
