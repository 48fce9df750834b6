package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/doctor"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
)

// deployDir is the repository's deploy/, from this package's directory.
const deployDir = "../../deploy"

// build renders deploy/base with kustomize (krusty) into objects.
func build(t *testing.T) []*unstructured.Unstructured { return buildDir(t, "base") }

// buildDir renders deploy/<dir> with kustomize (krusty) into objects.
func buildDir(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testkustomize.BuildDir(filepath.Join(deployDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("missing object of type %T", new(T))
	}
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// TestRBACMatchesDoctor keeps deploy/base/rbac.yaml and the permissions
// pcsync doctor checks (the calls pcsync makes) identical: nothing missing,
// nothing extra.
func TestRBACMatchesDoctor(t *testing.T) {
	objs := build(t)
	var granted []string
	add := func(rules []rbacv1.PolicyRule, scope doctor.Scope) {
		for _, r := range rules {
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						for _, n := range names {
							granted = append(granted, fmt.Sprintf("%s %s/%s/%s %s", v, g, res, n, scope))
						}
					}
				}
			}
		}
	}
	add(typed[rbacv1.ClusterRole](t, testkustomize.Find(objs, "ClusterRole", "pcsync")).Rules, doctor.ScopeCluster)
	add(typed[rbacv1.ClusterRole](t, testkustomize.Find(objs, "ClusterRole", render.PcsyncTenantClusterRole)).Rules, doctor.ScopeTenant)
	add(typed[rbacv1.Role](t, testkustomize.Find(objs, "Role", "pcsync")).Rules, doctor.ScopeOwnNamespace)
	var used []string
	for _, p := range doctor.DefaultPermissions() {
		used = append(used, fmt.Sprintf("%s %s/%s/%s %s", p.Verb, p.Group, p.Resource, p.Name, p.Scope))
	}
	sort.Strings(granted)
	sort.Strings(used)
	if diff := cmp.Diff(used, granted); diff != "" {
		t.Errorf("rbac.yaml (+) against the calls pcsync makes (-):\n%s", diff)
	}
	// The bindings name the ServiceAccount the Deployment runs as.
	crb := typed[rbacv1.ClusterRoleBinding](t, testkustomize.Find(objs, "ClusterRoleBinding", "pcsync"))
	rb := typed[rbacv1.RoleBinding](t, testkustomize.Find(objs, "RoleBinding", "pcsync"))
	dep := typed[appsv1.Deployment](t, testkustomize.Find(objs, "Deployment", "pcsync"))
	got := []string{crb.Subjects[0].Namespace + "/" + crb.Subjects[0].Name, rb.Subjects[0].Namespace + "/" + rb.Subjects[0].Name,
		dep.Namespace + "/" + dep.Spec.Template.Spec.ServiceAccountName}
	// And the default of Settings spec.pcsync.serviceAccount, which every
	// tenant's RoleBinding pcsync names.
	m, err := config.Load(context.Background(), t.TempDir(), config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := m.Settings.Spec.Pcsync.ServiceAccount
	got = append(got, sa.Namespace+"/"+sa.Name)
	if diff := cmp.Diff([]string{"pcsync-system/pcsync", "pcsync-system/pcsync", "pcsync-system/pcsync", "pcsync-system/pcsync"}, got); diff != "" {
		t.Errorf("service account of the bindings, the Deployment and the config's default (-want +got):\n%s", diff)
	}
	// pcsync-tenant is granted per tenant, never cluster-wide.
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" {
			if crb := typed[rbacv1.ClusterRoleBinding](t, o); crb.RoleRef.Name == render.PcsyncTenantClusterRole {
				t.Errorf("ClusterRoleBinding %s grants %s cluster-wide", crb.Name, render.PcsyncTenantClusterRole)
			}
		}
	}
}

// TestPodTokenOnlyForPcsync checks the Deployment's pod: no service
// account token is mounted by the API server (automountServiceAccountToken
// false), pcsync's container mounts a projected token at the path client-go
// reads, git-sync mounts none, and every emptyDir has a sizeLimit.
func TestPodTokenOnlyForPcsync(t *testing.T) {
	dep := typed[appsv1.Deployment](t, testkustomize.Find(build(t), "Deployment", "pcsync"))
	spec := dep.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = %v, want false", spec.AutomountServiceAccountToken)
	}
	tokenVolumes := map[string]bool{}
	for _, v := range spec.Volumes {
		switch {
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					tokenVolumes[v.Name] = true
				}
			}
		case v.Secret != nil:
			t.Errorf("volume %s: a Secret volume (a token Secret?)", v.Name)
		case v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil:
			t.Errorf("volume %s: emptyDir without sizeLimit", v.Name)
		}
	}
	got := map[string][]string{}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			if tokenVolumes[m.Name] {
				got[c.Name] = append(got[c.Name], m.MountPath)
			}
		}
	}
	want := map[string][]string{"pcsync": {"/var/run/secrets/kubernetes.io/serviceaccount"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers that mount a service account token (-want +got):\n%s", diff)
	}
}

// TestArgoCDSidecarIsPcsyncImage checks deploy/argocd: the Component's
// sidecar runs pcsync's own image (the name deploy/base's pcsync container
// has, which `make images` pushes and kustomize's images sets), and the
// example Application names the plugin the ConfigMap defines
// (<name>-<version>, as Argo CD names sidecar plugins).
func TestArgoCDSidecarIsPcsyncImage(t *testing.T) {
	patch, err := os.ReadFile(filepath.Join(deployDir, "argocd/repo-server/repo-server-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := sigsyaml.Unmarshal(patch, &dep); err != nil {
		t.Fatalf("argocd/repo-server/repo-server-patch.yaml: %v", err)
	}
	base := typed[appsv1.Deployment](t, testkustomize.Find(build(t), "Deployment", "pcsync"))
	var got []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		got = append(got, c.Name+"="+c.Image)
	}
	if want := []string{"pcsync-cmp=" + base.Spec.Template.Spec.Containers[0].Image}; !cmp.Equal(want, got) {
		t.Errorf("sidecars of the patch (-want +got):\n%s", cmp.Diff(want, got))
	}

	objs := buildDir(t, "argocd")
	cm := typed[corev1.ConfigMap](t, testkustomize.Find(objs, "ConfigMap", "pcsync-cmp"))
	var plugin struct {
		Metadata struct{ Name string }
		Spec     struct{ Version string }
	}
	if err := sigsyaml.Unmarshal([]byte(cm.Data["plugin.yaml"]), &plugin); err != nil {
		t.Fatal(err)
	}
	app := testkustomize.Find(objs, "Application", "paperclip-tenants")
	if app == nil {
		t.Fatal("deploy/argocd has no Application paperclip-tenants")
	}
	name, _, _ := unstructured.NestedString(app.Object, "spec", "source", "plugin", "name")
	if want := plugin.Metadata.Name + "-" + plugin.Spec.Version; name != want {
		t.Errorf("Application's plugin is %q, want %q (the ConfigMap's plugin.yaml)", name, want)
	}
}
