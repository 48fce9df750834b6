//go:build integration

package realnode

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// poolEnv is a tenant whose company declares warm pools, on the real node:
// its config directory is rewritten and reloaded by the test (a pool's
// image changed, the company removed), and the Manager reads the current
// model. Its pods request little, so that a pool and a burst of leases fit
// the real node's two cores.
type poolEnv struct {
	c        *testcluster.Cluster
	p        pushed
	slug, ns string
	dir      string
	stateDir string
	model    atomic.Pointer[config.Model]
}

// The environment variables of the pool daemon subprocess (runPoolDaemon).
const (
	poolDaemonConfig     = "PCSYNC_TEST_POOL_DAEMON_CONFIG"
	poolDaemonKubeconfig = "PCSYNC_TEST_POOL_DAEMON_KUBECONFIG"
	poolDaemonState      = "PCSYNC_TEST_POOL_DAEMON_STATE"
)

// newPoolEnv makes the tenant with companySpec (lines under the company's
// spec, beside its id and agents), applies it and loads the model.
func newPoolEnv(t testing.TB, p pushed, companySpec string) *poolEnv {
	t.Helper()
	c := testcluster.Get(t)
	ns := c.Namespace(t, "pool", nil)
	i := strings.LastIndexByte(ns, '-')
	e := &poolEnv{c: c, p: p, slug: ns[i+1:], ns: ns, dir: t.TempDir(), stateDir: t.TempDir()}
	e.write(t, ns[:i+1], companySpec, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	applyTenant(ctx, t, c, e.model.Load())
	return e
}

// write writes the config (the company only when withCompany) and loads it
// as the current model.
func (e *poolEnv) write(t testing.TB, prefix, companySpec string, withCompany bool) {
	t.Helper()
	node := e.c.RealNode()
	tol := node.Toleration()
	var sel []string
	for k, v := range node.NodeSelector() {
		sel = append(sel, fmt.Sprintf("%q: %q", k, v))
	}
	selector := "{" + strings.Join(sel, ", ") + "}"
	if prefix == "" {
		prefix = strings.TrimSuffix(e.ns, e.slug)
	}
	settings := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n"+
		"  namespacePrefix: %s\n  images: {registry: %s, allowList: ['%s/*/*']}\n"+
		"  defaults:\n    limitRange: {min: {cpu: 10m, memory: 16Mi}}\n    resources: {requests: {cpu: 20m, memory: 32Mi}, limits: {cpu: 200m, memory: 128Mi}}\n",
		prefix, e.p.Registry, e.c.RealNode().Registry().Host())
	company := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n  agents:\n"+
		"    - {name: pinned, adapter: claude_local, nodeSelector: %s, tolerations: [{key: %q, operator: %s, effect: %s}]}\n%s",
		e.slug, e.slug, selector, tol.Key, tol.Operator, tol.Effect, companySpec)
	if err := os.WriteFile(filepath.Join(e.dir, "settings.yaml"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cf := filepath.Join(e.dir, "company.yaml")
	if withCompany {
		if err := os.WriteFile(cf, []byte(company), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Remove(cf); err != nil {
		t.Fatal(err)
	}
	m, err := loadConfig(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.model.Store(m)
}

func loadConfig(dir string) (*config.Model, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lo := config.DefaultLoadOptions()
	lo.Images = config.ImageDefaults{Tag: imageTag}
	return config.Load(ctx, dir, lo)
}

// manager starts a sandbox Manager on the env's state directory that
// reads the current model; edit changes its options.
func (e *poolEnv) manager(t testing.TB, edit func(*sandbox.Options)) *sandbox.Manager {
	t.Helper()
	o := sandbox.DefaultOptions(e.stateDir)
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.ReadyTimeout = 3 * time.Minute
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if edit != nil {
		edit(&o)
	}
	m, err := sandbox.New(context.Background(), e.c.RESTConfig(), e.model.Load, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// acquire acquires a lease of the pool's pods: pcsync's claude image, for
// the pinned agent (unless image names another).
func (e *poolEnv) acquire(ctx context.Context, m *sandbox.Manager, image string) (sandbox.LeaseInfo, error) {
	return m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slug, Image: image},
		AdapterType: "claude_local", AgentID: pinnedAgentID})
}

// members lists the pool members in the namespace, as the API server has
// them (none being deleted).
func (e *poolEnv) members(t testing.TB) []corev1.Pod {
	t.Helper()
	l, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: pool.Label})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPool waits until the pools of the env's namespace satisfy ok (the
// Manager also sees, and drains, the members other tests left elsewhere).
func (e *poolEnv) waitPool(t testing.TB, m *sandbox.Manager, what string, ok func(ready, members int) bool) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		ready, members := 0, 0
		for _, s := range m.Pools() {
			if s.Namespace == e.ns {
				ready += s.Ready
				members += s.Members
			}
		}
		if ok(ready, members) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the pools are %+v", what, m.Pools())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitQuiet waits until the namespace holds no lease pod and no pod being
// deleted (but the tenant's egress proxy), and, when withPool, until m's pool has its 5 members Ready; then it
// lets the node settle.
func (e *poolEnv) waitQuiet(t testing.TB, m *sandbox.Manager, withPool bool) {
	t.Helper()
	if withPool {
		e.waitPool(t, m, "5 Ready members", func(ready, _ int) bool { return ready == 5 })
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var others []string
		for _, p := range l.Items {
			if p.Labels[agentpod.LabelRole] == agentpod.RoleEgressProxy {
				continue // the tenant's (egress mode proxy)
			}
			if _, member := p.Labels[pool.Label]; !member || p.DeletionTimestamp != nil {
				others = append(others, fmt.Sprintf("%s (%s, deleting %v, labels %v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Labels))
			}
		}
		if len(others) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for the namespace to hold only the pool: %d other pods: %s", len(others), strings.Join(others, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
}

// runPoolDaemon is the body of a subprocess that stands for a daemon to
// SIGKILL: a Manager on the config directory and state directory of its
// environment whose every pod create waits half a second, so that its
// refill is under way when the test kills it.
func runPoolDaemon() int {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(poolDaemonKubeconfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Wrap(slowPodCreates)
	m, err := loadConfig(os.Getenv(poolDaemonConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := sandbox.DefaultOptions(os.Getenv(poolDaemonState))
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	if _, err := sandbox.New(context.Background(), cfg, func() *config.Model { return m }, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	select {}
}

// slowPodCreates delays every pod create by half a second.
func slowPodCreates(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pods") {
			time.Sleep(500 * time.Millisecond)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
