package inject

import (
	"crypto/tls"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/adapters"
)

const ghToken = "ghp_real-token-held-by-the-proxy"

// gitHubStandIn is GitHub on loopback (TLS): git's smart HTTP served by
// git http-backend under /, which refuses a request without the token in
// Basic (as github.com does a push), and the APIs under /api/v3 and
// /api/graphql; it records each request's path and Authorization.
type gitHubStandIn struct {
	srv  *httptest.Server
	bare string
	mu   sync.Mutex
	seen []string // "path Authorization"
}

func newGitHubStandIn(t testing.TB) *gitHubStandIn {
	t.Helper()
	dir := t.TempDir()
	g := &gitHubStandIn{bare: filepath.Join(dir, "acme", "repo.git")}
	runGit(t, dir, "init", "-q", "--bare", "-b", "main", g.bare)
	runGit(t, g.bare, "config", "http.receivepack", "true")
	backend := filepath.Join(strings.TrimSpace(runGit(t, dir, "--exec-path")), "git-http-backend")
	git := &cgi.Handler{Path: backend, Dir: dir, Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"}}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ghToken))
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.seen = append(g.seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		g.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			if r.Header.Get("Authorization") != "Bearer "+ghToken {
				http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
				return
			}
			_, _ = io.WriteString(w, `{"login":"octocat"}`)
		case r.Header.Get("Authorization") != basic:
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "token required", http.StatusUnauthorized)
		default:
			git.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gitHubStandIn) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// gitHubRoute serves a Handler with credential "gh" (GitHub, toward up)
// on loopback; it returns the route's URL and the run's token.
func gitHubRoute(t testing.TB, up *gitHubStandIn) (route, token string, logs *lockedbuf.Buffer, reg *prometheus.Registry) {
	t.Helper()
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "gh")
	if err := os.WriteFile(keyFile, []byte(ghToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.srv.URL)
	gh := NewGitHub(u.Host)
	tr := up.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs}
	logs, reg = &lockedbuf.Buffer{}, prometheus.NewRegistry()
	h, err := NewHandler([]Credential{{Name: "gh", Route: adapters.Route{Provider: adapters.ProviderGitHub}, Upstream: u,
		Key: &FileKey{Path: keyFile}, GitHub: gh}},
		Options{Company: "acme", Tokens: oneToken{token: token, ended: "pcsync-run-ended"}, Transport: tr, Registerer: reg,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + PathPrefix + "gh/", token, logs, reg
}

// gitEnv is a git client's environment that sends https://<up>/ to the
// route with the token, as agentenv gives a pod's, beside a proxy (whose
// URL names the agent, as a pod's does) that the route is not reached by.
func gitEnv(dir, route, upstream, token string) []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"http_proxy=http://coder@127.0.0.2:9", "https_proxy=http://coder@127.0.0.2:9", "GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=url."+route+GitHubGit+"/.insteadOf", "GIT_CONFIG_VALUE_0="+upstream+"/",
		"GIT_CONFIG_KEY_1=http."+route+GitHubGit+"/.proxy", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=http."+route+GitHubGit+"/.extraHeader", "GIT_CONFIG_VALUE_2=Authorization: Bearer "+token)
}

// TestGitThroughTheRoute: git clone and git push of https://<GitHub>/…
// through the route with the run's token: GitHub gets the real token in
// Basic on every request, never the run's; a push lands.
func TestGitThroughTheRoute(t *testing.T) {
	up := newGitHubStandIn(t)
	route, token, logs, _ := gitHubRoute(t, up)
	dir := t.TempDir()
	git := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	env := gitEnv(dir, route, up.srv.URL, token)
	if out, err := git(env, "clone", "-q", up.srv.URL+"/acme/repo.git", "work"); err != nil {
		t.Fatalf("git clone through the route: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "work", "a.txt"), []byte("from the agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "a.txt"}, {"-c", "user.name=a", "-c", "user.email=a@x.invalid", "commit", "-qm", "a"},
		{"push", "-q", "origin", "HEAD:main"}} {
		if out, err := git(env, append([]string{"-C", "work"}, args...)...); err != nil {
			t.Fatalf("git %v through the route: %v\n%s", args, err, out)
		}
	}
	if got := runGit(t, up.bare, "log", "-1", "--format=%s", "main"); got != "a\n" {
		t.Errorf("the pushed commit on the server: %q", got)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ghToken))
	reqs := up.requests()
	for _, r := range reqs {
		if !strings.HasSuffix(r, " "+basic) || strings.Contains(r, token) {
			t.Errorf("GitHub got %q; want the real token in Basic, never the run's", r)
		}
	}
	if len(reqs) < 4 {
		t.Errorf("GitHub got %d requests, want clone's and push's", len(reqs))
	}
	// The control: without the route's header, the same clone is refused.
	bare := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir, "GIT_TERMINAL_PROMPT=0",
		"GIT_SSL_NO_VERIFY=1")
	if out, err := git(bare, "clone", "-q", up.srv.URL+"/acme/repo.git", "direct"); err == nil {
		t.Errorf("a clone straight to GitHub without a token succeeded:\n%s", out)
	}
	for _, secret := range []string{token, ghToken} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the route's log holds a token:\n%s", logs)
		}
	}
}

// TestGitHubRoute: each segment goes to its upstream with the token as
// it expects it, whichever way the client sent the run's; a refused token
// reaches nothing.
func TestGitHubRoute(t *testing.T) {
	up := newGitHubStandIn(t)
	route, token, _, reg := gitHubRoute(t, up)
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, path, auth string
		code             int
		seen             string // the upstream's request; "" none
	}{
		{"REST, token scheme", "api/user", "token " + token, 200, "/api/v3/user Bearer " + ghToken},
		{"REST, Bearer", "api/repos/acme/repo", "Bearer " + token, 200, "/api/v3/repos/acme/repo Bearer " + ghToken},
		{"GraphQL", "graphql", "bearer " + token, 200, "/api/graphql Bearer " + ghToken},
		{"git, Basic", "git/acme/repo.git/info/refs?service=git-upload-pack", basic("x-access-token", token), 200,
			"/acme/repo.git/info/refs " + basic("x-access-token", ghToken)},
		{"forged", "api/user", "Bearer pcsync-run-forged", 403, ""},
		{"ended run", "git/acme/repo.git/info/refs", basic("x", "pcsync-run-ended"), 403, ""},
		{"the real token", "api/user", "token " + ghToken, 403, ""},
		{"none", "git/acme/repo.git/info/refs", "", 403, ""},
		{"no segment", "user", "token " + token, 404, ""},
		{"under graphql", "graphql/x", "token " + token, 404, ""},
	}
	for _, tc := range tests {
		before := len(up.requests())
		req, _ := http.NewRequest(http.MethodGet, route+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		var seen string
		if reqs := up.requests(); len(reqs) > before {
			seen = reqs[len(reqs)-1]
		}
		if diff := cmp.Diff([]any{tc.code, tc.seen}, []any{resp.StatusCode, seen}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if n := countOf(t, reg, "gh", outcomeRunEnded); n != 1 {
		t.Errorf("run_ended counted %v times, want 1", n)
	}
}
