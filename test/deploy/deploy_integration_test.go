//go:build integration

package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/doctor"
	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// Every test binary of this package runs one real control plane.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// serviceAccount is the user pcsync runs as with deploy/base.
const serviceAccount = "system:serviceaccount:pcsync-system:pcsync"

// warnings collects the API server's warnings (Pod Security "warn" mode,
// deprecations).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		w.mu.Lock()
		w.list = append(w.list, text)
		w.mu.Unlock()
	}
}

// applier server-side applies unstructured objects.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: "deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	_, err = ri.Apply(ctx, o.GetName(), o, opts)
	return err
}

// TestBaseServerSideDryRun renders deploy/base and server-side dry-run
// applies every object; pcsync's pod passes Pod Security "restricted" in
// its namespace, which enforces it.
func TestBaseServerSideDryRun(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	objs := build(t)

	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(kinds)
	want := []string{"ClusterRole/pcsync", "ClusterRole/pcsync-tenant", "ClusterRoleBinding/pcsync",
		"CustomResourceDefinition/companystatuses.pcsync.io", "Deployment/pcsync", "Namespace/pcsync-system",
		"PersistentVolumeClaim/pcsync-spool", "Role/pcsync", "RoleBinding/pcsync",
		"Service/pcsync-metrics", "ServiceAccount/pcsync"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("objects of deploy/base (-want +got):\n%s", diff)
	}
	ns := typed[corev1.Namespace](t, testkustomize.Find(objs, "Namespace", "pcsync-system"))
	if diff := cmp.Diff(map[string]string{"enforce": "restricted", "audit": "restricted", "warn": "restricted"}, map[string]string{
		"enforce": ns.Labels["pod-security.kubernetes.io/enforce"], "audit": ns.Labels["pod-security.kubernetes.io/audit"],
		"warn": ns.Labels["pod-security.kubernetes.io/warn"]}); diff != "" {
		t.Errorf("Pod Security labels of pcsync-system (-want +got):\n%s", diff)
	}

	cfg := c.RESTConfig()
	w := &warnings{}
	cfg.WarningHandler = w
	a := newApplier(t, cfg)
	// Namespaced objects can only be dry-run in a namespace that exists,
	// and a pod only with its service account.
	for _, o := range []*unstructured.Unstructured{testkustomize.Find(objs, "Namespace", "pcsync-system"), testkustomize.Find(objs, "ServiceAccount", "pcsync")} {
		if err := a.apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deleteNamespace(t, c.Client(), "pcsync-system") })
	for _, o := range objs {
		if err := a.apply(ctx, o, true); err != nil {
			t.Errorf("%s/%s: server-side dry run: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if len(w.list) > 0 {
		t.Errorf("API server warnings (Pod Security warn mode, deprecations):\n%s", strings.Join(w.list, "\n"))
	}

	// The pod the Deployment makes, as the ReplicaSet controller would
	// create it: admitted under enforce=restricted.
	dep := typed[appsv1.Deployment](t, testkustomize.Find(objs, "Deployment", "pcsync"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "pcsync-", Namespace: "pcsync-system", Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	if err := createWhenSAExists(ctx, c.Client(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("pcsync's pod in pcsync-system: %v", err)
	}
}

// TestRBACIsSufficient applies deploy/base's RBAC and, as pcsync's service
// account, does what the daemon does: doctor's self-check passes, a config
// is applied and a removed company pruned (Namespace included), the leader
// Lease is taken, and pcsync reads its own pod. And no more (least privilege
// per tenant): it creates a Job and a Secret in a tenant namespace once the
// tenant (with its RoleBinding pcsync) is applied, not before, and never in
// kube-system.
func TestRBACIsSufficient(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	objs := build(t)
	a := newApplier(t, c.RESTConfig())
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		for _, o := range objs {
			if o.GetKind() == kind {
				if err := a.apply(ctx, o, false); err != nil {
					t.Fatalf("%s/%s: %v", kind, o.GetName(), err)
				}
			}
		}
	}
	cs := c.Client()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, "pcsync", metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, "pcsync", metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, render.PcsyncTenantClusterRole, metav1.DeleteOptions{})
		deleteNamespace(t, cs, "pcsync-system")
	})
	sa := c.RESTConfig()
	sa.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	saClient, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}

	// pcsync's own pod (created by the test as the Deployment would).
	dep := typed[appsv1.Deployment](t, testkustomize.Find(objs, "Deployment", "pcsync"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pcsync-5c4f-x1", Namespace: "pcsync-system"}, Spec: dep.Spec.Template.Spec}
	if err := createWhenSAExists(ctx, cs, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(nsFile, []byte("pcsync-system"), 0o644); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"POD_NAME": pod.Name}[k] }
	self, err := introspect.Detect(ctx, saClient, introspect.Options{NamespaceFile: nsFile, Getenv: getenv})
	if err != nil {
		t.Errorf("reading its own pod as %s: %v", serviceAccount, err)
	} else if self.ServiceAccount != "pcsync" {
		t.Errorf("own pod: %+v", self)
	}

	// doctor's RBAC self-check, as the service account.
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "r" + hex.EncodeToString(b) + "-"
	dir := t.TempDir()
	writeConfig(t, dir, prefix, "acme", "globex")
	dopts := doctor.DefaultOptions()
	dopts.RESTConfig, dopts.LeaseNamespace, dopts.ConfigDir = sa, "pcsync-system", dir
	dopts.Introspect = introspect.Options{NamespaceFile: nsFile, Getenv: getenv}
	// kwok's node runs no probe: the network check waits this long.
	dopts.Network.Timeout = 10 * time.Second
	r := doctor.Run(ctx, dopts)
	// No tenant is applied yet: the per-tenant rights are not held
	// anywhere, and doctor says it checks them once a tenant exists.
	if diff := cmp.Diff([]string{"permissions ok", "tenant permissions skip"}, rbacRows(r)); diff != "" {
		t.Errorf("doctor as %s before apply: rbac rows (-want +got):\n%s", serviceAccount, diff)
	}
	// Nor does pcsync hold them in the tenant namespace before its tenant
	// (and RoleBinding pcsync) is applied.
	for _, ra := range tenantRights(prefix + "acme") {
		if allowed(t, cs, ra) {
			t.Errorf("%s may %s %s in %s before its tenant is applied", serviceAccount, ra.Verb, ra.Resource, ra.Namespace)
		}
	}

	// Apply, then prune a company, as the service account.
	mo := apply.DefaultManagerOptions()
	// The parent deployment.yaml names (--applyset, --applyset-namespace):
	// the one Secret the Role lets pcsync read.
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: "pcsync-system"}
	m, err := apply.NewManager(sa, mo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, slug := range []string{"acme", "globex"} {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), prefix+slug, metav1.DeleteOptions{})
		}
	})
	ao := apply.DefaultApplyOptions()
	ao.Prune, ao.PruneMax = true, intstr.FromString("100%")
	report, err := m.Apply(ctx, renderDir(t, dir), ao)
	if err != nil || report.Err() != nil {
		t.Fatalf("apply as %s: %v %v", serviceAccount, err, report.Err())
	}
	writeConfig(t, dir, prefix, "acme")
	if err := os.Remove(filepath.Join(dir, "globex.yaml")); err != nil {
		t.Fatal(err)
	}
	report, err = m.Apply(ctx, renderDir(t, dir), ao)
	if err != nil || report.Err() != nil {
		t.Fatalf("apply --prune as %s: %v %v", serviceAccount, err, report.Err())
	}
	var ns []string
	for _, o := range report.Objects {
		if o.Ref.Kind == "Namespace" && o.Action != apply.ActionUnchanged {
			ns = append(ns, o.Ref.Name+" "+string(o.Action)+o.Note)
		}
	}
	// pcsync may not delete Namespaces: the emptied one is retained.
	if len(ns) != 1 || !strings.HasPrefix(ns[0], prefix+"globex retained") {
		t.Errorf("namespaces changed by the prune: %q, want %s retained", ns, prefix+"globex")
	}
	for _, o := range report.Objects {
		if o.Ref.Namespace == prefix+"globex" && o.Action != apply.ActionPruned {
			t.Errorf("%s %s/%s: %s, want pruned", o.Ref.Kind, o.Ref.Namespace, o.Ref.Name, o.Action)
		}
	}

	// The companies' statuses, as the daemon records them.
	checkStatusRights(t, c, sa, dir, report)

	// doctor's Secret checks, as the service account, which cannot read
	// Secrets: one that exists, one that does not.
	if _, err := cs.CoreV1().Secrets(prefix+"acme").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api-keys"},
		StringData: map[string]string{"ANTHROPIC_API_KEY": "sk-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = doctor.Run(ctx, dopts)
	// The tenant is applied: doctor checks the per-tenant rights there.
	if diff := cmp.Diff([]string{"permissions ok"}, rbacRows(r)); diff != "" {
		t.Errorf("doctor as %s after apply: rbac rows (-want +got):\n%s", serviceAccount, diff)
	}
	for _, ch := range r.Checks {
		if ch.Area == "rbac" && !strings.Contains(ch.Detail, "the per-tenant ones in "+prefix+"acme") {
			t.Errorf("doctor as %s after apply: %q does not say it checked the per-tenant rights in %sacme", serviceAccount, ch.Detail, prefix)
		}
	}
	// The network check, as the service account: its probe pod is created
	// (and deleted) in the applied tenant namespace; kwok's node runs no
	// container, so it never reports and doctor fails closed saying so (a
	// missing right would say "forbidden" instead).
	for _, ch := range r.Checks {
		if ch.Area == "network" && (ch.Status != doctor.StatusFail || !strings.Contains(ch.Detail, "did not report") ||
			!strings.Contains(ch.Detail, "Pod/"+prefix+"acme/pcsync-netprobe-")) {
			t.Errorf("doctor's network check as %s on kwok: %s %q; want a failure: the probe pod in %sacme did not report",
				serviceAccount, ch.Status, ch.Detail, prefix)
		}
	}
	var secretRows []string
	for _, ch := range r.Checks {
		if ch.Area == "secrets" && strings.HasPrefix(ch.Name, prefix+"acme/") {
			secretRows = append(secretRows, fmt.Sprintf("%s %s %s", ch.Name, ch.Status, ch.Detail))
		}
	}
	sort.Strings(secretRows)
	wantRows := []string{
		prefix + "acme/api-keys " + string(doctor.StatusOK) + " secretRef exists",
		prefix + "acme/not-there " + string(doctor.StatusWarn) + " optional secretRef does not exist: agents of acme run without its keys",
	}
	if diff := cmp.Diff(wantRows, secretRows); diff != "" {
		t.Errorf("doctor's secret checks as %s (-want +got):\n%s", serviceAccount, diff)
	}

	// Least privilege per tenant: a Job and a Secret are created in the
	// applied tenant namespace, and refused in kube-system.
	saCreate := func(ns string) (jobErr, secretErr error) {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: ns},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}}}
		_, jobErr = saClient.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: ns}}
		_, secretErr = saClient.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
		return jobErr, secretErr
	}
	if jerr, serr := saCreate(prefix + "acme"); jerr != nil || serr != nil {
		t.Errorf("as %s in the tenant namespace %sacme: Job create %v, Secret create %v; want both created", serviceAccount, prefix, jerr, serr)
	}
	if jerr, serr := saCreate("kube-system"); !apierrors.IsForbidden(jerr) || !apierrors.IsForbidden(serr) {
		t.Errorf("as %s in kube-system: Job create %v, Secret create %v; want both forbidden", serviceAccount, jerr, serr)
	}
	for _, ra := range tenantRights(prefix + "acme") {
		if !allowed(t, cs, ra) {
			t.Errorf("%s may not %s %s in %s, its applied tenant", serviceAccount, ra.Verb, ra.Resource, ra.Namespace)
		}
	}

	// And nothing more: what deploy/base used to grant and pcsync does not
	// need is refused; the per-tenant rights hold in no other namespace
	// (kube-system, pcsync's own, the pruned tenant's, whose RoleBinding
	// pcsync went with it).
	refused := []authorizationv1.ResourceAttributes{
		{Verb: "get", Resource: "secrets", Namespace: "kube-system", Name: "any"},
		{Verb: "get", Resource: "secrets", Namespace: prefix + "acme", Name: "api-keys"},
		{Verb: "list", Resource: "secrets", Namespace: prefix + "acme"},
		{Verb: "list", Resource: "configmaps"},
		// Deployments: pcsync applies each tenant's egress proxy (egress
		// mode proxy) and reads them cluster-wide like its other kinds.
		{Verb: "patch", Resource: "secrets", Namespace: "pcsync-system", Name: "other"},
		{Verb: "get", Resource: "secrets", Namespace: "pcsync-system", Name: "other"},
		{Verb: "delete", Resource: "namespaces", Name: "kube-system"},
		{Verb: "delete", Resource: "namespaces", Name: prefix + "acme"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: prefix + "acme"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-admin"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: prefix + "acme", Name: "other"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "admin"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: render.PcsyncTenantClusterRole},
		// The network check reads the API server's EndpointSlice only.
		{Verb: "get", Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: "default", Name: "other"},
		{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: "default"},
	}
	if ra := (authorizationv1.ResourceAttributes{Verb: "get", Group: "discovery.k8s.io", Resource: "endpointslices",
		Namespace: "default", Name: "kubernetes"}); !allowed(t, cs, ra) {
		t.Errorf("%s may not get EndpointSlice default/kubernetes (the network check's API server target)", serviceAccount)
	}
	for _, ns := range []string{"kube-system", "pcsync-system", prefix + "globex", "default"} {
		refused = append(refused, tenantRights(ns)...)
	}
	for _, ra := range refused {
		if allowed(t, cs, ra) {
			t.Errorf("%s may %s %s/%s %s in %q: want refused", serviceAccount, ra.Verb, ra.Group, ra.Resource, ra.Name, ra.Namespace)
		}
	}

	// A tenant whose RoleBinding pcsync is gone: doctor names each
	// per-tenant verb missing there, and where it comes from.
	if err := cs.RbacV1().RoleBindings(prefix+"acme").Delete(ctx, render.PcsyncRoleBindingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = doctor.Run(ctx, dopts)
	var missing []string
	for _, ch := range r.Checks {
		if ch.Area == "rbac" && ch.Status == doctor.StatusFail &&
			strings.Contains(ch.Detail, "in tenant namespace "+prefix+"acme (its RoleBinding pcsync grants ClusterRole pcsync-tenant") {
			missing = append(missing, strings.Fields(strings.TrimPrefix(ch.Detail, "missing "))[0]+" "+strings.Fields(ch.Detail)[2])
		}
	}
	sort.Strings(missing)
	wantMissing := []string{"create batch/jobs", "create core/pods", "create core/pods/exec", "create core/secrets",
		"delete batch/jobs", "delete core/pods", "delete core/secrets", "get core/pods/exec", "patch apps/deployments/scale", "patch core/pods"}
	if diff := cmp.Diff(wantMissing, missing); diff != "" {
		t.Errorf("doctor without the tenant's RoleBinding pcsync: missing verbs (-want +got):\n%s", diff)
	}

	// The leader Lease in pcsync's namespace, and the warm pools' Lease of
	// the deployment's owner (its ApplySet ID) beside it.
	for _, name := range []string{"pcsync", pool.LeaseName(apply.ParentID("pcsync", "pcsync-system"))} {
		lo := leader.DefaultOptions()
		lo.Namespace, lo.Name, lo.Identity = "pcsync-system", name, "rbac-test"
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		led := false
		if err := leader.Run(lctx, saClient, lo, func(context.Context) error { led = true; return nil }); err != nil || !led {
			t.Errorf("Lease pcsync-system/%s as %s: led %v, %v", name, serviceAccount, led, err)
		}
		cancel()
	}
}

// tenantRights are the rights pcsync holds in tenant namespaces only
// (ClusterRole pcsync-tenant), in namespace ns.
func tenantRights(ns string) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, p := range doctor.DefaultPermissions() {
		if p.Scope == doctor.ScopeTenant {
			res, sub, _ := strings.Cut(p.Resource, "/")
			out = append(out, authorizationv1.ResourceAttributes{Namespace: ns, Verb: p.Verb, Group: p.Group, Resource: res, Subresource: sub})
		}
	}
	return out
}

// allowed asks the API server whether pcsync's ServiceAccount may do ra.
func allowed(t *testing.T, cs kubernetes.Interface, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: serviceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:pcsync-system", "system:authenticated"},
		ResourceAttributes: &ra}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// rbacRows are doctor's rbac rows, "name status".
func rbacRows(r *doctor.Report) []string {
	var out []string
	for _, ch := range r.Checks {
		if ch.Area == "rbac" {
			out = append(out, ch.Name+" "+string(ch.Status))
		}
	}
	return out
}

// deleteNamespace deletes a namespace and waits until it is gone, so that
// the next test can create it again.
func deleteNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", name, err)
		return
	}
	for {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("namespace %s still there", name)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createWhenSAExists creates a pod once its service account exists (pods
// are refused before).
func createWhenSAExists(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, opts metav1.CreateOptions) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, opts)
		if err == nil || time.Now().After(deadline) || !(apierrors.IsForbidden(err) || apierrors.IsServerTimeout(err)) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func writeConfig(t *testing.T, dir, prefix string, slugs ...string) {
	t.Helper()
	files := map[string]string{"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: " + prefix + "\n"}
	for _, s := range slugs {
		files[s+".yaml"] = fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: id-%s\n  sessions: {size: 1Gi}\n"+
			"  secretRefs: [{name: api-keys}, {name: not-there}]\n  agents: [{name: coder, adapter: claude_local}]\n", s, s)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func renderDir(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Render(m, render.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return out.Objects
}
