//go:build integration

package realnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// leaseEnv is a tenant with pcsync's sandbox Manager, not on kwok's shared
// host: every command runs in the lease pod's own container. Its company
// declares agents in Git whose Paperclip ids the Manager's AgentResolver
// knows (agentIDs): pinned selects the real node and tolerates its taint,
// untolerating selects it without the toleration.
type leaseEnv struct {
	c     *testcluster.Cluster
	slug  string
	ns    string
	model *config.Model
	m     *sandbox.Manager
}

// The Paperclip agent ids of the leaseEnv's agents declared in Git.
const (
	pinnedAgentID       = "5e1f0c1e-0000-4000-8000-00000000a001"
	untoleratingAgentID = "5e1f0c1e-0000-4000-8000-00000000a002"
)

// agentIDs stands for Paperclip's answer (marked agents, which
// pkg/paperclip's tests resolve against the real server): the Paperclip
// agent id of each agent of the leaseEnv's company.
type agentIDs map[string]string

func (a agentIDs) ResolveAgent(_ context.Context, _ *config.Model, _ *config.Company, id string) (string, error) {
	return a[id], nil
}

func newLeaseEnv(t testing.TB, p pushed) *leaseEnv { return newLeaseEnvWith(t, p, nil, nil) }

// newLeaseEnvWith is newLeaseEnv whose Manager reaches the cluster with cfg
// (nil: the cluster's own) and whose options edit changes.
func newLeaseEnvWith(t testing.TB, p pushed, cfg *rest.Config, edit func(*sandbox.Options)) *leaseEnv {
	t.Helper()
	return newLeaseEnvSpec(t, p, cfg, edit, "")
}

// newLeaseEnvSpec is newLeaseEnvWith whose Company spec also has the
// lines spec (indented by two spaces, each ending in a newline).
func newLeaseEnvSpec(t testing.TB, p pushed, cfg *rest.Config, edit func(*sandbox.Options), spec string) *leaseEnv {
	t.Helper()
	c := testcluster.Get(t)
	node := c.RealNode()
	ns := c.Namespace(t, "lease", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1], ns[i+1:]
	dir := t.TempDir()
	tol := node.Toleration()
	var sel []string
	for k, v := range node.NodeSelector() {
		sel = append(sel, fmt.Sprintf("%q: %q", k, v))
	}
	selector := "{" + strings.Join(sel, ", ") + "}"
	files := map[string]string{
		"settings.yaml": fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n"+
			"  namespacePrefix: %s\n  images: {registry: %s, allowList: ['%s/*/*']}\n", prefix, p.Registry, c.RealNode().Registry().Host()),
		"company.yaml": fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n  agents:\n"+
			"    - {name: pinned, adapter: claude_local, nodeSelector: %s, tolerations: [{key: %q, operator: %s, effect: %s}]}\n"+
			"    - {name: untolerating, adapter: claude_local, nodeSelector: %s}\n",
			slug, slug, selector, tol.Key, tol.Operator, tol.Effect, selector) + spec,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lo := config.DefaultLoadOptions()
	lo.Images = config.ImageDefaults{Tag: imageTag}
	m, err := config.Load(ctx, dir, lo)
	if err != nil {
		t.Fatal(err)
	}
	applyTenant(ctx, t, c, m)
	o := sandbox.DefaultOptions(t.TempDir())
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.ReadyTimeout = 2 * time.Minute
	o.Agents = agentIDs{pinnedAgentID: "pinned", untoleratingAgentID: "untolerating"}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if edit != nil {
		edit(&o)
	}
	if cfg == nil {
		cfg = c.RESTConfig()
	}
	mgr, err := sandbox.New(context.Background(), cfg, func() *config.Model { return m }, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	return &leaseEnv{c: c, slug: slug, ns: ns, model: m, m: mgr}
}

// acquire takes a lease of claude_local for the agent pinned to the real
// node, with config c (its Company the env's) and run runID; it fails t
// when the acquire fails.
func (e *leaseEnv) acquire(ctx context.Context, t testing.TB, c sandbox.EnvironmentConfig, runID string) sandbox.LeaseInfo {
	t.Helper()
	c.Company = e.slug
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: c, AdapterType: "claude_local", RunID: runID, AgentID: pinnedAgentID})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return info
}

// checkExecs runs the first executes of a lease acquired with EnvAllow
// GREETING: argv, env and stdin (to EOF) reach the command; its stdout,
// stderr and exit code come back.
func (e *leaseEnv) checkExecs(t testing.TB, id string) {
	t.Helper()
	stdin := "line one\nline two\n"
	r := e.exec(t, id, sandbox.ExecParams{Command: "sh", Args: []string{"-c", `printf '%s|%s|' "$1" "$GREETING"; cat; echo EOF`, "sh", "a b  c"},
		Env: map[string]string{"GREETING": "hello"}, Stdin: &stdin})
	if want := "a b  c|hello|" + stdin + "EOF\n"; r.Stdout != want || code(r) != 0 {
		t.Errorf("argv, env, stdin: stdout %q exit %d, want %q 0 (stderr %q)", r.Stdout, code(r), want, r.Stderr)
	}
	r = e.exec(t, id, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}})
	if code(r) != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Errorf("exit %d stdout %q stderr %q, want 3 out err", code(r), r.Stdout, r.Stderr)
	}
}

func (e *leaseEnv) exec(t testing.TB, id string, p sandbox.ExecParams) sandbox.ExecResult {
	t.Helper()
	p.LeaseID = id
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := e.m.Execute(ctx, p, nil)
	if err != nil {
		t.Fatalf("execute %s %q: %v", p.Command, p.Args, err)
	}
	return r
}

// A lease of pcsync's claude image on a real kubelet, for an agent that
// selects the real node and tolerates its taint: the image's own
// pcsync is the command server, PID 1, with no init container; executes
// pass argv, env and stdin (to EOF) and give exit codes; a timeout kills
// the command's whole group; a background process outlives its command;
// the root filesystem is read-only and HOME and the workspace writable;
// release answers once the pod is gone.
func TestLeaseOnRealNode(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnv(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{EnvAllow: []string{"GREETING"}}, "run-1")
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != e.c.RealNode().Name() || len(pod.Spec.InitContainers) != 0 ||
		pod.Spec.Containers[0].Image != images.Ref(p.Registry, images.Agent("claude"), imageTag) {
		t.Errorf("lease pod on %s, %d init containers, image %s; want the real node (its agent's nodeSelector and toleration), none, pcsync's claude image",
			pod.Spec.NodeName, len(pod.Spec.InitContainers), pod.Spec.Containers[0].Image)
	}

	e.checkExecs(t, info.ID)
	r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "cat /proc/1/cmdline | tr '\\0' ' '"}})
	if !strings.HasPrefix(r.Stdout, images.ServerPath+" sandbox-server serve") {
		t.Errorf("PID 1 is %q, want the image's own pcsync command server", r.Stdout)
	}

	// The filesystem: read-only root, writable HOME, workspace and /tmp.
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c",
		`for d in / /usr/local/bin "$HOME" /workspace /tmp; do if touch "$d/.w" 2>/dev/null; then echo "$d rw"; else echo "$d ro"; fi; done`}})
	if want := "/ ro\n/usr/local/bin ro\n" + leasepod.PodHome + " rw\n/workspace rw\n/tmp rw\n"; r.Stdout != want {
		t.Errorf("filesystem:\n%s\nwant:\n%s", r.Stdout, want)
	}

	// A background process outlives its command.
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "nohup sleep 300 >/dev/null 2>&1 & echo $!"}})
	bg := strings.TrimSpace(r.Stdout)
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "kill -0 " + bg + " && echo alive"}})
	if r.Stdout != "alive\n" {
		t.Errorf("background process %s did not outlive its command: %q %q", bg, r.Stdout, r.Stderr)
	}

	// A timeout kills the command's whole process group.
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "sleep 60 & echo $!; wait"}, Timeout: time.Second})
	child := strings.TrimSpace(r.Stdout)
	if !r.TimedOut || child == "" {
		t.Fatalf("timed-out command: timedOut %v stdout %q", r.TimedOut, r.Stdout)
	}
	r = e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "kill -0 " + child + " 2>/dev/null && echo alive || echo gone"}})
	if r.Stdout != "gone\n" {
		t.Errorf("the timed-out command's child %s: %q, want gone", child, r.Stdout)
	}

	state, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true})
	if err != nil || state != sandbox.ReceiptDestroyed {
		t.Fatalf("release: %v %v", state, err)
	}
	if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); err == nil {
		t.Errorf("pod %s still exists after the release's receipt", info.ID)
	}
}

// A lease of an image that is none of pcsync's (a user's own) gets pcsync
// from the postStart hook of a first, regular container of pcsync's own
// image, and no init container; the command server then runs from the
// copy as the main container's PID 1, and executes run in the main
// container (the stream's and kubectl's default container).
func TestLeaseHelperContainer(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnv(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info := e.acquire(ctx, t, sandbox.EnvironmentConfig{Image: p.Foreign, EnvAllow: []string{"GREETING"}}, "")
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	helper := images.Ref(p.Registry, images.Pcsync, imageTag)
	if got, want := containerImages(pod), []string{leasepod.HelperContainerName + "=" + helper, leasepod.ContainerName + "=" + p.Foreign}; len(pod.Spec.InitContainers) != 0 || !slices.Equal(got, want) {
		t.Errorf("containers %v, %d init containers; want %v and none", got, len(pod.Spec.InitContainers), want)
	}
	// The lease is ready when its command server answers, which may be
	// before the kubelet's next relist reports the containers: both are
	// then reported running (the helper holds on).
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	if last, err := podwait.Until(wctx, e.c.Client(), e.ns, info.ID, func(p *corev1.Pod) (bool, error) {
		return p != nil && bothRunning(p), nil
	}); last != nil {
		pod = last
	} else if err != nil {
		t.Fatal(err)
	}
	wcancel()
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			t.Errorf("container %s after ready: %+v, want running", cs.Name, cs.State)
		}
	}
	e.checkExecs(t, info.ID)
	r := e.exec(t, info.ID, sandbox.ExecParams{Command: "sh", Args: []string{"-c", "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls -l " + leasepod.DefaultServerPath}})
	if !strings.HasPrefix(r.Stdout, leasepod.DefaultServerPath+" sandbox-server serve") || !strings.Contains(r.Stdout, "-r-xr-xr-x") {
		t.Errorf("PID 1 and the copy: %q, want the helper's copy of pcsync (mode 0555) as the command server", r.Stdout)
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID}); err != nil {
		t.Fatal(err)
	}
}

// bothRunning says whether the kubelet reports each of the pod's two
// containers running.
func bothRunning(pod *corev1.Pod) bool {
	n := 0
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			n++
		}
	}
	return n == 2
}

// A helper container whose hook cannot copy pcsync (a stand-in of pcsync's
// image whose install fails) fails the acquire at once with
// pod_not_starting, naming the containers' ends, instead of waiting for
// the lease's ready timeout (pod_not_ready); the control is
// TestLeaseHelperContainer, whose helper is pcsync's own image.
func TestLeaseHelperHookFails(t *testing.T) {
	p := pushImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	broken := testcluster.Get(t).RealNode().Registry().Host() + "/acme/broken-helper:" + imageTag
	o := testimages.DefaultStandInOptions()
	o.Tag = imageTag
	o.Files = map[string]string{strings.TrimPrefix(images.ServerPath, "/"): brokenHelper}
	if _, err := testimages.StandIn(ctx, testcluster.Get(t).RealNode().Registry(), broken, o); err != nil {
		t.Fatal(err)
	}
	e := newLeaseEnvWith(t, p, nil, func(o *sandbox.Options) { o.HelperImage = broken })
	_, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, Image: p.Foreign},
		AdapterType: "claude_local", AgentID: pinnedAgentID})
	var ue *sandbox.UserError
	if !errors.As(err, &ue) || ue.Code != sandbox.CodePodNotStarting || !strings.Contains(err.Error(), leasepod.HelperContainerName) {
		t.Fatalf("acquire with a helper whose hook fails: %v; want %s naming container %s", err, sandbox.CodePodNotStarting, leasepod.HelperContainerName)
	}
	t.Logf("acquire: %v", err)
}

// brokenHelper stands in for pcsync in a helper image: it holds as pcsync
// does, but its install (the postStart hook) fails.
const brokenHelper = `#!/bin/sh
case "$2" in
hold) trap 'exit 0' TERM; sleep 3600 & wait ;;
*) echo "broken helper: no $2" >&2; exit 3 ;;
esac
`

// containerImages lists pod's containers as name=image, in order.
func containerImages(pod *corev1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		out = append(out, c.Name+"="+c.Image)
	}
	return out
}

// A lease of an image its registry does not have fails at once, naming the
// image, instead of waiting for its pod.
func TestLeaseMissingImage(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnv(t, p)
	missing := e.c.RealNode().Registry().Host() + "/nobody/pcsync-agent-claude:never-pushed"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, Image: missing}, AdapterType: "claude_local", AgentID: pinnedAgentID})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "cannot pull image") {
		t.Fatalf("acquire of a missing image: %v; want an error naming %s", err, missing)
	}
}

func code(r sandbox.ExecResult) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// Where a lease lands follows its agent's scheduling, with the real node
// tainted NoSchedule and kwok's node schedulable: an agent that selects the
// real node without tolerating its taint gets no node at all (the
// scheduler names the taint, and the acquire says so); a lease of an agent
// the config does not declare gets the company's defaults and lands on
// kwok's node, never the real one.
func TestLeaseSchedulingOnRealNode(t *testing.T) {
	p := pushImages(t)
	e := newLeaseEnv(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// No toleration: the pod stays Pending, unschedulable for the taint.
	_, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, TimeoutMs: 20_000},
		AdapterType: "claude_local", AgentID: untoleratingAgentID})
	var ue *sandbox.UserError
	wantNeeds := "needs nodes kubernetes.io/hostname=" + e.c.RealNode().Name()
	if !errors.As(err, &ue) || ue.Code != "pod_unschedulable" || !strings.Contains(ue.Message, "untolerated taint") ||
		!strings.Contains(ue.Message, wantNeeds+" (") {
		t.Fatalf("acquire for an agent without the real node's toleration: %v; want pod_unschedulable: the scheduler's untolerated taint, %q and no toleration",
			err, wantNeeds)
	}
	t.Logf("refused: %s", ue.Message)

	// No agent declared in Git: the company's defaults, kwok's node. (Its
	// pod runs no command server; a short wait ends the Manager's attempts
	// to reach one, which the Manager's Close waits for.)
	info, err := e.m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, TimeoutMs: 10_000},
		AdapterType: "claude_local", AgentID: "5e1f0c1e-0000-4000-8000-0000000000ff"})
	if err != nil {
		t.Fatalf("acquire for an agent the config does not declare: %v", err)
	}
	pod, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (The API server's DefaultTolerationSeconds adds the not-ready and
	// unreachable tolerations to every pod.)
	tolerates := slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == testcluster.RealNodeTaintKey })
	if pod.Spec.NodeName != e.c.NodeName() || pod.Spec.NodeSelector != nil || tolerates {
		t.Errorf("lease pod of an undeclared agent on %q with nodeSelector %v, tolerations %v; want kwok's %s and the company's defaults (none)",
			pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Spec.Tolerations, e.c.NodeName())
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
}
