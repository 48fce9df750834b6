//go:build integration

package realnode

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/imagecheck"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// runEnv is one company whose agent "coder" (claude_local) runs on the real
// node, its tenant applied, and a spool served by pcsync's Kubernetes
// executor in process.
type runEnv struct {
	t             testing.TB
	c             *testcluster.Cluster
	slug, ns      string
	cfgDir, spool string
	model         *config.Model
	// agent is the runs' agent; default "coder".
	agent string
	// addrs and scale, when set, are the executor's proxy addresses and
	// scaler, as the daemon gives them.
	addrs kubeexec.ProxyAddresses
	scale kubeexec.ProxyScale
}

// newRunEnv writes the config (Settings spec.images.registry is registry,
// the agent pinned to the real node with graceSec grace) and applies the
// tenant.
func newRunEnv(t testing.TB, registry string, grace int) *runEnv {
	t.Helper()
	return newRunEnvImage(t, registry, grace, "")
}

// newRunEnvImage is newRunEnv with the agent's image set to image (allowed
// by Settings spec.images.allowList) when it is not empty.
func newRunEnvImage(t testing.TB, registry string, grace int, image string) *runEnv {
	t.Helper()
	c := testcluster.Get(t)
	node := c.RealNode()
	ns := c.Namespace(t, "rn", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	e := &runEnv{t: t, c: c, slug: slug, ns: ns, cfgDir: t.TempDir(), spool: t.TempDir()}
	tol := node.Toleration()
	images := map[string]any{"registry": registry}
	agent := map[string]any{
		"name": "coder", "adapter": "claude_local", "model": "claude-sonnet-4-6", "concurrency": 4,
		"graceSec": grace, "nodeSelector": node.NodeSelector(),
		"tolerations": []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "effect": string(tol.Effect)}},
	}
	if image != "" {
		images["allowList"] = []any{image}
		agent["image"] = image
	}
	docs := []map[string]any{
		{"apiVersion": config.APIVersion, "kind": "Settings", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{"namespacePrefix": prefix, "images": images}},
		{"apiVersion": config.APIVersion, "kind": "Company", "metadata": map[string]any{"name": slug}, "spec": map[string]any{
			"id": "company-" + slug, "agents": []any{agent},
		}},
	}
	for i, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.cfgDir, fmt.Sprintf("%d.yaml", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lo := config.DefaultLoadOptions()
	lo.Images = config.ImageDefaults{Tag: imageTag}
	m, err := config.Load(ctx, e.cfgDir, lo)
	if err != nil {
		t.Fatal(err)
	}
	e.model = m
	applyTenant(ctx, t, c, m)
	return e
}

// applyTenant applies the config's tenant manifests server-side, as
// `pcsync apply` would.
func applyTenant(ctx context.Context, t testing.TB, c *testcluster.Cluster, m *config.Model) {
	t.Helper()
	out, err := render.Render(m, render.Options{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	dc := kubernetes.NewForConfigOrDie(c.RESTConfig()).Discovery()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, obj := range out.Objects {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // CiliumNetworkPolicy: no Cilium here
		}
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		ri := c.Dynamic().Resource(mapping.Resource)
		opts := metav1.ApplyOptions{FieldManager: "pcsync-test", Force: true}
		if ns := obj.GetNamespace(); ns != "" {
			_, err = ri.Namespace(ns).Apply(ctx, obj.GetName(), obj, opts)
		} else {
			_, err = ri.Apply(ctx, obj.GetName(), obj, opts)
		}
		if err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// serve runs the spool with pcsync's Kubernetes executor until the test
// ends; the daemon's environment gives the agents a (fake) API key.
func (e *runEnv) serve() {
	e.t.Helper()
	e.serveWith([]string{"ANTHROPIC_API_KEY=sk-ant-realnode-not-a-key", "PATH=/usr/bin"})
}

// serveWith is serve with the daemon's environment env.
func (e *runEnv) serveWith(env []string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	state := e.t.TempDir()
	logger := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := kubeexec.DefaultOptions()
	opts.StateDir, opts.Logger = state, logger
	opts.Environ = func() []string { return env }
	opts.ProxyAddresses, opts.ProxyScale = e.addrs, e.scale
	ex, err := kubeexec.New(ctx, e.c.RESTConfig(), opts)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	do := spool.DefaultOptions(e.spool)
	do.StateDir, do.Logger, do.RescanInterval = state, logger, 500*time.Millisecond
	d, err := spool.New(e.model, ex, do)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("spool: %v", err)
		}
	})
}

// drop writes a run request the way writers must: a hidden file renamed in.
func (e *runEnv) drop(name, prompt string, extra map[string]any) {
	e.t.Helper()
	r := map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": e.slug, "agent": cmp.Or(e.agent, "coder"), "prompt": prompt}
	for k, v := range extra {
		r[k] = v
	}
	data, err := json.Marshal(r)
	if err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(e.spool, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.spool, name+".json")); err != nil {
		e.t.Fatal(err)
	}
}

// result waits for the run's result (bounded by the test binary's timeout
// and this generous limit) and reads it.
func (e *runEnv) result(name string) result.RunResult {
	e.t.Helper()
	path := filepath.Join(e.spool, name+result.Suffix)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		r, err := result.Read(path)
		if err == nil {
			return r
		}
		if !errors.Is(err, os.ErrNotExist) {
			e.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no result %s after 4 minutes", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLog waits for the run's log to hold want.
func (e *runEnv) waitLog(name, want string) {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s.log never held %q; it holds %q", name, want, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A run of pcsync's claude image (the stand-in CLI on the base) from the
// spool to its result, on a real kubelet: the result books tokens and cost,
// the log holds the container's whole output, and a run that lasts
// milliseconds reports its real duration (pcsync init's record), not the
// kubelet's whole seconds.
func TestRunJobSucceeds(t *testing.T) {
	p := pushImages(t)
	e := newRunEnv(t, p.Registry, 30)
	e.serve()
	e.drop("ok-1", "please succeed", nil)
	r := e.result("ok-1")
	if r.Status != result.StatusSucceeded {
		t.Fatalf("status %s (%s: %s), want succeeded", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
	}
	if got := deref(r.SessionID); got != "standin-1" {
		t.Errorf("sessionId %q, want standin-1", got)
	}
	if r.Usage == nil || r.Usage.InputTokens == 0 || r.Usage.OutputTokens != 8 || deref(r.CostUSD) != 0.0123 {
		t.Errorf("usage %+v cost %v; want the transcript's (output 8, cost 0.0123)", r.Usage, deref(r.CostUSD))
	}
	d := deref(r.DurationMs)
	if d <= 0 || d >= 1000 {
		t.Errorf("durationMs %d: want the stand-in's real run time, more than 0 and under a second", d)
	}
	if r.StartedAt == nil || r.StartedAt.Nanosecond() == 0 {
		t.Errorf("startedAt %v has no sub-second part: not pcsync init's record", r.StartedAt)
	}
	if r.Job == nil || deref(r.Job.TimedBy) != result.TimedByInit {
		t.Errorf("job %+v: want the times timed by %s", r.Job, result.TimedByInit)
	}
	e.waitLog("ok-1", `"type":"result"`)
}

// A sub-second run of a user's own image (the same stand-in CLI under a
// name that is none of pcsync's: pcsync init is not its PID 1 and records
// nothing) reports more than 0 ms, timed by the daemon's watch, not the
// kubelet's whole seconds (which gave 0 ms). Three runs, each one pod that
// starts and ends on the real kubelet.
func TestRunJobForeignImageDurationMs(t *testing.T) {
	p := pushImages(t)
	e := newRunEnvImage(t, p.Registry, 30, p.Foreign)
	e.serve()
	names := []string{"foreign-1", "foreign-2", "foreign-3"}
	for _, n := range names {
		e.drop(n, "please succeed", nil)
	}
	for _, n := range names {
		r := e.result(n)
		if r.Status != result.StatusSucceeded {
			t.Fatalf("%s: status %s (%s: %s), want succeeded", n, r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
		}
		d := deref(r.DurationMs)
		t.Logf("%s: durationMs %d, startedAt %v, finishedAt %v, job %+v", n, d, r.StartedAt, r.FinishedAt, r.Job)
		if r.Job == nil || deref(r.Job.TimedBy) != result.TimedByWatch {
			t.Errorf("%s: job %+v: want the times timed by %s (the image has no pcsync init)", n, r.Job, result.TimedByWatch)
		}
		if d <= 0 {
			t.Errorf("%s: durationMs %d, want more than 0", n, d)
		}
		if r.StartedAt == nil || r.StartedAt.Nanosecond() == 0 || r.FinishedAt == nil || r.FinishedAt.Nanosecond() == 0 {
			t.Errorf("%s: startedAt %v, finishedAt %v: want sub-second parts (the daemon's watch), not the kubelet's whole seconds", n, r.StartedAt, r.FinishedAt)
		}
	}
}

// A CLI that fails is classified from its output: Claude Code's real
// not-logged-in transcript gives auth_required.
func TestRunJobFailureClassified(t *testing.T) {
	p := pushImages(t)
	e := newRunEnv(t, p.Registry, 30)
	e.serve()
	e.drop("auth-1", "fail-auth now", nil)
	r := e.result("auth-1")
	if r.Status != result.StatusFailed || deref(r.ErrorCode) != result.ErrAuthRequired {
		t.Fatalf("status %s, code %s (%s); want failed auth_required", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
	}
	if deref(r.ExitCode) != 1 {
		t.Errorf("exitCode %d, want 1", deref(r.ExitCode))
	}
}

// A cancel or a timeout stops the CLI: one with no SIGTERM handler (which
// as PID 1 would have ignored the kubelet's SIGTERM until the grace
// period's SIGKILL) dies by SIGTERM under pcsync init; one that ignores
// SIGTERM outright dies by the kubelet's SIGKILL at the end of the grace
// period pcsync set. The pod's last status before it is gone says which.
func TestRunJobStops(t *testing.T) {
	p := pushImages(t)
	e := newRunEnv(t, p.Registry, 3)
	ends := watchPodEnds(t, e.c, e.ns)
	e.serve()
	tests := []struct {
		name, prompt string
		timeoutSec   int
		wantStatus   result.Status
		wantExit     int32
	}{
		{name: "cancel-nohandler", prompt: "no-handler", wantStatus: result.StatusCancelled, wantExit: 143},
		{name: "cancel-ignoreterm", prompt: "ignore-term", wantStatus: result.StatusCancelled, wantExit: 137},
		// Long enough for the CLI to start under load: a pod deleted
		// before its container runs reports 137 (ContainerStatusUnknown).
		{name: "timeout-nohandler", prompt: "no-handler", timeoutSec: 15, wantStatus: result.StatusTimedOut, wantExit: 143},
	}
	for _, tt := range tests {
		extra := map[string]any{}
		if tt.timeoutSec > 0 {
			extra["timeoutSec"] = tt.timeoutSec
		}
		e.drop(tt.name, tt.prompt, extra)
	}
	for _, tt := range tests {
		// The CLI runs (its first line is in the log) before it is stopped.
		e.waitLog(tt.name, `"subtype":"init"`)
		if tt.timeoutSec == 0 {
			if err := os.WriteFile(filepath.Join(e.spool, tt.name+".cancel"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.result(tt.name)
			if r.Status != tt.wantStatus {
				t.Errorf("status %s (%s: %s), want %s", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage), tt.wantStatus)
			}
			if r.Job == nil || r.Job.Pod == "" {
				t.Fatalf("result names no pod: %+v", r.Job)
			}
			if got := ends.wait(t, r.Job.Pod); got != tt.wantExit {
				t.Errorf("the agent container ended with exit code %d, want %d", got, tt.wantExit)
			}
		})
	}
}

// podEnds records, per pod, the exit code of its agent container's last
// terminated state, and which pods are gone.
type podEnds struct {
	mu   sync.Mutex
	exit map[string]int32
	gone map[string]bool
}

// watchPodEnds watches the namespace's pods until the test ends.
func watchPodEnds(t testing.TB, c *testcluster.Cluster, ns string) *podEnds {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &podEnds{exit: map[string]int32{}, gone: map[string]bool{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			p.mu.Lock()
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == "agent" && cs.State.Terminated != nil {
					p.exit[pod.Name] = cs.State.Terminated.ExitCode
				}
			}
			if ev.Type == watch.Deleted {
				p.gone[pod.Name] = true
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// wait waits for the pod to be gone and returns its agent's exit code (-1:
// never seen terminated).
func (p *podEnds) wait(t testing.TB, pod string) int32 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p.mu.Lock()
		gone, code, seen := p.gone[pod], p.exit[pod], false
		_, seen = p.exit[pod]
		p.mu.Unlock()
		if gone {
			if !seen {
				return -1
			}
			return code
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there after 2 minutes", pod)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An image its registry does not have: the preflight names it and the
// command that fixes it, and a run fails at once (not at its deadline),
// naming it.
func TestRunJobMissingImage(t *testing.T) {
	pushImages(t)
	registry := testcluster.Get(t).RealNode().Registry().Host() + "/nobody"
	e := newRunEnv(t, registry, 30)
	image := images.Ref(registry, images.Agent("claude"), imageTag)
	fs := imagecheck.Preflight(context.Background(), e.model, imagecheck.DefaultOptions())
	if len(fs) != 1 || fs[0].Image != image || fs[0].Result.Status != imagecheck.StatusMissing ||
		!strings.Contains(fs[0].Advice, "make images REGISTRY="+registry+" PUSH=1") {
		t.Errorf("preflight: %v; want %s missing, with the make images command", fs, image)
	}
	e.serve()
	e.drop("missing-1", "please succeed", nil)
	r := e.result("missing-1")
	if r.Status != result.StatusFailed || deref(r.ErrorCode) != result.ErrImagePullFailed || !strings.Contains(deref(r.ErrorMessage), image) {
		t.Errorf("status %s code %s message %q; want failed image_pull_failed naming %s", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage), image)
	}
}

// pcsync's image of the real Claude Code CLI, as make images builds it,
// runs as a Job: with no key it fails, and the failure is classified from
// the CLI's own output, which proves the image runs the CLI.
func TestRealClaudeImage(t *testing.T) {
	p := pushImages(t)
	e := newRunEnv(t, p.RealRegistry, 30)
	e.serveWith([]string{"PATH=/usr/bin"})
	e.drop("claude-1", "Say hello.", nil)
	r := e.result("claude-1")
	if r.Status != result.StatusFailed || deref(r.ErrorCode) != result.ErrAuthRequired {
		t.Errorf("status %s code %s (%s); want failed auth_required\nlog:\n%s", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage), e.log("claude-1"))
	}
}

func (e *runEnv) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(e.spool, name+".log"))
	return string(b)
}
