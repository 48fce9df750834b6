//go:build integration

package statusctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// Every test binary of this package built with the integration tag runs
// one real control plane; the unit tests run alongside.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// waitLimit bounds every wait: a wait that runs out means what was
// awaited never came, not that it came late.
const waitLimit = 90 * time.Second

// checkout is a config repository as git-sync publishes it: a worktree
// per commit under root/.worktrees/<hash> and the link root/config to the
// current one.
type checkout struct {
	t      *testing.T
	root   string
	prefix string
}

func newCheckout(t *testing.T) *checkout {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return &checkout{t: t, root: t.TempDir(), prefix: "s" + hex.EncodeToString(b) + "-"}
}

// dir is the config directory the loop is given: the link.
func (k *checkout) dir() string { return filepath.Join(k.root, "config") }

// commit publishes a commit of the companies given (slug → extra spec
// lines) and returns its hash.
func (k *checkout) commit(companies map[string]string) string {
	k.t.Helper()
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	hash := hex.EncodeToString(b)
	wt := filepath.Join(k.root, ".worktrees", hash)
	if err := os.MkdirAll(wt, 0o755); err != nil {
		k.t.Fatal(err)
	}
	files := map[string]string{"settings.yaml": fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: test}\nspec:\n  namespacePrefix: %s\n", k.prefix)}
	for slug, extra := range companies {
		files[slug+".yaml"] = fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %s}\nspec:\n  id: id-%s\n%s"+
			"  agents: [{name: coder, adapter: claude_local}]\n", slug, slug, extra)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(wt, name), []byte(body), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
	tmp := filepath.Join(k.root, ".config.tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Join(".worktrees", hash), tmp); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, k.dir()); err != nil {
		k.t.Fatal(err)
	}
	return hash
}

// counter counts the requests that write CompanyStatus objects or
// Events.
type counter struct {
	writes atomic.Int64
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && (strings.Contains(r.URL.Path, "/"+cs.Resource) || strings.Contains(r.URL.Path, "/events")) {
			c.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// rig is a reconcile loop applying to the test cluster, with prune, and
// the controller observing it, as the daemon runs them while it leads.
type rig struct {
	t        *testing.T
	c        *testcluster.Cluster
	ns       string
	loop     *reconcile.Loop
	ctrl     *Controller
	writes   *counter
	mu       sync.Mutex
	outcomes []reconcile.Outcome
	seen     chan struct{}
}

func newRig(t *testing.T, k *checkout) *rig {
	c := testcluster.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.ApplyCRD(ctx, cs.CRD, cs.CRDName); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, c: c, ns: c.Namespace(t, "status", nil), writes: &counter{}, seen: make(chan struct{}, 1)}
	t.Cleanup(func() { deleteNamespaces(c, k.prefix) })
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: r.ns}
	m, err := apply.NewManager(c.RESTConfig(), mo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	cfg.Wrap(r.writes.wrap)
	so := DefaultOptions()
	so.Namespace, so.Owner = r.ns, apply.ParentID("pcsync", r.ns)
	so.Logger = slog.New(slog.DiscardHandler)
	so.Trigger = func() { r.loop.Trigger() }
	if r.ctrl, err = New(cfg, so); err != nil {
		t.Fatal(err)
	}
	o := reconcile.DefaultOptions(k.dir())
	o.Watch, o.Apply.Prune = false, true
	o.Interval, o.RetryMin = 2*time.Hour, time.Hour // reconciles only when the test asks
	o.Logger = slog.New(slog.DiscardHandler)
	o.Observe = func(out reconcile.Outcome) {
		r.ctrl.Observe(out)
		r.mu.Lock()
		r.outcomes = append(r.outcomes, out)
		r.mu.Unlock()
		select {
		case r.seen <- struct{}{}:
		default:
		}
	}
	if r.loop, err = reconcile.New(m, o); err != nil {
		t.Fatal(err)
	}
	if err := r.ctrl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; r.ctrl.Wait() })
	return r
}

// reconciled waits for the first reconcile after the n-th whose revision
// is rev and returns it and its count.
func (r *rig) reconciled(n int, rev string) (reconcile.Outcome, int) {
	r.t.Helper()
	deadline := time.After(waitLimit)
	for {
		r.mu.Lock()
		outs := r.outcomes
		r.mu.Unlock()
		for i := n; i < len(outs); i++ {
			if outs[i].Revision == rev {
				return outs[i], i + 1
			}
		}
		select {
		case <-r.seen:
		case <-deadline:
			r.t.Fatalf("no reconcile of revision %s after the %d-th", rev, n)
		}
	}
}

// count is the number of reconciles observed.
func (r *rig) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.outcomes)
}

// status waits until company name's status satisfies ok, and returns it.
func (r *rig) status(name, what string, ok func(*cs.CompanyStatus) bool) *cs.CompanyStatus {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var last *cs.CompanyStatus
	var err error
	for {
		last, err = cs.Get(ctx, r.c.Dynamic(), r.ns, name)
		if err == nil && ok(last) {
			return last
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("status of %s: not %s; last %+v (error %v)", name, what, last, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gone waits until company name has no status object.
func (r *rig) gone(name string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		_, err := r.c.Dynamic().Resource(cs.GVR).Namespace(r.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("status of %s: not deleted (%v)", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventReasons are the types and reasons of the Events recorded on
// company name's status, sorted.
func (r *rig) eventReasons(name string) []string {
	r.t.Helper()
	l, err := r.c.Client().CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + cs.Kind + ",involvedObject.name=" + name})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Type+"/"+e.Reason)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// deleteNamespaces deletes the namespaces whose names start with prefix.
func deleteNamespaces(c *testcluster.Cluster, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ns := range l.Items {
		if strings.HasPrefix(ns.Name, prefix) {
			_ = c.Client().CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		}
	}
}
