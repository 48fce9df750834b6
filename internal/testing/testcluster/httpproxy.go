package testcluster

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// HTTPProxyOptions shape an HTTPProxy.
type HTTPProxyOptions struct {
	// RefuseWebSocket answers every request that asks for a WebSocket
	// upgrade (`Upgrade: websocket`) 403 Forbidden, as a proxy or load
	// balancer that breaks WebSocket upgrades does; every other request,
	// SPDY's upgrade among them, passes.
	RefuseWebSocket bool
	// HoldUpgrades never answers a request that asks for an upgrade
	// (WebSocket or SPDY: every pod exec): it waits until the client gives
	// up or the proxy stops, as an API server or a proxy that hangs does.
	HoldUpgrades bool
	// Seen, when set, is told of each request before the proxy handles
	// it (a test counts what a client asked, by path and query); it must
	// not keep the request.
	Seen func(r *http.Request)
}

// HTTPProxy is a reverse proxy in front of the cluster's API server, on
// plain HTTP at 127.0.0.1: a client reaches it with no credentials (the
// proxy presents the admin's) and it counts the upgrades it sees.
type HTTPProxy struct {
	url  string
	kube string

	mu     sync.Mutex
	counts ProxyCounts
}

// ProxyCounts are the requests an HTTPProxy saw, by upgrade.
type ProxyCounts struct {
	// Requests counts every request.
	Requests int
	// WebSocket counts the requests that asked for a WebSocket upgrade,
	// WebSocketRefused those the proxy refused.
	WebSocket, WebSocketRefused int
	// SPDY counts the requests that asked for a SPDY upgrade,
	// SPDYSwitched those the API server switched (101).
	SPDY, SPDYSwitched int
	// Held counts the upgrades held unanswered (HoldUpgrades), Released
	// those whose client gave up.
	Held, Released int
}

// StartHTTPProxy starts an HTTPProxy in front of the cluster's API server;
// it stops when the test ends.
func (c *Cluster) StartHTTPProxy(t testing.TB, o HTTPProxyOptions) *HTTPProxy {
	t.Helper()
	p := &HTTPProxy{}
	rp := c.reverseProxy(t, p)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("HTTP proxy: %v", err)
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: p.handler(o, rp, stop)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(stop)
		_ = srv.Close()
	})
	p.url = "http://" + ln.Addr().String()

	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.url}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	p.kube = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.kube); err != nil {
		t.Fatalf("HTTP proxy: kubeconfig: %v", err)
	}
	return p
}

// reverseProxy forwards to the API server with the cluster's credentials,
// counting in p the SPDY upgrades it switched.
func (c *Cluster) reverseProxy(t testing.TB, p *HTTPProxy) *httputil.ReverseProxy {
	t.Helper()
	cfg := c.RESTConfig()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("HTTP proxy: API server URL %q: %v", cfg.Host, err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatalf("HTTP proxy: %v", err)
	}
	// HTTP/1.1 only (a TLS config of its own turns HTTP/2 off): an
	// upgrade needs it.
	tr := &http.Transport{TLSClientConfig: tlsCfg, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	rt, err := rest.HTTPWrappersForConfig(cfg, tr)
	if err != nil {
		t.Fatalf("HTTP proxy: %v", err)
	}
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1, // watches and log follows stream
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols && isUpgrade(resp.Request.Header, "spdy/") {
				p.count(func(c *ProxyCounts) { c.SPDYSwitched++ })
			}
			return nil
		},
	}
}

// handler counts each request, refuses or holds upgrades as o says (a
// held one until its client gives up or stop closes), and passes the
// rest to rp.
func (p *HTTPProxy) handler(o HTTPProxyOptions, rp *httputil.ReverseProxy, stop <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if o.Seen != nil {
			o.Seen(r)
		}
		ws, spdy := isUpgrade(r.Header, "websocket"), isUpgrade(r.Header, "spdy/")
		refuse := ws && o.RefuseWebSocket
		p.count(func(c *ProxyCounts) {
			c.Requests++
			switch {
			case ws:
				c.WebSocket++
				if refuse {
					c.WebSocketRefused++
				}
			case spdy:
				c.SPDY++
			}
		})
		if refuse {
			http.Error(w, "this proxy refuses WebSocket upgrades", http.StatusForbidden)
			return
		}
		if (ws || spdy) && o.HoldUpgrades {
			p.count(func(c *ProxyCounts) { c.Held++ })
			select {
			case <-r.Context().Done():
				p.count(func(c *ProxyCounts) { c.Released++ })
			case <-stop:
			}
			return
		}
		rp.ServeHTTP(w, r)
	}
}

// isUpgrade says whether h asks for an upgrade to a protocol whose name
// starts with prefix (lower case).
func isUpgrade(h http.Header, prefix string) bool {
	for _, v := range h.Values("Upgrade") {
		for _, p := range strings.Split(v, ",") {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), prefix) {
				return true
			}
		}
	}
	return false
}

func (p *HTTPProxy) count(f func(*ProxyCounts)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.counts)
}

// URL returns the proxy's URL, http://127.0.0.1:<port>.
func (p *HTTPProxy) URL() string { return p.url }

// RESTConfig returns a client configuration that reaches the API server
// through the proxy, with no credentials of its own.
func (p *HTTPProxy) RESTConfig() *rest.Config {
	return &rest.Config{Host: p.url, QPS: 100, Burst: 200}
}

// KubeconfigPath returns a kubeconfig file of the proxy (RESTConfig's).
func (p *HTTPProxy) KubeconfigPath() string { return p.kube }

// Counts returns what the proxy saw so far.
func (p *HTTPProxy) Counts() ProxyCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// String describes the counts, for a test's failure message.
func (c ProxyCounts) String() string {
	return fmt.Sprintf("%d requests; WebSocket upgrades %d (%d refused); SPDY upgrades %d (%d switched); upgrades held %d (%d given up)",
		c.Requests, c.WebSocket, c.WebSocketRefused, c.SPDY, c.SPDYSwitched, c.Held, c.Released)
}
