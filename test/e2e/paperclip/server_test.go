//go:build integration

package paperclip

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// server is a real Paperclip server (paperclipai from npm) with its
// embedded Postgres, in local_trusted mode on loopback, its data in a
// directory of its own and on ports of its own, so that two instances never
// share a database.
type server struct {
	t      testing.TB
	tl     tools
	Dir    string // --data-dir
	Port   int
	DBPort int
	URL    string
	API    *api
	cmd    *exec.Cmd
	done   chan error
	out    *lockedBuffer
	// Starts counts the server's starts (first start and restarts).
	Starts int
	// StartDurations are the time from spawn to a healthy /api/health.
	StartDurations []time.Duration
}

// freePort asks the kernel for a free loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer prepares a data directory (config.json written before the
// first start, with a free HTTP port and a free Postgres port), starts the
// server and waits for /api/health. It is stopped when the test ends.
func startServer(t testing.TB, tl tools) *server {
	t.Helper()
	return newServer(t, tl, true)
}

// newServer is startServer; with cleanup false the caller stops the server
// (the shared one, after every test).
func newServer(t testing.TB, tl tools, cleanup bool) *server {
	t.Helper()
	s := &server{t: t, tl: tl}
	if cleanup {
		s.Dir = worldDir(t, "paperclip-e2e-")
	} else {
		d, err := os.MkdirTemp("", "paperclip-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		s.Dir = d
		atExit = append(atExit, func() { _ = os.RemoveAll(d) })
	}
	s.Port, s.DBPort = freePort(t), freePort(t)
	for s.DBPort == s.Port {
		s.DBPort = freePort(t)
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.Port)
	s.API = &api{base: s.URL, hc: &http.Client{Timeout: 5 * time.Minute}}
	if err := s.prepare(); err != nil {
		t.Fatalf("Paperclip data directory %s: %v", s.Dir, err)
	}
	s.start("onboard", "-y", "--no-install-service")
	if !cleanup {
		return s
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("Paperclip server output (tail):\n%s", tail(s.out.String(), 8000))
		}
	})
	return s
}

// prepare writes the instance's config.json (onboard then keeps it and only
// adds the agent JWT secret and the secrets key), and hands the database
// directory to the postgres user when we are root (embedded Postgres runs
// as that user and does not chown it: initdb would fail).
func (s *server) prepare() error {
	inst := filepath.Join(s.Dir, "instances", "default")
	db := filepath.Join(inst, "db")
	for _, d := range []string{inst, db} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 {
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
		"database": map[string]any{
			"mode": "embedded-postgres", "embeddedPostgresDataDir": db, "embeddedPostgresPort": s.DBPort,
			"backup": map[string]any{"enabled": false, "intervalMinutes": 60, "retentionDays": 7,
				"dir": filepath.Join(inst, "data", "backups")},
		},
		"logging": map[string]any{"mode": "file", "logDir": filepath.Join(inst, "logs")},
		"server": map[string]any{"deploymentMode": "local_trusted", "exposure": "private", "bind": "loopback",
			"host": "127.0.0.1", "port": s.Port, "allowedHostnames": []any{}, "serveUi": true},
		"telemetry": map[string]any{"enabled": false},
		"updates":   map[string]any{"checkEnabled": false},
		"auth":      map[string]any{"baseUrlMode": "auto", "disableSignUp": false},
		"storage": map[string]any{"provider": "local_disk",
			"localDisk": map[string]any{"baseDir": filepath.Join(inst, "data", "storage")},
			"s3":        map[string]any{"bucket": "paperclip", "region": "us-east-1", "prefix": "", "forcePathStyle": false}},
		"secrets": map[string]any{"provider": "local_encrypted", "strictMode": false,
			"localEncrypted": map[string]any{"keyFilePath": filepath.Join(inst, "secrets", "master.key")}},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(inst, "config.json"), data, 0o644)
}

// start spawns `paperclipai <args> --data-dir D` and waits for its health
// endpoint.
func (s *server) start(args ...string) {
	s.t.Helper()
	bin := filepath.Join(s.tl.Install, "node_modules", ".bin", "paperclipai")
	args = append(args, "--data-dir", s.Dir)
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.tl.nodeEnv()...)
	cmd.Env = append(cmd.Env,
		"HOME="+s.Dir, "PAPERCLIP_HOME="+s.Dir,
		"PAPERCLIP_TELEMETRY_DISABLED=1", "PAPERCLIP_UPDATE_CHECK=0", "PAPERCLIP_NO_BROWSER=1",
		"PORT="+strconv.Itoa(s.Port), "HOST=127.0.0.1", "CI=true")
	if s.out == nil {
		s.out = &lockedBuffer{}
	}
	var w io.Writer = s.out
	if f, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		w = io.MultiWriter(s.out, f)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group, so that stop reaches Postgres too if node dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", bin, err)
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
	s.Starts++
	if err := s.waitHealthy(10 * time.Minute); err != nil {
		s.stop()
		s.t.Fatalf("Paperclip server (%s) did not become healthy: %v\n%s", s.URL, err, tail(s.out.String(), 8000))
	}
	s.StartDurations = append(s.StartDurations, time.Since(begin))
}

func (s *server) waitHealthy(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		var h map[string]any
		err := s.API.do(ctx, "GET", "/api/health", nil, &h)
		if err == nil {
			return nil
		}
		select {
		case werr := <-s.done:
			s.done <- werr
			return fmt.Errorf("the server exited: %v", werr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM to the server's process group and waits; SIGKILL after
// 30 s.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	// Embedded Postgres may outlive node by a moment; wait for its port.
	s.waitPortClosed(s.DBPort, 15*time.Second)
}

// restart stops the server and starts it again on the same data and ports
// (`paperclipai run`).
func (s *server) restart() {
	s.t.Helper()
	s.stop()
	s.start("run")
}

func (s *server) waitPortClosed(port int, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

// installAdapter installs the pcsync adapter built from the repository
// (POST /api/adapters/install with the local path).
func (s *server) installAdapter(t testing.TB) {
	t.Helper()
	var out map[string]any
	s.API.must(t, "POST", "/api/adapters/install", map[string]any{"packageName": s.tl.Adapter, "isLocalPath": true}, &out)
}
