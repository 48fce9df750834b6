// Package paperclipserver starts the real Paperclip server (paperclipai from
// npm, with its embedded Postgres) for integration tests: local_trusted mode
// on loopback, its data in a directory of its own and on free ports of its
// own (HTTP and Postgres), so that instances never collide. It installs
// nothing: the install directory comes from Options.Install,
// PCSYNC_PAPERCLIP_DIR or the cache that hack/paperclip/install.sh fills.
// pkg/paperclip's integration tests and the end-to-end tests of
// test/e2e/paperclip both start their servers here.
//
// Node dies with the test binary (Pdeathsig); the embedded Postgres it
// started would not, so a small reaper process outlives the test binary and
// stops the server's process group when the test binary dies without Stop.
package paperclipserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
)

// Version is the paperclipai version the tests run.
const Version = "2026.916.1"

// Options configure Start.
type Options struct {
	// Install is the directory holding node_modules/.bin/paperclipai.
	// Default $PCSYNC_PAPERCLIP_DIR, else the install cache.
	Install string
	// NodeBin is the directory of Node >= 24.11. Default: hack/node/install.sh's.
	NodeBin string
	// Dir is the data directory; default a new world-traversable temporary
	// directory, removed by Stop.
	Dir string
	// StartTimeout bounds the wait for /api/health: a bound for a hung
	// server, not a timed assertion (on a loaded 2-core machine Paperclip
	// took over 4 minutes to start). Default 10m.
	StartTimeout time.Duration
	// Init runs the server as the command of this init (its arguments
	// before the server's), as a container's PID 1 would: one that reaps
	// the orphans the server's children leave at once (the local-process
	// provider's callback bridge, which the benchmarks' floor waits for; a
	// test machine's own PID 1 may reap them seconds later). Default
	// `tini -s --` when tini is on PATH, else none. "-" means none.
	Init []string
}

// Server is a running Paperclip server.
type Server struct {
	// URL is the API's base URL (http://127.0.0.1:<port>).
	URL          string
	Port, DBPort int
	Dir          string

	opts   Options
	cmd    *exec.Cmd
	done   chan error
	reaper *exec.Cmd
	out    *lockedbuf.Buffer
	ownDir bool
}

// DefaultInstall is the install cache that hack/paperclip/install.sh fills
// (as root; otherwise under the user's cache).
func DefaultInstall() string {
	if d := os.Getenv("PCSYNC_PAPERCLIP_DIR"); d != "" {
		return d
	}
	key := "paperclipai-" + Version + "_playwright-1.65.1_r1"
	if os.Geteuid() == 0 {
		return filepath.Join("/var/cache/pcsync/paperclip", key)
	}
	c, err := os.UserCacheDir()
	if err != nil {
		c = os.TempDir()
	}
	return filepath.Join(c, "pcsync", "paperclip", key)
}

// Start prepares a data directory and starts the server; it returns once
// /api/health answers.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Install == "" {
		opts.Install = DefaultInstall()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Minute
	}
	if opts.Init == nil {
		if tini, err := exec.LookPath("tini"); err == nil {
			opts.Init = []string{tini, "-s", "--"}
		}
	}
	if len(opts.Init) == 1 && opts.Init[0] == "-" {
		opts.Init = nil
	}
	bin := filepath.Join(opts.Install, "node_modules", ".bin", "paperclipai")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("paperclipai %s is not installed in %s (run hack/paperclip/install.sh, or set PCSYNC_PAPERCLIP_DIR): %w",
			Version, opts.Install, err)
	}
	if opts.NodeBin == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "node", "install.sh")).Output()
		if err != nil {
			return nil, fmt.Errorf("hack/node/install.sh: %w", err)
		}
		opts.NodeBin = strings.TrimSpace(string(out))
	}
	s := &Server{opts: opts, out: &lockedbuf.Buffer{}}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "paperclip-test-")
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
		opts.Dir, s.ownDir = d, true
	}
	s.Dir = opts.Dir
	var err error
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	for s.DBPort == 0 || s.DBPort == s.Port {
		if s.DBPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	if err := s.prepare(); err != nil {
		return nil, fmt.Errorf("Paperclip data directory %s: %w", s.Dir, err)
	}
	if err := s.start(ctx, "onboard", "-y", "--no-install-service"); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Output is the server's output so far.
func (s *Server) Output() string { return s.out.String() }

func (s *Server) prepare() error {
	inst := filepath.Join(s.Dir, "instances", "default")
	db := filepath.Join(inst, "db")
	for _, d := range []string{inst, db} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 {
		// Embedded Postgres runs as the postgres user and does not chown
		// its data directory.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, embedded Postgres needs the postgres user (apt-get install postgresql): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(db, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(db, 0o700); err != nil {
			return err
		}
	}
	cfg := map[string]any{
		"$meta": map[string]any{"version": 1, "updatedAt": time.Now().UTC().Format(time.RFC3339), "source": "onboard"},
		"database": map[string]any{"mode": "embedded-postgres", "embeddedPostgresDataDir": db, "embeddedPostgresPort": s.DBPort,
			"backup": map[string]any{"enabled": false, "intervalMinutes": 60, "retentionDays": 7, "dir": filepath.Join(inst, "data", "backups")}},
		"logging": map[string]any{"mode": "file", "logDir": filepath.Join(inst, "logs")},
		"server": map[string]any{"deploymentMode": "local_trusted", "exposure": "private", "bind": "loopback",
			"host": "127.0.0.1", "port": s.Port, "allowedHostnames": []any{}, "serveUi": true},
		"telemetry": map[string]any{"enabled": false},
		"updates":   map[string]any{"checkEnabled": false},
		"auth":      map[string]any{"baseUrlMode": "auto", "disableSignUp": false},
		"storage": map[string]any{"provider": "local_disk", "localDisk": map[string]any{"baseDir": filepath.Join(inst, "data", "storage")},
			"s3": map[string]any{"bucket": "paperclip", "region": "us-east-1", "prefix": "", "forcePathStyle": false}},
		"secrets": map[string]any{"provider": "local_encrypted", "strictMode": false,
			"localEncrypted": map[string]any{"keyFilePath": filepath.Join(inst, "secrets", "master.key")}},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(inst, "config.json"), data, 0o644)
}

// start spawns `paperclipai <args> --data-dir D` (under Options.Init) in a process group of its
// own, its output also appended to D/server.log, and waits for /api/health.
func (s *Server) start(ctx context.Context, args ...string) error {
	bin := filepath.Join(s.opts.Install, "node_modules", ".bin", "paperclipai")
	argv := append(append(slices.Clone(s.opts.Init), bin), append(args, "--data-dir", s.Dir)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "PATH="+s.opts.NodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+s.Dir, "PAPERCLIP_HOME="+s.Dir, "PAPERCLIP_TELEMETRY_DISABLED=1", "PAPERCLIP_UPDATE_CHECK=0",
		"PAPERCLIP_NO_BROWSER=1", "PORT="+strconv.Itoa(s.Port), "HOST=127.0.0.1", "CI=true")
	logFile, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w := io.MultiWriter(s.out, logFile)
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group, so that Halt reaches Postgres too; node dies
	// with this process, and the reaper stops the rest of the group then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() {
		err := cmd.Wait() // copies the output until the group closes it
		logFile.Close()
		s.done <- err
	}()
	if s.reaper, err = startReaper(cmd.Process.Pid, s.ownDir, s.Dir); err != nil {
		s.Halt()
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := hc.Get(s.URL + "/api/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return fmt.Errorf("the Paperclip server exited: %w\n%s", werr, tail(s.out.String(), 4000))
		case <-ctx.Done():
			return fmt.Errorf("the Paperclip server did not become healthy: %w\n%s", ctx.Err(), tail(s.out.String(), 4000))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Stop stops the server (Halt) and removes a data directory Start created.
func (s *Server) Stop() {
	s.Halt()
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
}

// Halt stops the server (SIGTERM to its process group, SIGKILL after 30 s)
// and waits for its Postgres port to close; the data directory and the
// ports stay, for Restart. Halting a stopped server does nothing.
func (s *Server) Halt() {
	if s.reaper != nil {
		_ = s.reaper.Process.Kill()
		_ = s.reaper.Wait()
		s.reaper = nil
	}
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.done <- <-s.done // kept for the next reader, as above
	}
	// Embedded Postgres may outlive node by a moment.
	waitClosed(s.DBPort, 15*time.Second)
}

// Restart halts the server if it runs and starts it again on the same data
// directory and ports (`paperclipai run`); it returns once /api/health
// answers.
func (s *Server) Restart(ctx context.Context) error {
	s.Halt()
	return s.start(ctx, "run")
}

// reaperScript waits for its stdin to close — the test binary holds the
// other end, so that happens when the test binary exits, killed or not —
// then stops the process group $1 (SIGTERM, SIGKILL after 10 s) and removes
// the data directory $2 when one is given. Halt kills the reaper first.
const reaperScript = `read -r _
kill -TERM -- "-$1" 2>/dev/null
i=0
while kill -0 -- "-$1" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.5; i=$((i+1)); done
kill -KILL -- "-$1" 2>/dev/null
if [ -n "$2" ]; then rm -rf -- "$2"; fi
`

// startReaper starts the reaper of process group pgid (see reaperScript), in
// a process group of its own so that a Ctrl-C meant for the tests does not
// end it first.
func startReaper(pgid int, ownDir bool, dir string) (*exec.Cmd, error) {
	if !ownDir {
		dir = ""
	}
	cmd := exec.Command("bash", "-c", reaperScript, "paperclip-reaper", strconv.Itoa(pgid), dir)
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Paperclip server's reaper (bash): %w", err)
	}
	return cmd, nil
}

func waitClosed(port int, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// repoRoot finds the repository root (the directory with go.mod) above the
// working directory.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("paperclipserver: no go.mod above the working directory")
		}
		d = p
	}
}

// BuildAdapter builds integrations/paperclip (make paperclip-adapter) into
// dir and returns dir, readable by every user.
func BuildAdapter(ctx context.Context, dir string) (string, error) {
	return buildPackage(ctx, "integrations/paperclip/build.sh", "PAPERCLIP_ADAPTER_DIR", dir)
}

// BuildPlugin builds integrations/paperclip-sandbox (make paperclip-plugin),
// pcsync's sandbox-provider plugin, into dir and returns dir, readable by
// every user.
func BuildPlugin(ctx context.Context, dir string) (string, error) {
	return buildPackage(ctx, "integrations/paperclip-sandbox/build.sh", "PAPERCLIP_PLUGIN_DIR", dir)
}

// buildPackage runs a package's build script with its output directory in
// env and makes the result readable by every user (embedded Postgres and
// the server may run as another user).
func buildPackage(ctx context.Context, script, env, dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, filepath.FromSlash(script)))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", script, err, tail(string(out), 4000))
	}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			perm := info.Mode().Perm() | 0o444
			if info.IsDir() || info.Mode()&0o100 != 0 {
				perm |= 0o111
			}
			_ = os.Chmod(p, perm)
		}
		return nil
	})
	return dir, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
