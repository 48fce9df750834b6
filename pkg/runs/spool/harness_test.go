package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// waitDeadline bounds every wait in these tests. It is generous: nothing
// asserts on timing, a wait that runs out means a run never ended.
const waitDeadline = 90 * time.Second

// harness is a config, a spool, a state directory and a daemon running
// the local executor with the test binary as shim and agent.
type harness struct {
	t                 *testing.T
	dir, spool, state string
	rec, release      string
	model             *config.Model
	mu                sync.Mutex
	events            []Event
	stop              func()
	done              chan error
	watch             bool
	rescan            time.Duration
	environ           []string
	// logs, when set, receives the daemon's and the executor's logs (JSON,
	// debug level).
	logs io.Writer
}

// agentsYAML is the agents list of the test company "acme".
const defaultAgents = `
  - name: coder
    adapter: claude_local
    env: {AGENT_MODE: ok}
  - name: slow
    adapter: claude_local
    concurrency: 2
    graceSec: 1
    env: {AGENT_MODE: block}
  - name: stubborn
    adapter: claude_local
    graceSec: 1
    env: {AGENT_MODE: block-ignore-term}
  - name: failer
    adapter: claude_local
    env: {AGENT_MODE: fail}
`

func newHarness(t *testing.T, agents string) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, spool: filepath.Join(dir, "spool"), rec: filepath.Join(dir, "rec"),
		release: filepath.Join(dir, "release"), watch: true, rescan: time.Second}
	h.state = runs.DefaultStateDir(h.spool)
	for _, d := range []string{h.spool, h.rec, h.release, filepath.Join(dir, "config")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if agents == "" {
		agents = defaultAgents
	}
	// Every agent records into rec and waits on release.
	agents = strings.ReplaceAll(agents, "env: {", fmt.Sprintf("env: {RECORD_DIR: %q, RELEASE_DIR: %q, ", h.rec, h.release))
	cfg := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: test}
spec:
  adapters:
    claude_local:
      command: [%[1]q, "test-agent"]
    codex_local:
      command: [%[1]q, "test-agent"]
---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: co-acme-1
  agents:%[2]s`, os.Args[0], agents)
	if err := os.WriteFile(filepath.Join(dir, "config", "fleet.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
	if err != nil {
		t.Fatalf("load test config: %v", err)
	}
	h.model = m
	h.environ = []string{"PATH=" + os.Getenv("PATH"), "ANTHROPIC_API_KEY=sk-test-secret-value-123456", "UNRELATED_SECRET=must-not-leak", "LANG=C.UTF-8"}
	return h
}

func (h *harness) options(once bool) Options {
	o := DefaultOptions(h.spool)
	o.Once = once
	o.Watch = h.watch
	o.RescanInterval = h.rescan
	o.Logger = slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if h.logs != nil {
		o.Logger = h.logger()
	}
	o.Observe = func(e Event) {
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
	}
	return o
}

// logger writes to h.logs at debug level.
func (h *harness) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (h *harness) executor() *localexec.Executor {
	log := slog.New(slog.DiscardHandler)
	if h.logs != nil {
		log = h.logger()
	}
	e, err := localexec.New(localexec.Options{
		StateDir: h.state, Shim: []string{os.Args[0], localexec.ShimArg}, Environ: h.environ,
		PollInterval: 20 * time.Millisecond, Logger: log,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// start runs a daemon in the background until stop is called.
func (h *harness) start() {
	h.t.Helper()
	d, err := New(h.model, h.executor(), h.options(false))
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.done = make(chan error, 1)
	go func() { h.done <- d.Run(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-h.done; err != nil {
			h.t.Errorf("daemon: %v", err)
		}
		h.stop = nil
	}
	h.t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
}

// once runs a daemon with Once and waits for it.
func (h *harness) once() {
	h.t.Helper()
	d, err := New(h.model, h.executor(), h.options(true))
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := d.Run(ctx); err != nil {
		h.t.Fatalf("daemon --once: %v", err)
	}
	if ctx.Err() != nil {
		h.t.Fatal("daemon --once did not finish within the wait deadline")
	}
}

// drop writes a request the recommended way: a hidden temp file renamed in.
func (h *harness) drop(file, content string) {
	h.t.Helper()
	tmp := filepath.Join(h.spool, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.spool, file)); err != nil {
		h.t.Fatal(err)
	}
}

func request(agent, extra string) string {
	return fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: %s\nprompt: say hello\n%s", agent, extra)
}

// waitFor polls cond until it holds or the deadline passes.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	end := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(end) {
			h.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// result waits for a request's result and reads it.
func (h *harness) result(name string) result.RunResult {
	h.t.Helper()
	p := runs.Paths{Spool: h.spool, Name: name}.Result()
	h.waitFor("result of "+name, func() bool { _, err := os.Stat(p); return err == nil })
	r, err := result.Read(p)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// started waits until the agent of runID has started n times in all.
func (h *harness) started(runID string, n int) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d start(s) of %s", n, runID), func() bool { return h.starts(runID) >= n })
}

// starts counts the agent processes started for runID.
func (h *harness) starts(runID string) int {
	b, err := os.ReadFile(filepath.Join(h.rec, runID+".start"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// releaseRun lets a blocked agent finish.
func (h *harness) releaseRun(runID string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.release, runID), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) recorded() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

func (h *harness) sawEvent(kind EventKind, name string) bool {
	for _, e := range h.recorded() {
		if e.Kind == kind && e.Name == name {
			return true
		}
	}
	return false
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
