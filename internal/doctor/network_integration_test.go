//go:build integration

package doctor

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// applyTenant writes a config of one company (its namespace under a fresh
// prefix) into a temporary directory, applies what it renders as pcsync
// apply does, and returns the directory, the model and the namespace.
func applyTenant(t *testing.T, c *testcluster.Cluster) (string, *config.Model, string) {
	t.Helper()
	ctx := context.Background()
	ns := c.Namespace(t, "netcheck", nil) // holds the ApplySet parent
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1]+"t-", ns[i+1:]
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: %s\n  images: {registry: reg.example/pcsync}\n", prefix))
	writeFile(t, filepath.Join(dir, "acme.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: acme-1\n  agents: [{name: coder, adapter: claude_local}]\n", slug))
	m, err := config.Load(ctx, dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Render(m, render.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: ns}
	mgr, err := apply.NewManager(c.RESTConfig(), mo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Apply(ctx, out.Objects, apply.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant := m.Namespace(&m.Companies[0])
	t.Cleanup(func() {
		_ = c.Client().CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{})
	})
	return dir, m, tenant
}

// On kwok's node no container runs: the probe pod is admitted in the
// applied tenant namespace (Pod Security "restricted", its quota and
// LimitRange) and scheduled, but never reports, and doctor fails closed,
// saying why; the probe pod is deleted. Before the tenant is applied the
// check is a warning; with no NetworkPolicy in the namespace it fails
// before any pod is made.
func TestNetworkCheckFailsClosedOnKwok(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	dir, _, tenant := applyTenant(t, c)

	// A probe pod a killed doctor left, ended by its deadline (kwok fails
	// it): swept; one still running (another doctor's) is left alone.
	for name, sim := range map[string]map[string]string{
		"pcsync-netprobe-old":  testcluster.FailWith("DeadlineExceeded", 1, 0),
		"pcsync-netprobe-busy": nil,
	} {
		labels := map[string]string{LabelProbe: ProbeLabelNetwork}
		maps.Copy(labels, sim)
		_, err := c.Client().CoreV1().Pods(tenant).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x", SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if _, err := podwait.Until(wctx, c.Client(), tenant, "pcsync-netprobe-old", func(p *corev1.Pod) (bool, error) {
		return p != nil && p.Status.Phase == corev1.PodFailed, nil
	}); err != nil {
		t.Fatal(err)
	}

	opts := DefaultOptions()
	opts.ConfigDir, opts.RESTConfig = dir, c.RESTConfig()
	opts.Network.Timeout = 8 * time.Second
	r := Run(ctx, opts)
	got := detail(r, "network", "NetworkPolicies enforced")
	if st := status(r, "network"); st != StatusFail {
		t.Errorf("network check on kwok: %s (%s), want fail", st, got)
	}
	for _, want := range []string{"not proven that NetworkPolicies are enforced", "Pod/" + tenant + "/pcsync-netprobe-",
		"did not report", "phase Running on node " + c.NodeName()} {
		if !strings.Contains(got, want) {
			t.Errorf("detail %q lacks %q", got, want)
		}
	}
	pods, err := c.Client().CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: LabelProbe})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			left = append(left, p.Name)
		}
	}
	if d := cmp.Diff([]string{"pcsync-netprobe-busy"}, left); d != "" {
		t.Errorf("probe pods left (-want +got):\n%s", d)
	}
	_ = c.Client().CoreV1().Pods(tenant).Delete(ctx, "pcsync-netprobe-busy", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})

	// With the tenant's NetworkPolicies gone: no pod, a failure that says so.
	if err := c.Client().NetworkingV1().NetworkPolicies(tenant).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	r = Run(ctx, opts)
	if got := detail(r, "network", "NetworkPolicies enforced"); !strings.Contains(got, "has no NetworkPolicy") {
		t.Errorf("without policies: %q", got)
	}

	// Nothing applied: a warning.
	writeFile(t, filepath.Join(dir, "settings.yaml"),
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: never-applied-\n")
	r = Run(ctx, opts)
	var rows []string
	for _, ch := range r.Checks {
		if ch.Area == "network" {
			rows = append(rows, string(ch.Status)+"|"+ch.Detail)
		}
	}
	want := []string{"warn|not proven that NetworkPolicies are enforced: no company's namespace is applied yet (pcsync apply, or the daemon, creates them)"}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("nothing applied (-want +got):\n%s", d)
	}

	opts.SkipNetwork = true
	if st := status(Run(ctx, opts), "network"); st != StatusSkip {
		t.Errorf("SkipNetwork: %s, want skip", st)
	}
}

func status(r *Report, area string) Status {
	for _, c := range r.Checks {
		if c.Area == area {
			return c.Status
		}
	}
	return ""
}

// The network plugin is named by the DaemonSet that owns its pods in
// kube-system (read through the pods, which pcsync may list; a DaemonSet of
// no known plugin, such as kube-proxy, names none). The test cluster runs
// no DaemonSet controller: the pods are made by hand, owned by real
// DaemonSets so that the garbage collector keeps them.
func TestNetworkPluginNamed(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	cs := c.Client()
	if got := networkPlugins(ctx, cs); len(got) != 0 {
		t.Fatalf("plugins before any: %v", got)
	}
	for _, name := range []string{"kindnet", "kube-proxy"} {
		labels := map[string]string{"app": name}
		ds, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/" + name}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.AppsV1().DaemonSets("kube-system").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		_, err = cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-x1", Labels: labels, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, UID: ds.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: c.NodeName(), Containers: []corev1.Container{{Name: "c", Image: "example.invalid/" + name}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods("kube-system").Delete(context.Background(), name+"-x1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		})
	}
	if d := cmp.Diff([]string{"kindnet (DaemonSet kube-system/kindnet)"}, networkPlugins(ctx, cs)); d != "" {
		t.Errorf("plugins (-want +got):\n%s", d)
	}
}
