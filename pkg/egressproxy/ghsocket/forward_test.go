package ghsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const runToken = "pcsync-run-0123456789abcdef"

// route stands in for the proxy's credential route: it records each
// request (method, path as sent, Authorization, body) and answers 200
// with "ok".
type route struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRoute(t *testing.T) *route {
	t.Helper()
	r := &route{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, strings.Join([]string{req.Method, req.URL.RequestURI(), req.Header.Get("Authorization"), string(body)}, " "))
		r.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *route) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func (r *route) target(t *testing.T, host string) Target {
	t.Helper()
	u, err := url.Parse(r.srv.URL + "/credentials/gh/")
	if err != nil {
		t.Fatal(err)
	}
	return Target{Route: u, Host: host, Token: runToken}
}

// TestForward: each of gh's requests goes to its segment of the route
// with the run's token in place of gh's Authorization, the rest of its
// path and query kept as sent; a host that is not the credential's is
// refused with a message naming it, and reaches nothing.
func TestForward(t *testing.T) {
	tests := []struct {
		name, host, method, url, body string
		code                          int
		seen                          string // what the route got; "" nothing
		message                       string // the refusal's message, in part
	}{
		{name: "REST", host: "github.com", method: "GET", url: "https://api.github.com/repos/acme/repo?per_page=1",
			code: 200, seen: "GET /credentials/gh/api/repos/acme/repo?per_page=1 Bearer " + runToken + " "},
		{name: "REST root", host: "github.com", method: "GET", url: "https://api.github.com/",
			code: 200, seen: "GET /credentials/gh/api/ Bearer " + runToken + " "},
		{name: "an escaped path", host: "github.com", method: "GET", url: "https://api.github.com/repos/acme/repo/contents/a%2Fb",
			code: 200, seen: "GET /credentials/gh/api/repos/acme/repo/contents/a%2Fb Bearer " + runToken + " "},
		{name: "GraphQL", host: "github.com", method: "POST", url: "https://api.github.com/graphql", body: `{"query":"{viewer{login}}"}`,
			code: 200, seen: "POST /credentials/gh/graphql Bearer " + runToken + ` {"query":"{viewer{login}}"}`},
		{name: "git", host: "github.com", method: "GET", url: "https://github.com/acme/repo.git/info/refs?service=git-upload-pack",
			code: 200, seen: "GET /credentials/gh/git/acme/repo.git/info/refs?service=git-upload-pack Bearer " + runToken + " "},
		{name: "uploads", host: "github.com", method: "POST", url: "https://uploads.github.com/repos/acme/repo/releases/1/assets", body: "x",
			code: 421, message: "reaches only github.com through the egress proxy's credential route, not uploads.github.com"},
		{name: "another host", host: "github.com", method: "GET", url: "https://evil.example/x",
			code: 421, message: "not evil.example"},
		{name: "Enterprise REST", host: "ghe.example.com", method: "GET", url: "https://ghe.example.com/api/v3/user",
			code: 200, seen: "GET /credentials/gh/api/user Bearer " + runToken + " "},
		{name: "Enterprise GraphQL", host: "ghe.example.com", method: "POST", url: "https://ghe.example.com/api/graphql", body: "{}",
			code: 200, seen: "POST /credentials/gh/graphql Bearer " + runToken + " {}"},
		{name: "Enterprise git", host: "ghe.example.com", method: "GET", url: "https://ghe.example.com/acme/repo.git/info/refs",
			code: 200, seen: "GET /credentials/gh/git/acme/repo.git/info/refs Bearer " + runToken + " "},
		{name: "Enterprise with a port", host: "ghe.example.com:8443", method: "GET", url: "https://ghe.example.com:8443/api/v3/user",
			code: 200, seen: "GET /credentials/gh/api/user Bearer " + runToken + " "},
		{name: "Enterprise uploads", host: "ghe.example.com", method: "POST", url: "https://ghe.example.com/api/uploads/repos/acme/repo/releases/1/assets",
			code: 421, message: "serves its REST API (/api/v3) and GraphQL (/api/graphql), not /api/uploads/"},
		{name: "Enterprise, github.com's API", host: "ghe.example.com", method: "GET", url: "https://api.github.com/user",
			code: 421, message: "reaches only ghe.example.com"},
	}
	up := newRoute(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwarder(up.target(t, tc.host))
			if err != nil {
				t.Fatal(err)
			}
			before := len(up.requests())
			req := httptest.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "token gh-sent-this")
			w := httptest.NewRecorder()
			f.ServeHTTP(w, req)
			var seen, message string
			if reqs := up.requests(); len(reqs) > before {
				seen = reqs[len(reqs)-1]
			}
			if w.Code != 200 {
				var e struct{ Message string }
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
					t.Errorf("the refusal is not GitHub's JSON error: %q", w.Body)
				}
				message = e.Message
			}
			if diff := cmp.Diff([]any{tc.code, tc.seen, true}, []any{w.Code, seen, strings.Contains(message, tc.message)}); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage %q", diff, message)
			}
		})
	}
}

// TestForwardStreams: the route's answer reaches gh as it is written: the
// first part is read while the route still holds the rest.
func TestForwardStreams(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second\n")
	}))
	t.Cleanup(up.Close)
	defer close(release)
	u, _ := url.Parse(up.URL + "/credentials/gh/")
	f, err := NewForwarder(Target{Route: u, Host: "github.com", Token: runToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/repos/acme/repo", nil)
	req.Host = "api.github.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("the first part before the route finished: %q, %v", line, err)
	}
}

// TestServe: Start writes gh's config naming its socket, and a client
// that dials the socket for https://api.github.com, as gh does, reaches
// the route; a second Start leaves the socket to the first (ErrServed);
// the route's absence is an error gh prints, naming it; after Close, a
// Start replaces the stale socket a killed process would leave.
func TestServe(t *testing.T) {
	up := newRoute(t)
	dir := filepath.Join(t.TempDir(), "gh")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := []string{EnvRoute + "=" + up.srv.URL + "/credentials/gh/", EnvConfigDir + "=" + dir, EnvToken + "=" + runToken}
	opts, ok, err := FromEnv(env)
	if err != nil || !ok {
		t.Fatalf("FromEnv: %v %v", ok, err)
	}
	srv, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("version: \"1\"\nhttp_unix_socket: "+filepath.Join(dir, SocketName)+"\n", string(conf)); diff != "" {
		t.Errorf("gh's config (-want +got):\n%s", diff)
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.Socket)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: dial, DialTLSContext: dial, DisableKeepAlives: true}}
	get := func() (int, string) {
		resp, err := c.Get("https://api.github.com/user")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "ok" {
		t.Errorf("through the socket: %d %q", code, body)
	}
	if diff := cmp.Diff([]string{"GET /credentials/gh/api/user Bearer " + runToken + " "}, up.requests()); diff != "" {
		t.Errorf("the route got (-want +got):\n%s", diff)
	}
	if _, err := Start(ctx, opts); !errors.Is(err, ErrServed) {
		t.Errorf("a second Start on a socket that answers: %v, want ErrServed", err)
	}
	if code, body := get(); code != 200 || body != "ok" {
		t.Errorf("after a second Start: %d %q", code, body)
	}
	up.srv.Close()
	if code, body := get(); code != http.StatusBadGateway || !strings.Contains(body, "the credential route "+up.srv.URL+"/credentials/gh/ did not answer") {
		t.Errorf("the route gone: %d %q", code, body)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(srv.Socket); !os.IsNotExist(err) {
		t.Errorf("the socket after Close: %v", err)
	}
	// A killed forwarder's socket: the file, no listener.
	ln, err := net.Listen("unix", srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	again, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start over a stale socket: %v", err)
	}
	defer again.Close()
	if code, _ := get(); code != http.StatusBadGateway {
		t.Errorf("through the new socket (the route gone): %d, want 502", code)
	}
}

// TestFromEnv: no route, no Forwarder; a route without the directory or
// the token is an error naming the variable.
func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		ok   bool
		err  string
	}{
		{"none", []string{"GH_TOKEN=x"}, false, ""},
		{"whole", []string{EnvRoute + "=http://10.0.0.1:3128/credentials/gh/", EnvConfigDir + "=/tmp/g", EnvToken + "=t", EnvHost + "=ghe.example.com"}, true, ""},
		{"no directory", []string{EnvRoute + "=http://10.0.0.1:3128/credentials/gh/", EnvToken + "=t"}, true, "GH_CONFIG_DIR is not"},
		{"no token", []string{EnvRoute + "=http://10.0.0.1:3128/credentials/gh/", EnvConfigDir + "=/tmp/g"}, true, "GH_TOKEN is not"},
		{"no trailing slash", []string{EnvRoute + "=http://10.0.0.1:3128/credentials/gh", EnvConfigDir + "=/tmp/g", EnvToken + "=t"}, true, "want http://<proxy>:<port>/credentials/<name>/"},
	}
	for _, tc := range tests {
		_, ok, err := FromEnv(tc.env)
		var msg string
		if err != nil {
			msg = err.Error()
		}
		if ok != tc.ok || !strings.Contains(msg, tc.err) || (tc.err == "") != (err == nil) {
			t.Errorf("%s: ok %v, error %v; want %v, %q", tc.name, ok, err, tc.ok, tc.err)
		}
	}
}
