// Package deploy holds the kustomize base that runs pcsync in a cluster;
// its tests render the base and check it against a real API server.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pcsync/pcsync/pkg/doctor"
)

// build renders deploy/base with kustomize (krusty) into objects.
func build(t *testing.T) []*unstructured.Unstructured { return buildDir(t, "base") }

// buildDir renders deploy/<dir> with kustomize (krusty) into objects.
func buildDir(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	y, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
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
	add(typed[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "pcsync")).Rules, doctor.ScopeCluster)
	add(typed[rbacv1.Role](t, find(objs, "Role", "pcsync-leader-election")).Rules, doctor.ScopeLease)
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
	crb := typed[rbacv1.ClusterRoleBinding](t, find(objs, "ClusterRoleBinding", "pcsync"))
	rb := typed[rbacv1.RoleBinding](t, find(objs, "RoleBinding", "pcsync-leader-election"))
	dep := typed[appsv1.Deployment](t, find(objs, "Deployment", "pcsync"))
	got := []string{crb.Subjects[0].Namespace + "/" + crb.Subjects[0].Name, rb.Subjects[0].Namespace + "/" + rb.Subjects[0].Name,
		dep.Namespace + "/" + dep.Spec.Template.Spec.ServiceAccountName}
	if diff := cmp.Diff([]string{"pcsync-system/pcsync", "pcsync-system/pcsync", "pcsync-system/pcsync"}, got); diff != "" {
		t.Errorf("service account of the bindings and the Deployment (-want +got):\n%s", diff)
	}
}
