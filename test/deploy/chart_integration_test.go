//go:build integration

package deploy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/testing/testhelm"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
	"github.com/pcsync/pcsync/pkg/images"
)

// baseValues are the chart's two required values, set to what deploy/base
// says (its registry is the overlay's: none in the base).
var baseValues = map[string]any{
	"image":  map[string]any{"registry": "registry.example.com/platform"},
	"config": map[string]any{"repo": "https://github.com/example/paperclip-config"},
}

// chartOnlyLabels are the labels Helm's conventions add to every object of
// the chart, which deploy/base has not, with their values.
var chartOnlyLabels = map[string]string{
	"app.kubernetes.io/instance":   "pcsync",
	"app.kubernetes.io/version":    images.Version,
	"app.kubernetes.io/managed-by": "Helm",
	"helm.sh/chart":                "pcsync-" + strings.TrimPrefix(images.Version, "v"),
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// renderChart renders charts/pcsync with values (release pcsync) in
// namespace ns with the helm hack/helm/build.sh builds.
func renderChart(t *testing.T, ns string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	helmOnce.Do(func() { helmPath, helmErr = testhelm.Binary(ctx, "../..") })
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return testhelm.Template(ctx, helmPath, chartDir, "pcsync", ns, values)
}

// objectKey names an object: kind, namespace and name.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// TestChartIsDeployBase: charts/pcsync with its defaults (and the two
// values it requires) renders what deploy/base renders, object by object
// and field by field (kinds, names, namespaces, RBAC rules, the pod's
// spec, the daemon's arguments), but for what a chart does otherwise:
//   - the Namespace: deploy/base makes pcsync-system under Pod Security
//     restricted; the chart installs into the release's namespace, which
//     Helm must find or make (--create-namespace) before it installs;
//   - Helm's labels on every object (chartOnlyLabels);
//   - pcsync's image: deploy/base names it bare, for an overlay's images to
//     set; the chart pins it to image.registry and the release version.
func TestChartIsDeployBase(t *testing.T) {
	base := build(t)
	chart, err := renderChart(t, "pcsync-system", baseValues)
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]map[string]any{}
	for _, o := range base {
		if o.GetKind() == "Namespace" {
			continue
		}
		want[objectKey(o)] = o.Object
	}
	got := map[string]map[string]any{}
	for _, o := range chart {
		labels := o.GetLabels()
		for k, v := range chartOnlyLabels {
			if labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", objectKey(o), k, labels[k], v)
			}
			delete(labels, k)
		}
		o.SetLabels(labels)
		got[objectKey(o)] = o.Object
	}

	const imagePath = "spec.template.spec.containers[0].image"
	key := "Deployment pcsync-system/pcsync"
	if _, ok := got[key]; !ok {
		t.Fatalf("the chart renders no %s", key)
	}
	image := func(objs map[string]map[string]any) string {
		containers, _, _ := unstructured.NestedSlice(objs[key], "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			return ""
		}
		img, _ := containers[0].(map[string]any)["image"].(string)
		return img
	}
	if g, w := image(got), "registry.example.com/platform/pcsync:"+images.Version; g != w {
		t.Errorf("chart's %s = %q, want %q", imagePath, g, w)
	}
	if g := image(want); g != images.Pcsync {
		t.Errorf("deploy/base's %s = %q, want the bare %q", imagePath, g, images.Pcsync)
	}
	containers, _, _ := unstructured.NestedSlice(got[key], "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["image"] = images.Pcsync
	if err := unstructured.SetNestedSlice(got[key], containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}

	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("charts/pcsync against deploy/base (-base +chart):\n%s", diff)
	}
}

// TestChartValues: each value of charts/pcsync's values.yaml reaches the
// field it is for, the namespace the release's, and a missing required
// value fails the render with its name.
func TestChartValues(t *testing.T) {
	with := func(extra map[string]any) map[string]any {
		v := map[string]any{}
		for k, x := range baseValues {
			v[k] = x
		}
		for k, x := range extra {
			if m, ok := v[k].(map[string]any); ok {
				merged := map[string]any{}
				for mk, mx := range m {
					merged[mk] = mx
				}
				for mk, mx := range x.(map[string]any) {
					merged[mk] = mx
				}
				x = merged
			}
			v[k] = x
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		ns      string
		values  map[string]any
		want    map[string]any // "Kind/name path" → the field's value
		wantErr string
	}{{
		name:   "image",
		values: with(map[string]any{"image": map[string]any{"registry": "ghcr.io/acme/", "tag": "v9.9.9", "pullPolicy": "Always"}}),
		want: map[string]any{
			"Deployment/pcsync spec.template.spec.containers.0.image":           "ghcr.io/acme/pcsync:v9.9.9",
			"Deployment/pcsync spec.template.spec.containers.0.imagePullPolicy": "Always",
		},
	}, {
		name: "pod",
		values: with(map[string]any{
			"replicas":         1,
			"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
			"nodeSelector":     map[string]any{"pool": "system"},
			"tolerations":      []any{map[string]any{"key": "system", "operator": "Exists", "effect": "NoSchedule"}},
			"extraArgs":        []any{"--no-reconcile", "--sandbox"},
			"resources":        map[string]any{"requests": map[string]any{"cpu": "1"}},
		}),
		want: map[string]any{
			"Deployment/pcsync spec.replicas":                              float64(1),
			"Deployment/pcsync spec.template.spec.imagePullSecrets.0.name": "regcred",
			"Deployment/pcsync spec.template.spec.nodeSelector.pool":       "system",
			"Deployment/pcsync spec.template.spec.tolerations.0.key":       "system",
			"Deployment/pcsync spec.template.spec.containers.0.args.10":    "--no-reconcile",
			"Deployment/pcsync spec.template.spec.containers.0.args.11":    "--sandbox",
			// Helm merges a map value into the default's.
			"Deployment/pcsync spec.template.spec.containers.0.resources": map[string]any{
				"requests": map[string]any{"cpu": "1", "memory": "128Mi"}, "limits": map[string]any{"memory": "512Mi"}},
			"Deployment/pcsync spec.template.spec.containers.1.resources.limits.memory": "256Mi",
		},
	}, {
		name: "config and git-sync",
		values: with(map[string]any{
			"config":  map[string]any{"repo": "https://git.example.com/platform/pcsync-config.git", "ref": "v2", "period": "10s"},
			"gitSync": map[string]any{"env": []any{map[string]any{"name": "GITSYNC_USERNAME", "value": "pcsync"}}},
		}),
		want: map[string]any{
			"Deployment/pcsync spec.template.spec.containers.1.env.0.value": "https://git.example.com/platform/pcsync-config.git",
			"Deployment/pcsync spec.template.spec.containers.1.env.1.value": "v2",
			"Deployment/pcsync spec.template.spec.containers.1.env.4.value": "10s",
			"Deployment/pcsync spec.template.spec.containers.1.env.5.name":  "GITSYNC_USERNAME",
			"Deployment/pcsync spec.template.spec.containers.1.image":       "registry.k8s.io/git-sync/git-sync:v4.4.0",
		},
	}, {
		name:   "spool",
		values: with(map[string]any{"spool": map[string]any{"size": "20Gi", "accessModes": []any{"ReadWriteOnce"}, "storageClassName": "local-path"}}),
		want: map[string]any{
			"PersistentVolumeClaim/pcsync-spool spec.resources.requests.storage": "20Gi",
			"PersistentVolumeClaim/pcsync-spool spec.accessModes.0":              "ReadWriteOnce",
			"PersistentVolumeClaim/pcsync-spool spec.storageClassName":           "local-path",
		},
	}, {
		name:   "the release's namespace",
		ns:     "platform",
		values: with(nil),
		want: map[string]any{
			"Deployment/pcsync metadata.namespace":                              "platform",
			"Deployment/pcsync spec.template.spec.containers.0.args.7":          "--applyset-namespace=platform",
			"ClusterRoleBinding/pcsync subjects.0.namespace":                    "platform",
			"Role/pcsync metadata.namespace":                                    "platform",
			"RoleBinding/pcsync subjects.0.namespace":                           "platform",
			"PersistentVolumeClaim/pcsync-spool metadata.namespace":             "platform",
			"Service/pcsync-metrics metadata.namespace":                         "platform",
			"ServiceAccount/pcsync metadata.namespace":                          "platform",
			"Deployment/pcsync spec.template.spec.containers.0.args.6":          "--applyset=pcsync",
			"Deployment/pcsync spec.template.spec.serviceAccountName":           "pcsync",
			"PersistentVolumeClaim/pcsync-spool spec.accessModes.0":             "ReadWriteMany",
			"Deployment/pcsync spec.template.spec.containers.0.args.0":          "daemon",
			"Deployment/pcsync spec.template.spec.automountServiceAccountToken": false,
		},
	}, {
		name:    "no registry",
		values:  map[string]any{"config": baseValues["config"]},
		wantErr: "image.registry",
	}, {
		name:    "no config repository",
		values:  map[string]any{"image": baseValues["image"]},
		wantErr: "config.repo",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "pcsync-system"
			}
			objs, err := renderChart(t, ns, tc.values)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("render: %v; want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for field := range tc.want {
				obj, path, _ := strings.Cut(field, " ")
				kind, name, _ := strings.Cut(obj, "/")
				o := testkustomize.Find(objs, kind, name)
				if o == nil {
					t.Fatalf("the chart renders no %s", obj)
				}
				got[field] = lookup(o.Object, strings.Split(path, "."))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// lookup returns the value at path in v, a list's elements by index;
// "<missing>" when there is none.
func lookup(v any, path []string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[p]
			if !ok {
				return "<missing>"
			}
			v = next
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i < 0 || i >= len(x) {
				return "<missing>"
			}
			v = x[i]
		default:
			return "<missing>"
		}
	}
	return v
}
