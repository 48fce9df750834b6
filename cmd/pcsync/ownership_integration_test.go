//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// namespaceState is what must stay byte-identical in a namespace pcsync does
// not own: the Namespace's labels and annotations, and every object in it
// (kind/name → resourceVersion; for the running pod, what anyone but the
// scheduler and the node wrote).
func namespaceState(t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["namespace"] = fmt.Sprint(n.ResourceVersion, n.Labels, n.Annotations)
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			out["configmap/"+c.Name] = c.ResourceVersion
		}
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		var managers []string
		for _, f := range p.ManagedFields {
			if f.Subresource == "" {
				managers = append(managers, f.Manager)
			}
		}
		sort.Strings(managers)
		out["pod/"+p.Name] = fmt.Sprint(p.Labels, p.Annotations, managers, p.Status.Phase)
	}
	for kind, list := range map[string]func() (int, error){
		"networkpolicies": func() (int, error) {
			l, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		"roles": func() (int, error) {
			l, err := cs.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		"resourcequotas": func() (int, error) {
			l, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
	} {
		n, err := list()
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = fmt.Sprint(n)
	}
	return out
}

// TestForeignNamespaceUntouchedByEveryVerb: the common GitOps layout runs
// the Paperclip server in paperclip-system, and a company named "system"
// renders to it. diff, apply --prune and a daemon reconcile leave that
// namespace, its running pod and its ConfigMap as they are, say whose it is
// and how to adopt it, and still apply the other company. Adopted by its
// mark, it is taken; once the company goes, prune lets go of it and deletes
// only what pcsync added.
func TestForeignNamespaceUntouchedByEveryVerb(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ctx := context.Background()
	const ns, set = "paperclip-system", "pcsync-foreign"
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "paperclip-shop", metav1.DeleteOptions{})
	})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"app.kubernetes.io/part-of": "paperclip"}}}, metav1.CreateOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-server", Labels: map[string]string{"app": "paperclip-server"}},
		Spec: corev1.PodSpec{NodeName: c.NodeName(), Containers: []corev1.Container{{Name: "server", Image: "paperclip:2026.916.1"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-env"},
		Data: map[string]string{"DATABASE_HOST": "postgres"}}, metav1.CreateOptions{FieldManager: "argocd-controller"}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("the server pod is not Running on %s: %v", c.NodeName(), err)
	}
	before := namespaceState(t, cs, ns)

	dir := t.TempDir()
	company := func(name string) string {
		return "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: " + name + "}\nspec: {id: " + name + "-id, agents: []}\n"
	}
	writeConfig := func(companies ...string) {
		var b strings.Builder
		for _, n := range companies {
			b.WriteString("---\n" + company(n))
		}
		if err := os.WriteFile(filepath.Join(dir, "companies.yaml"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("system", "shop")
	adopt := "kubectl annotate namespace/paperclip-system pcsync.io/adopt=system"

	code, stdout, stderr := runCmd(t, newDiffCmd, c.KubeconfigPath(), "--applyset", set, "--prune", dir)
	if code == 0 || !strings.Contains(stderr, "Namespace/paperclip-system exists and is not in ApplySet") ||
		!strings.Contains(stderr, "field managers: argocd-controller") || !strings.Contains(stderr, adopt) {
		t.Errorf("diff: exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "+  name: paperclip-shop") {
		t.Errorf("diff does not show the other company:\n%s", stdout)
	}
	code, stdout, stderr = runCmd(t, newApplyCmd, c.KubeconfigPath(), "--applyset", set, "--prune", dir)
	if code == 0 || !strings.Contains(stderr, adopt) || !strings.Contains(stdout, "namespace/paperclip-shop created") {
		t.Errorf("apply: exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = pcsync(t, "daemon", "--kubeconfig", c.KubeconfigPath(), "--config", dir, "--applyset", set,
		"--prune", "--no-runs", "--once", "--log-level", "warn")
	if !strings.Contains(stderr, adopt) {
		t.Errorf("daemon --once: exit %d; its log does not say how to adopt the namespace:\n%s", code, stderr)
	}
	t.Logf("daemon --once: exit %d; log:\n%s", code, stderr)
	if diff := cmp.Diff(before, namespaceState(t, cs, ns)); diff != "" {
		t.Fatalf("paperclip-system changed (-before +after):\n%s", diff)
	}

	// Adopted by its mark, the namespace is the company's.
	patch := []byte(`{"metadata":{"annotations":{"pcsync.io/adopt":"system"}}}`)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCmd(t, newApplyCmd, c.KubeconfigPath(), "--applyset", set, "--prune", dir)
	if code != 0 || !strings.Contains(stdout, "networkpolicy.networking.k8s.io/paperclip-deny-all created (paperclip-system)") {
		t.Fatalf("apply after adopting: exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// The company goes: prune deletes what pcsync made in paperclip-system
	// and lets go of the namespace.
	writeConfig("shop")
	code, stdout, stderr = runCmd(t, newApplyCmd, c.KubeconfigPath(), "--applyset", set, "--prune", "--prune-floor", "1", dir)
	if code != 0 || !strings.Contains(stdout, "namespace/paperclip-system released") ||
		!strings.Contains(stdout, "networkpolicy.networking.k8s.io/paperclip-deny-all pruned (paperclip-system)") {
		t.Fatalf("prune: exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	after := namespaceState(t, cs, ns)
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app.kubernetes.io/part-of": "paperclip", "kubernetes.io/metadata.name": ns}
	if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
		t.Errorf("released namespace labels (-want +got):\n%s", diff)
	}
	for _, k := range []string{"configmap/paperclip-env", "pod/paperclip-server", "networkpolicies", "roles", "resourcequotas"} {
		if after[k] != before[k] {
			t.Errorf("%s: %s after the prune, %s before", k, after[k], before[k])
		}
	}
}
