//go:build integration

package realnode

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testgithub"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/tokensync"
)

// gitToken is the GitHub token of the tests' github credential: in the
// tenant's Secret, and nowhere an agent can read it.
const gitToken = "ghp_realnodeGitHubTokenHeldByTheProxy0123456789"

// gitHubHosts are the names the test's GitHub stands in for, and the
// header credential's API (headerHost): the proxy pod resolves them to it
// (hostAliases) and trusts its CA.
var gitHubHosts = []string{"github.com", "api.github.com", headerHost}

// The tests' header credential: an API of its own at headerHost (served
// by the GitHub stand-in), its key in the tenant's Secret, which the
// proxy sends in X-Registry-Token after the scheme Token.
const (
	headerHost = "registry.example.com"
	headerKey  = "rk_realnodeRegistryKeyHeldByTheProxy0123456789"
)

// gitHubServer is GitHub's git over HTTPS, of the test's own: git
// http-backend (as CGI) serving acme/repo.git, which answers only a
// request with the token in Basic, as github.com answers a private
// repository. Each request's Authorization is recorded.
type gitHubServer struct {
	g    *gitServer // the repository and a clone the test commits in
	root string
	mu   sync.Mutex
	auth []string
	// api answers api.github.com (the GitHub CLI's requests).
	api testgithub.API
	// header: each request to headerHost, its path and X-Registry-Token.
	header [][2]string
}

// newGitHubServer makes the repository, with a first commit of files.
func newGitHubServer(tb testing.TB, files map[string]string) *gitHubServer {
	tb.Helper()
	dir := tb.TempDir()
	s := &gitHubServer{root: filepath.Join(dir, "srv"),
		g: &gitServer{t: tb, work: filepath.Join(dir, "work"), bare: filepath.Join(dir, "srv", "acme", "repo.git")}}
	s.g.git(dir, "init", "-q", "--bare", "-b", "main", s.g.bare)
	s.g.git(s.g.bare, "config", "http.receivepack", "true")
	s.g.git(dir, "init", "-q", "-b", "main", s.g.work)
	s.g.commit("first", files)
	return s
}

func (s *gitHubServer) handler(tb testing.TB) http.Handler {
	execPath := strings.TrimSpace(s.g.git(s.root, "--exec-path"))
	git := &cgi.Handler{Path: filepath.Join(execPath, "git-http-backend"), Dir: s.root,
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+gitToken))
	s.api.Token = gitToken
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "api.github.com" {
			s.api.ServeHTTP(w, r)
			return
		}
		if r.Host == headerHost {
			s.mu.Lock()
			s.header = append(s.header, [2]string{r.URL.Path, r.Header.Get("X-Registry-Token")})
			s.mu.Unlock()
			_, _ = io.WriteString(w, "registry answered "+r.URL.Path+"\n")
			return
		}
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		git.ServeHTTP(w, r)
	})
}

// headerRequests returns each request to headerHost: its path and
// X-Registry-Token, in order.
func (s *gitHubServer) headerRequests() [][2]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][2]string(nil), s.header...)
}

// requests returns each request's Authorization, in order.
func (s *gitHubServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// gitCredEnv is a company in egress mode proxy with a github credential,
// its proxy on the real node, the GitHub stand-in in the test's network
// namespace, and pcsync's Kubernetes executor running its runs.
type gitCredEnv struct {
	c        *testcluster.Cluster
	node     *testcluster.RealNode
	tn       *testnet.Net
	ns, slug string
	caPEM    string
	server   *gitHubServer
	runs     *proxyBenchEnv
	proxyPod *corev1.Pod
	model    *config.Model
	addrs    *agentenv.Addresses
}

// newGitCredEnv builds it (files: the repository's first commit); policy,
// when set, runs once the tenant is applied, before any run starts.
func newGitCredEnv(ctx context.Context, tb testing.TB, files map[string]string, policy func(e *gitCredEnv)) *gitCredEnv {
	tb.Helper()
	c := testcluster.Get(tb)
	e := &gitCredEnv{c: c, node: c.RealNode(), server: newGitHubServer(tb, files)}
	if !e.node.NetworkPolicy() {
		tb.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	p := pushImages(tb)
	e.ns = c.Namespace(tb, "git", nil)
	i := strings.LastIndexByte(e.ns, '-')
	e.slug = e.ns[i+1:]
	e.tn = newTestNet(ctx, tb)
	ln, err := e.tn.Listen("tcp4", testnet.PublicAddress+":443")
	if err != nil {
		tb.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, gitHubHosts, e.server.handler(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	e.caPEM = string(caPEM)
	e.create(ctx, tb,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github"}, StringData: map[string]string{"token": gitToken}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry"}, StringData: map[string]string{"key": headerKey}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-ca"}, Data: map[string]string{"ca.pem": e.caPEM}})
	m := e.writeConfig(tb, tb.TempDir(), e.ns[:i+1], p)
	e.model = m
	applyTenant(ctx, tb, c, m)
	if policy != nil {
		policy(e)
	}
	e.proxyPod = waitRunning(ctx, tb, c, e.ns, agentpod.LabelRole+"="+agentpod.RoleEgressProxy)
	if err := e.tn.Forward(e.node.PodBridge()); err != nil {
		tb.Fatal(err)
	}
	if err := e.tn.CheckRoute(ctx, testnet.PublicAddress); err != nil {
		tb.Fatalf("send nothing: %v", err)
	}
	addrs := agentenv.NewAddresses(c.Client())
	if err := addrs.Start(ctx, time.Minute); err != nil {
		tb.Fatal(err)
	}
	e.addrs = addrs
	if err := tokensync.New(c.Client(), tokensync.Options{}).Run(ctx); err != nil {
		tb.Fatal(err)
	}
	e.runs = &proxyBenchEnv{c: c, spool: tb.TempDir()}
	e.runs.serve(tb, m, addrs)
	return e
}

func (e *gitCredEnv) create(ctx context.Context, tb testing.TB, objs ...any) {
	tb.Helper()
	cs := e.c.Client()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(e.ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(e.ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// writeConfig writes and loads the config: the company with its github
// and header credentials, an agent of two runs at once with room for git (up to a
// core), the proxy on the real node resolving GitHub's names to the
// stand-in and trusting its CA.
func (e *gitCredEnv) writeConfig(tb testing.TB, dir, prefix string, p pushed) *config.Model {
	tb.Helper()
	pl := placementOf(e.node)
	settings := testSettings(prefix, p.Registry, e.node, "{cpu: '1', memory: 512Mi}")
	company := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: %q}
spec:
  id: company-%s
  credentials:
    - {name: github, provider: github, secretRef: {name: github, key: token}}
    - name: registry
      provider: header
      secretRef: {name: registry, key: key}
      gatewayUrl: https://%s/v2
      header: {name: X-Registry-Token, scheme: Token, urlEnv: REGISTRY_URL, tokenEnv: REGISTRY_TOKEN}
  agents:
%s  patches:
%s`, e.slug, e.slug, headerHost, pl.Agent("name: pinned, adapter: claude_local, concurrency: 2"), proxyPatch(pl, gitHubHosts, true, ""))
	for name, text := range map[string]string{"settings.yaml": settings, "company.yaml": company} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	m, err := loadConfig(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// startRun starts a run (a stand-in CLI that sleeps) and returns its pod
// once it runs, firewalled, and routes to the stand-in.
func (e *gitCredEnv) startRun(ctx context.Context, tb testing.TB, name string) *corev1.Pod {
	tb.Helper()
	e.runs.drop(tb, e.slug, name)
	pod := waitRunning(ctx, tb, e.c, e.ns, agentpod.LabelRunID+"="+name)
	for _, p := range []*corev1.Pod{e.proxyPod, pod} {
		if err := e.node.WaitFirewalled(ctx, e.ns, p.Name); err != nil {
			tb.Fatal(err)
		}
		if err := e.tn.CheckRouteFrom(ctx, testnet.PublicAddress, p.Status.PodIP, e.node.PodBridge()); err != nil {
			tb.Fatalf("send nothing: %v", err)
		}
	}
	return pod
}

// sh runs script in pod's agent container with args ($1…) and returns its
// standard output.
func (e *gitCredEnv) sh(ctx context.Context, pod *corev1.Pod, script string, args ...string) (string, error) {
	return podExec(ctx, e.c, e.ns, pod.Name, pod.Spec.Containers[0].Name, append([]string{"sh", "-c", script, "sh"}, args...))
}

// untilOK runs script until it succeeds (the proxy's Service is
// programmed, and the run's token reaches the proxy's annotations file, a
// moment after the pod runs), for up to a minute.
func (e *gitCredEnv) untilOK(ctx context.Context, tb testing.TB, pod *corev1.Pod, script string, args ...string) string {
	tb.Helper()
	var out string
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if out, err = e.sh(ctx, pod, script, args...); err == nil {
			return out
		}
	}
	tb.Fatalf("in %s: %v\n%s", pod.Name, err, out)
	return ""
}

// randomFiles are n files of size bytes each, of random (incompressible)
// content.
func randomFiles(n, size int) map[string]string {
	files := map[string]string{}
	raw := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(raw)
		files[fmt.Sprintf("data/%03d.bin", i)] = string(raw)
	}
	return files
}
