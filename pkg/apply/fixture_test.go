//go:build integration

package apply_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
)

// env is one test's corner of the shared cluster: its own ApplySet, namespaces and
// user agent (so the audit log shows its requests only).
type env struct {
	t      *testing.T
	c      *testcluster.Cluster
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	id     string // random suffix of every name
	parent apply.ParentRef
	ua     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := testcluster.Get(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	e := &env{
		t: t, c: c, cs: c.Client(), dyn: c.Dynamic(), id: id,
		parent: apply.ParentRef{Name: "pcsync", Namespace: "pcsync-sys-" + id},
		ua:     "pcsync-test-" + id,
	}
	e.cleanupNamespace(e.parent.Namespace)
	return e
}

// restConfig is the cluster's config with the env's user agent.
func (e *env) restConfig() *rest.Config {
	cfg := e.c.RESTConfig()
	cfg.UserAgent = e.ua
	return cfg
}

// manager returns a Manager of the env's ApplySet.
func (e *env) manager(mods ...func(*apply.ManagerOptions)) *apply.Manager {
	e.t.Helper()
	opts := apply.DefaultManagerOptions()
	opts.ApplySet = e.parent
	opts.ToolVersion = "v0.0.0-test"
	for _, mod := range mods {
		mod(&opts)
	}
	m, err := apply.NewManager(e.restConfig(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) cleanupNamespace(ns string) {
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := e.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("cleanup: delete namespace %s: %v", ns, err)
		}
	})
}

// companyNS is the namespace of company i.
func (e *env) companyNS(i int) string { return fmt.Sprintf("t%s-c%d", e.id, i) }

// companies returns the tenant objects of companies 0..n-1, 8 per company, shaped as
// pkg/render shapes them.
func (e *env) companies(n int) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := 0; i < n; i++ {
		ns := e.companyNS(i)
		e.cleanupNamespace(ns)
		out = append(out, tenantObjects(ns, fmt.Sprintf("company-%d", i))...)
	}
	return out
}

// tenantObjects mirrors pkg/render's tenant: Namespace, ServiceAccount, Role,
// RoleBinding, ResourceQuota, LimitRange and two NetworkPolicies.
func tenantObjects(ns, company string) []*unstructured.Unstructured {
	labels := func() map[string]any {
		return map[string]any{"app.kubernetes.io/managed-by": "pcsync", "paperclip.io/company": company}
	}
	obj := func(apiVersion, kind, name string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels()}}
	}
	nsLabels := labels()
	nsLabels["paperclip.io/company-id"] = company + "-id"
	for _, mode := range []string{"enforce", "audit", "warn"} {
		nsLabels["pod-security.kubernetes.io/"+mode] = "restricted"
	}
	namespace := map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": nsLabels}}
	sa := obj("v1", "ServiceAccount", "paperclip-tenant-sa")
	role := obj("rbac.authorization.k8s.io/v1", "Role", "paperclip-tenant-role")
	role["rules"] = []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/log"}, "verbs": []any{"get"}}}
	rb := obj("rbac.authorization.k8s.io/v1", "RoleBinding", "paperclip-tenant-rb")
	rb["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "paperclip-tenant-role"}
	rb["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": "paperclip-tenant-sa", "namespace": ns}}
	quota := obj("v1", "ResourceQuota", "paperclip-quota")
	quota["spec"] = map[string]any{"hard": map[string]any{"pods": "20", "requests.cpu": "10",
		"requests.memory": "20Gi", "limits.cpu": "20", "limits.memory": "40Gi"}}
	lr := obj("v1", "LimitRange", "paperclip-limits")
	lr["spec"] = map[string]any{"limits": []any{map[string]any{"type": "Container",
		"max": map[string]any{"cpu": "4", "memory": "8Gi"}, "min": map[string]any{"cpu": "100m", "memory": "128Mi"},
		"default":        map[string]any{"cpu": "1", "memory": "2Gi"},
		"defaultRequest": map[string]any{"cpu": "250m", "memory": "512Mi"}}}}
	deny := obj("networking.k8s.io/v1", "NetworkPolicy", "paperclip-deny-all")
	deny["spec"] = map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"}}
	port := func(proto string, p int64) map[string]any { return map[string]any{"protocol": proto, "port": p} }
	egress := obj("networking.k8s.io/v1", "NetworkPolicy", "paperclip-egress-allow")
	egress["spec"] = map[string]any{
		"podSelector": map[string]any{"matchLabels": map[string]any{"paperclip.io/role": "agent"}},
		"policyTypes": []any{"Egress"},
		"egress": []any{
			map[string]any{"to": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-dns"}}}},
				"ports": []any{port("UDP", 53), port("TCP", 53)}},
			map[string]any{"to": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "paperclip"}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app": "paperclip-server"}}}},
				"ports": []any{port("TCP", 3100)}},
			map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0",
				"except": []any{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}}}},
				"ports": []any{port("TCP", 443)}},
		},
	}
	var out []*unstructured.Unstructured
	for _, o := range []map[string]any{namespace, sa, role, rb, quota, lr, deny, egress} {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// ciliumPolicy is a company's CiliumNetworkPolicy (cilium egress mode).
func ciliumPolicy(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
		"metadata": map[string]any{"name": "paperclip-egress-fqdn", "namespace": ns,
			"labels": map[string]any{"app.kubernetes.io/managed-by": "pcsync"}},
		"spec": map[string]any{
			"endpointSelector": map[string]any{"matchLabels": map[string]any{"paperclip.io/role": "agent"}},
			"egress": []any{map[string]any{"toFQDNs": []any{map[string]any{"matchName": "api.anthropic.com"}},
				"toPorts": []any{map[string]any{"ports": []any{map[string]any{"port": "443", "protocol": "TCP"}}}}}},
		},
	}}
}

// actions maps each object (Kind/ns/name) of a change set to its action.
func actions(r *apply.ChangeSet) map[string]apply.Action {
	out := map[string]apply.Action{}
	for _, o := range r.Objects {
		out[o.Ref.String()] = o.Action
	}
	return out
}

// allActions maps every ref of objs to action a.
func allActions(objs []*unstructured.Unstructured, a apply.Action) map[string]apply.Action {
	out := map[string]apply.Action{}
	for _, o := range objs {
		out[apply.RefOf(o).String()] = a
	}
	return out
}

// mutatingAudit returns the env's mutating requests recorded in the audit log.
func (e *env) mutatingAudit() []string {
	e.t.Helper()
	events, err := e.c.AuditEvents(func(ev testcluster.AuditEvent) bool { return ev.UserAgent == e.ua })
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		out = append(out, ev.Verb+" "+ev.RequestURI)
	}
	sort.Strings(out)
	return out
}

// kubectl runs kubectl against the cluster with ApplySet support on.
func (e *env) kubectl(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", e.c.KubeconfigPath()}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECTL_APPLYSET=true")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// writeManifest writes objs as one YAML stream and returns its path.
func (e *env) writeManifest(objs []*unstructured.Unstructured) string {
	e.t.Helper()
	var sb strings.Builder
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			e.t.Fatal(err)
		}
		sb.WriteString("---\n")
		sb.Write(b)
	}
	p := filepath.Join(e.t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitDeploymentsSettled waits until the deployment controller has written its
// revision annotation to every Deployment that cs applied and observed its generation. A
// controller's write landing between the reference path's read of the live object
// and its dry run would otherwise show up as a change that neither path made.
func (e *env) waitDeploymentsSettled(ctx context.Context, cs *apply.ChangeSet) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range cs.Objects {
		o := c.Ref
		if o.Kind != "Deployment" || c.Action == apply.ActionFailed {
			continue
		}
		for {
			d, err := e.cs.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err == nil && d.Annotations["deployment.kubernetes.io/revision"] != "" &&
				d.Status.ObservedGeneration == d.Generation {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("%s not settled by the deployment controller after 60s (err %v)", o, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
