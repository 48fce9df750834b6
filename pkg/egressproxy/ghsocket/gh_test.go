package ghsocket_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/internal/testing/testgithub"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/internal/testing/testtool"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/egressproxy"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/egressproxy/ghsocket"
	"github.com/pcsync/pcsync/pkg/egressproxy/inject"
)

// realToken is the GitHub token the proxy holds.
const realToken = "ghp_hostGitHubTokenHeldByTheProxy0123456789"

// runTokens takes token from loopback, and names ended as an ended run's.
type runTokens struct{ token, ended string }

func (v runTokens) Verify(token string, _ netip.Addr) (run, why string) {
	switch token {
	case v.token:
		return "run-1", ""
	case v.ended:
		return "", inject.OutcomeRunEnded
	}
	return "", inject.OutcomeBadToken
}

// proxyWithGitHub serves pcsync's egress proxy on loopback with a GitHub
// credential "gh" for github.com, whose API is up (reached at its
// listener's address, its CA trusted); it returns the proxy's address.
func proxyWithGitHub(t *testing.T, up http.Handler, tokens runTokens, logs io.Writer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, caPEM, err := testnet.ServeHTTPSPEM(ln, []string{"api.github.com", "github.com"}, up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
		}}
	keyFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(keyFile, []byte(realToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	h, err := inject.NewHandler([]inject.Credential{{Name: "gh", Route: adapters.Route{Provider: adapters.ProviderGitHub},
		Upstream: &url.URL{Scheme: "https", Host: "github.com"}, Key: &inject.FileKey{Path: keyFile}, GitHub: inject.NewGitHub("github.com")}},
		inject.Options{Company: "acme", Tokens: tokens, Transport: tr, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	p, err := egressproxy.New(allow.List{Company: "acme"}, egressproxy.Options{Credentials: h, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, pln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return pln.Addr().String()
}

// TestRealGitHubCLI: the real gh (hack/gh/build.sh), its config written
// by the forwarder, calls GitHub's REST and GraphQL APIs through the
// forwarder and pcsync's egress proxy's credential route: the stand-in
// gets the real token on each request, gh held only the run's. A host
// that is not the credential's is refused with the forwarder's message, an
// ended run's token with the proxy's; without the forwarder's config the
// same gh call fails (the control: gh reaches GitHub only through it).
func TestRealGitHubCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gh, err := testtool.Binary(ctx, "../../..", "gh")
	if err != nil {
		t.Fatal(err)
	}
	up := &testgithub.API{Token: realToken}
	logs := &lockedbuf.Buffer{}
	tokens := runTokens{token: "pcsync-run-gh-test-0123456789", ended: "pcsync-run-ended-0123456789"}
	proxy := proxyWithGitHub(t, up, tokens, logs)
	home := t.TempDir()
	start := func(name, token string) string {
		dir := filepath.Join(home, name)
		_, err := ghsocket.Start(ctx, ghsocket.Options{Dir: dir, Target: ghsocket.Target{
			Route: &url.URL{Scheme: "http", Host: proxy, Path: inject.PathPrefix + "gh/"}, Host: "github.com", Token: token}})
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, gh, args...)
		// A pod's env: the proxy variables (which gh must not need) and
		// the run's token.
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "GH_CONFIG_DIR=" + dir, "GH_TOKEN=" + tokens.token,
			"https_proxy=http://coder@127.0.0.2:9", "HTTPS_PROXY=http://coder@127.0.0.2:9", "GH_NO_UPDATE_NOTIFIER=1"}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	dir := start("gh", tokens.token)
	var got []string
	for _, args := range [][]string{
		{"api", "/repos/acme/repo", "--jq", ".full_name"},
		{"api", "graphql", "-f", "query=query { viewer { login } }", "--jq", ".data.viewer.login"},
	} {
		out, err := run(dir, args...)
		if err != nil {
			t.Fatalf("gh %v: %v\n%s", args, err, out)
		}
		got = append(got, out)
	}
	if diff := cmp.Diff([]string{"acme/repo", "octocat"}, got); diff != "" {
		t.Errorf("gh's answers (-want +got):\n%s", diff)
	}
	want := []string{"GET api.github.com /repos/acme/repo Bearer " + realToken, "POST api.github.com /graphql Bearer " + realToken}
	if diff := cmp.Diff(want, up.Requests()); diff != "" {
		t.Errorf("GitHub got (-want +got):\n%s", diff)
	}
	refusals := []struct{ name, dir, want string }{
		{"another host", dir, "pcsync: this GitHub CLI reaches only github.com through the egress proxy's credential route, not other.example (HTTP 421)"},
		{"an ended run's token", start("ended", tokens.ended), "token refused for credential acme/gh: run_ended"},
		{"no forwarder's config", filepath.Join(home, "plain"), "Get \"https://api.github.com/repos/acme/repo\": proxyconnect tcp"},
	}
	for _, r := range refusals {
		args := []string{"api", "/repos/acme/repo"}
		if r.name == "another host" {
			args = append(args, "--hostname", "other.example")
		}
		out, err := run(r.dir, args...)
		t.Logf("%s: %s", r.name, out)
		if err == nil || !strings.Contains(out, r.want) {
			t.Errorf("%s: gh %v: %v\n%s\nwant a failure saying %q", r.name, args, err, out, r.want)
		}
	}
	if n := len(up.Requests()); n != 2 {
		t.Errorf("GitHub got %d requests, want only the 2 let through", n)
	}
	for _, s := range []string{realToken, tokens.token} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the proxy's log holds a token")
		}
	}
	err = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), realToken) {
			t.Errorf("%s holds the real token", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
