// Command devcluster runs pcsync's local development control plane (the same one the
// integration tests use, see internal/testing/testcluster) in the background.
//
//	devcluster up     [--dir .dev] [--bin-dir DIR]  start it, or reuse the running one
//	devcluster down   [--dir .dev]                  stop it
//	devcluster status [--dir .dev]                  exit 0 if it runs and answers
//
// State lives in the --dir directory: kubeconfig (admin), devcluster.pid (the
// background supervisor), state.json, devcluster.log and cluster/ (certificates, etcd
// data, component logs under cluster/logs). `make dev-cluster` and
// `make dev-cluster-down` call it (hack/cluster.mk).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// state is written to <dir>/state.json once the cluster is ready.
type state struct {
	PID        int            `json:"pid"`
	Components map[string]int `json:"components"`
	Kubeconfig string         `json:"kubeconfig"`
	Server     string         `json:"server"`
	WorkDir    string         `json:"workDir"`
	StartedAt  time.Time      `json:"startedAt"`
	StartupMS  int64          `json:"startupMs"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet("devcluster "+cmd, flag.ExitOnError)
	dir := fs.String("dir", ".dev", "state directory")
	binDir := fs.String("bin-dir", testcluster.DefaultBinDir(), "directory with the control-plane binaries")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long up waits for the cluster")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fatal(err)
	}
	d := devDir(abs)
	switch cmd {
	case "up":
		err = d.up(*binDir, *timeout)
	case "serve":
		err = d.serve(*binDir)
	case "down":
		err = d.down()
	case "status":
		err = d.status()
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: devcluster up|down|status [--dir .dev] [--bin-dir DIR]")
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
	os.Exit(1)
}

type devDir string

func (d devDir) path(name string) string { return filepath.Join(string(d), name) }

// running returns the supervisor's PID if the pid file names a live process.
func (d devDir) running() (int, bool) {
	b, err := os.ReadFile(d.path("devcluster.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return pid, false
	}
	return pid, true
}

func (d devDir) readState() (*state, error) {
	b, err := os.ReadFile(d.path("state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", d.path("state.json"), err)
	}
	return &s, nil
}

// healthy checks that the API server answers and the node is schedulable.
func (d devDir) healthy(ctx context.Context) error {
	_, err := testcluster.Attach(ctx, d.path("kubeconfig"))
	return err
}

func (d devDir) printUsage(s *state, reused bool) {
	verb := "started"
	if reused {
		verb = "already running; reusing it"
	}
	kc := d.path("kubeconfig")
	fmt.Printf(`dev cluster %s (API server %s, Kubernetes %s, supervisor pid %d)

  export KUBECONFIG=%s
  kubectl get nodes
  PCSYNC_TEST_KUBECONFIG=%s go test -tags integration ./...   # tests reuse it instead of starting their own

Component logs: %s/logs   Stop it: make dev-cluster-down
`, verb, s.Server, testcluster.KubernetesVersion, s.PID, kc, kc, s.WorkDir)
}

func (d devDir) up(binDir string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, ok := d.running(); ok {
		if s, err := d.readState(); err == nil {
			if err := d.healthy(ctx); err == nil {
				d.printUsage(s, true)
				return nil
			}
		}
		// Running but not (yet) healthy: it may still be starting; wait for it below.
	} else {
		if err := testcluster.CheckBinaries(binDir); err != nil {
			return err
		}
		if err := os.MkdirAll(string(d), 0o755); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		for _, f := range []string{"state.json", "devcluster.pid"} {
			_ = os.Remove(d.path(f))
		}
		logf, err := os.OpenFile(d.path("devcluster.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("log: %w", err)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("own executable: %w", err)
		}
		cmd := exec.Command(self, "serve", "--dir", string(d), "--bin-dir", binDir)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start supervisor: %w", err)
		}
		_ = logf.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		fmt.Fprintf(os.Stderr, "devcluster: starting (supervisor pid %d, log %s)\n", cmd.Process.Pid, d.path("devcluster.log"))
		for {
			if s, err := d.readState(); err == nil {
				d.printUsage(s, false)
				return nil
			}
			select {
			case err := <-exited:
				return fmt.Errorf("supervisor exited (%w):\n%s", err, tail(d.path("devcluster.log"), 4000))
			case <-ctx.Done():
				return fmt.Errorf("cluster not ready after %s; see %s", timeout, d.path("devcluster.log"))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	for {
		if s, err := d.readState(); err == nil && d.healthy(ctx) == nil {
			d.printUsage(s, true)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("a dev cluster supervisor runs but the cluster does not answer; run `make dev-cluster-down` and retry (log %s)", d.path("devcluster.log"))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// serve runs in the background: it starts the cluster, publishes the state and stops
// the cluster on SIGTERM/SIGINT. Its children die with it (Pdeathsig).
func (d devDir) serve(binDir string) error {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := os.WriteFile(d.path("devcluster.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer os.Remove(d.path("devcluster.pid"))

	// A signal during the start aborts it; one after it stops the cluster.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startDone, watcherDone := make(chan struct{}), make(chan struct{})
	var early os.Signal
	go func() {
		defer close(watcherDone)
		select {
		case early = <-sigc:
			cancel()
		case <-startDone:
		}
	}()
	opts := testcluster.DefaultOptions()
	opts.BinDir = binDir
	opts.WorkDir = d.path("cluster")
	opts.Logf = func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.RFC3339)}, args...)...)
	}
	begin := time.Now()
	c, err := testcluster.Start(ctx, opts)
	close(startDone)
	<-watcherDone
	if err != nil {
		return err
	}
	if early != nil {
		fmt.Printf("%v during the start: stopping\n", early)
		return c.Close()
	}

	if err := copyFile(c.KubeconfigPath(), d.path("kubeconfig")); err != nil {
		_ = c.Close()
		return err
	}
	s := state{
		PID:        os.Getpid(),
		Components: c.PIDs(),
		Kubeconfig: d.path("kubeconfig"),
		Server:     c.RESTConfig().Host,
		WorkDir:    c.WorkDir(),
		StartedAt:  time.Now(),
		StartupMS:  time.Since(begin).Milliseconds(),
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := writeAtomic(d.path("state.json"), b); err != nil {
		_ = c.Close()
		return err
	}
	sig := <-sigc
	fmt.Printf("%s %v: stopping\n", time.Now().Format(time.RFC3339), sig)
	_ = os.Remove(d.path("state.json"))
	err = c.Close()
	fmt.Printf("%s stopped (%v)\n", time.Now().Format(time.RFC3339), err)
	return err
}

func (d devDir) down() error {
	pid, ok := d.running()
	if !ok {
		fmt.Println("dev cluster is not running")
		_ = os.Remove(d.path("state.json"))
		return nil
	}
	var comps map[string]int
	if s, err := d.readState(); err == nil {
		comps = s.Components
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop supervisor %d: %w", pid, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL) // its components die with it (Pdeathsig)
		time.Sleep(time.Second)
	}
	// Belt and braces: no component may survive.
	for name, cpid := range comps {
		if syscall.Kill(cpid, 0) == nil && isComponent(cpid, name) {
			_ = syscall.Kill(cpid, syscall.SIGKILL)
		}
	}
	for _, f := range []string{"state.json", "devcluster.pid", "kubeconfig"} {
		_ = os.Remove(d.path(f))
	}
	fmt.Println("dev cluster stopped")
	return nil
}

// isComponent checks that pid still runs the named binary (pids get reused).
func isComponent(pid int, name string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && filepath.Base(exe) == name
}

func (d devDir) status() error {
	pid, ok := d.running()
	if !ok {
		return errors.New("dev cluster is not running (start it with `make dev-cluster`)")
	}
	s, err := d.readState()
	if err != nil {
		return fmt.Errorf("supervisor %d runs but the cluster is not ready yet: %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.healthy(ctx); err != nil {
		return fmt.Errorf("supervisor %d runs but the cluster is unhealthy: %w", pid, err)
	}
	fmt.Printf("dev cluster running: API server %s, supervisor pid %d, up since %s\n", s.Server, s.PID, s.StartedAt.Format(time.RFC3339))
	for _, name := range testcluster.Binaries {
		fmt.Printf("  %-24s pid %d\n", name, s.Components[name])
	}
	fmt.Printf("  KUBECONFIG=%s\n", s.Kubeconfig)
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy kubeconfig: %w", err)
	}
	return writeAtomic(dst, b)
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
