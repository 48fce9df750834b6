package inject

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// TestKeepsAConnectionPerConcurrentStream: after n streams at once, the
// route's default transport keeps their n connections to the provider,
// so that the next n requests open (next to) none; Go's default keeps 2
// and would open n-2 new TLS connections.
func TestKeepsAConnectionPerConcurrentStream(t *testing.T) {
	const n = 8
	var conns atomic.Int32
	var mu sync.Mutex
	gate := make(chan struct{})
	arrived := make(chan struct{}, n)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		g := gate
		mu.Unlock()
		arrived <- struct{}{}
		<-g // every stream of the wave is open at once
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_stop\ndata: {}\n\n")
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.StartTLS()
	t.Cleanup(up.Close)
	tr := defaultTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	srv, token := claudeRoute(t, up.URL, tr)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var opened [2]int32
	for wave := range opened {
		before := conns.Load()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/credentials/claude/v1/messages", strings.NewReader(`{"stream":true}`))
				req.Header.Set("x-api-key", token)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if !strings.Contains(string(body), "message_stop") {
					errs <- fmt.Errorf("the stream was cut: %q", body)
				}
			})
		}
		for range n {
			<-arrived
		}
		mu.Lock()
		close(gate)
		gate = make(chan struct{})
		mu.Unlock()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", wave, err)
		}
		opened[wave] = conns.Load() - before
	}
	if opened[0] != n || opened[1] > 2 {
		t.Errorf("new connections to the provider: %d for the first %d streams at once, %d for the next %d; want %d, then (next to) none", opened[0], n, opened[1], n, n)
	}
}

// claudeRoute serves, on a test server, the route of one anthropic
// credential ("claude" of company acme, realKey in its key file) to the
// upstream at upstreamURL through tr, and returns the server and the one
// token it takes.
func claudeRoute(t *testing.T, upstreamURL string, tr http.RoundTripper) (*httptest.Server, string) {
	t.Helper()
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "anthropic")
	writeKey(t, keyFile, realKey)
	u, _ := url.Parse(upstreamURL)
	h, err := NewHandler([]Credential{{Name: "claude", Route: adapters.Routes()[adapters.ProviderAnthropic],
		Kind: adapters.KeyAPIKey, Upstream: u, Key: &FileKey{Path: keyFile}}},
		Options{Company: "acme", Tokens: oneToken{token: token}, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, token
}
