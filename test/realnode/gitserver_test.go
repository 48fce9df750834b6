//go:build integration

package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitServer is a Git repository served over HTTP by Git's own `git
// http-backend` (as CGI), on an address of this machine that the real
// node's pods reach (the pod bridge's gateway). The test commits into it.
type gitServer struct {
	t    testing.TB
	url  string // the repository's URL, for GITSYNC_REPO
	work string // a clone the test commits in
	bare string // the served repository
}

// newGitServer serves an empty repository with branch main at
// http://host:<port>/config.git until the test ends.
func newGitServer(t testing.TB, host string) *gitServer {
	t.Helper()
	dir := t.TempDir()
	g := &gitServer{t: t, work: filepath.Join(dir, "work"), bare: filepath.Join(dir, "srv", "config.git")}
	g.git(dir, "init", "-q", "--bare", "-b", "main", g.bare)
	g.git(dir, "init", "-q", "-b", "main", g.work)
	execPath := strings.TrimSpace(g.git(dir, "--exec-path"))
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend (Debian's git): %v", err)
	}
	// The gateway address exists once the node has run a pod: bind freely.
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, syscall.IP_FREEBIND, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("git server: listen on %s: %v", host, err)
	}
	h := &cgi.Handler{Path: backend, Dir: dir,
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(g.bare), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("git server: shutdown: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("git server: %v", err)
		}
	})
	g.url = fmt.Sprintf("http://%s/config.git", ln.Addr())
	return g
}

// commit writes files (by path in the repository) into the work tree,
// commits them and pushes main to the served repository; it returns the
// commit's hash.
func (g *gitServer) commit(msg string, files map[string]string) string {
	g.t.Helper()
	for name, content := range files {
		path := filepath.Join(g.work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.git(g.work, "add", "-A")
	g.git(g.work, "-c", "user.name=pcsync test", "-c", "user.email=test@pcsync.invalid", "commit", "-q", "-m", msg)
	g.git(g.work, "push", "-q", g.bare, "main")
	return strings.TrimSpace(g.git(g.work, "rev-parse", "HEAD"))
}

func (g *gitServer) git(dir string, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
