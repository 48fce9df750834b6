//go:build integration

package paperclip

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/result"
)

// pcsyncAgent is one agent of the test company in pcsync's config.
type pcsyncAgent struct {
	// Name is the pcsync agent name (the Paperclip agent's adapterConfig.agent).
	Name string
	// Transcript is the Claude stream-json file the stand-in CLI replays
	// (local executor) or kwok serves as the pod's log (Kubernetes).
	Transcript string
	// Sleep makes the stand-in wait this many seconds after the first line.
	Sleep int
	// TimeoutSec is the agent's timeoutSec (0: the default).
	TimeoutSec int
	// Labels are the agent's pod labels (kwok outcome).
	Labels map[string]string
	// Extra is merged into the agent's config (resources, …).
	Extra map[string]any
}

// pcsyncEnv is one test's pcsync: a config directory naming the Paperclip
// company by its id, a spool, a state directory, and the record directory
// of the stand-in CLI.
type pcsyncEnv struct {
	t       testing.TB
	tl      tools
	Slug    string
	Company string // the Paperclip company id (spec.id)
	Config  string
	Spool   string
	State   string
	Record  string
	// Settings is merged into the Settings spec (namespacePrefix, …).
	Settings map[string]any
}

// newPcsyncEnv writes the pcsync config for company (its Paperclip id) with
// the given agents; every agent uses claude_local, whose command is the
// stand-in CLI.
func newPcsyncEnv(t testing.TB, tl tools, slug, companyID string, agents []pcsyncAgent, settings, companySpec map[string]any) *pcsyncEnv {
	t.Helper()
	base := worldDir(t, "pcsync-e2e-")
	e := &pcsyncEnv{t: t, tl: tl, Slug: slug, Company: companyID,
		Config: filepath.Join(base, "config"), Spool: filepath.Join(base, "spool"),
		State: filepath.Join(base, "spool", ".pcsync"), Record: filepath.Join(base, "record")}
	for _, d := range []string{e.Config, e.Spool, e.Record} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := map[string]any{"adapters": map[string]any{
		"claude_local": map[string]any{"command": []any{tl.Standin}},
	}}
	for k, v := range settings {
		spec[k] = v
	}
	list := []any{}
	for _, a := range agents {
		env := map[string]any{"STANDIN_TRANSCRIPT": a.Transcript, "STANDIN_RECORD": e.Record}
		if a.Sleep > 0 {
			env["STANDIN_SLEEP"] = fmt.Sprint(a.Sleep)
		}
		m := map[string]any{"name": a.Name, "adapter": "claude_local", "model": "claude-sonnet-4-6",
			"concurrency": 20, "graceSec": 2, "env": env}
		if a.TimeoutSec > 0 {
			m["timeoutSec"] = a.TimeoutSec
		}
		if a.Labels != nil {
			m["labels"] = a.Labels
		}
		for k, v := range a.Extra {
			m[k] = v
		}
		list = append(list, m)
	}
	cspec := map[string]any{"id": companyID, "agents": list}
	for k, v := range companySpec {
		cspec[k] = v
	}
	docs := map[string]map[string]any{
		"settings.yaml": {"apiVersion": "pcsync.io/v1alpha1", "kind": "Settings",
			"metadata": map[string]any{"name": "e2e"}, "spec": spec},
		"company.yaml": {"apiVersion": "pcsync.io/v1alpha1", "kind": "Company",
			"metadata": map[string]any{"name": slug}, "spec": cspec},
	}
	for name, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.Config, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// worldDir makes a temporary directory that other users can traverse
// (embedded Postgres runs as the postgres user when the tests run as root),
// removed when the test ends.
func worldDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if keep := t.Failed() && os.Getenv("PCSYNC_E2E_KEEP") != ""; keep {
			t.Logf("kept %s", d)
		} else {
			_ = os.RemoveAll(d)
		}
	})
	return d
}

// daemon is a running `pcsync daemon` process.
type daemon struct {
	cmd  *exec.Cmd
	out  *lockedbuf.Buffer
	done chan error
}

// startDaemon starts `pcsync daemon` on the env's spool with the given
// executor and extra arguments and environment, and waits until its
// status file says it is alive. It is stopped (SIGTERM) when the test ends.
func (e *pcsyncEnv) startDaemon(executor string, env []string, args ...string) *daemon {
	e.t.Helper()
	argv := append([]string{"daemon", "--config", e.Config, "--spool", e.Spool,
		"--executor", executor, "--rescan-interval", "2s", "--no-reconcile",
		// No network check's probe pod among the lease pods the tests count.
		"--skip-network-check"}, args...)
	cmd := exec.Command(e.tl.Pcsync, argv...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.State}, env...)
	d := &daemon{cmd: cmd, out: &lockedbuf.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start pcsync daemon: %v", err)
	}
	go func() { d.done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		d.stop(e.t)
		if e.t.Failed() {
			e.t.Logf("pcsync daemon output:\n%s", tail(d.out.String(), 20000))
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if st, err := readStatus(e.State); err == nil && st.Pid == cmd.Process.Pid {
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			e.t.Fatalf("pcsync daemon exited: %v\n%s", err, d.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pcsync daemon wrote no status.json in %s within a minute:\n%s", e.State, d.out.String())
		}
	}
}

// stop sends SIGTERM and waits for the daemon to exit.
func (d *daemon) stop(t testing.TB) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(30 * time.Second):
		// SIGQUIT: the Go runtime writes every goroutine's stack, which
		// says where the shutdown hangs.
		_ = d.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err := <-d.done:
			d.done <- err
		case <-time.After(5 * time.Second):
			_ = d.cmd.Process.Kill()
		}
		out := d.out.String()
		if i := strings.Index(out, "SIGQUIT"); i >= 0 {
			t.Logf("pcsync daemon's goroutines at SIGQUIT:\n%s", out[i:])
		}
		t.Errorf("pcsync daemon did not stop within 30 s of SIGTERM")
	}
}

// daemonStatus is the part of <state>/status.json the tests read.
type daemonStatus struct {
	Pid         int    `json:"pid"`
	Executor    string `json:"executor"`
	HeartbeatAt string `json:"heartbeatAt"`
}

func readStatus(state string) (daemonStatus, error) {
	var st daemonStatus
	data, err := os.ReadFile(filepath.Join(state, "status.json"))
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(data, &st)
	return st, err
}

// waitResult waits for the spool's <name>.result.json.
func (e *pcsyncEnv) waitResult(name string, within time.Duration) result.RunResult {
	e.t.Helper()
	path := filepath.Join(e.Spool, name+".result.json")
	deadline := time.Now().Add(within)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			var r result.RunResult
			if err := json.Unmarshal(data, &r); err != nil {
				e.t.Fatalf("%s: %v", path, err)
			}
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s within %s; spool: %v", path, within, e.spoolFiles())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *pcsyncEnv) spoolFiles() []string {
	ents, _ := os.ReadDir(e.Spool)
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	return names
}

// recorded reads what the stand-in CLI recorded for a run: its arguments,
// its environment and its prompt.
func (e *pcsyncEnv) recorded(runID string) (args []string, env map[string]string, prompt string) {
	e.t.Helper()
	base := filepath.Join(e.Record, runID)
	a, err := os.ReadFile(base + ".args")
	if err != nil {
		e.t.Fatalf("the stand-in CLI recorded no arguments for run %s: %v (records: %v)", runID, err, dirNames(e.Record))
	}
	args = strings.Split(strings.TrimSuffix(string(a), "\n"), "\n")
	envData, err := os.ReadFile(base + ".env")
	if err != nil {
		e.t.Fatal(err)
	}
	env = map[string]string{}
	for line := range strings.SplitSeq(string(envData), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	p, err := os.ReadFile(base + ".prompt")
	if err != nil {
		e.t.Fatal(err)
	}
	return args, env, string(p)
}

func dirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	return names
}

// waitFile waits until path exists.
func waitFile(t testing.TB, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var _ = context.Background
