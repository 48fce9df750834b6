package testkustomize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// An overlay written by WriteYAML (a value as YAML, a string as it is)
// builds into its base's objects with the overlay's changes, in
// kustomize's order; Find finds one by kind and name, and nothing for a
// name not there. A kustomization that does not build is an error that
// names its directory.
func TestBuild(t *testing.T) {
	fsys := filesys.MakeFsInMemory()
	if err := WriteYAML(fsys, "/base", map[string]any{
		"kustomization.yaml": map[string]any{"resources": []any{"cm.yaml", "svc.yaml"}},
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: \"1\"}\n",
		"svc.yaml":           "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
	}); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(fsys, "/overlay", map[string]any{
		"kustomization.yaml": map[string]any{"resources": []any{"../base"}, "namePrefix": "x-", "namespace": "team"},
	}); err != nil {
		t.Fatal(err)
	}
	objs, err := Build(fsys, "/overlay")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	if diff := cmp.Diff([]string{"ConfigMap/team/x-settings", "Service/team/x-web"}, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if cm := Find(objs, "ConfigMap", "x-settings"); cm == nil || cm.Object["data"].(map[string]any)["a"] != "1" {
		t.Errorf("Find ConfigMap x-settings: %v", cm)
	}
	// Numbers are JSON's: unstructured's accessors, which deep-copy, take
	// them (a YAML int would panic there).
	if ports, _, err := unstructured.NestedSlice(Find(objs, "Service", "x-web").Object, "spec", "ports"); err != nil ||
		len(ports) != 1 || fmt.Sprint(ports[0].(map[string]any)["port"]) != "80" {
		t.Errorf("the Service's ports: %#v %v, want one, port 80", ports, err)
	}
	if o := Find(objs, "ConfigMap", "settings"); o != nil {
		t.Errorf("Find ConfigMap settings (renamed by the overlay): %v, want nil", o)
	}
	// The base copied from disk builds as it did in memory.
	disk := t.TempDir()
	for _, name := range []string{"kustomization.yaml", "cm.yaml", "svc.yaml"} {
		b, err := fsys.ReadFile("/base/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(disk, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copied := filesys.MakeFsInMemory()
	if err := CopyDir(copied, disk, "/base"); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(copied, "/overlay", map[string]any{"kustomization.yaml": "resources: [../base]\nnamePrefix: y-\n"}); err != nil {
		t.Fatal(err)
	}
	if objs, err := Build(copied, "/overlay"); err != nil || len(objs) != 2 || objs[0].GetName() != "y-settings" {
		t.Errorf("the copied base's overlay: %v objects (%v); want y-settings and y-web", len(objs), err)
	}
	if _, err := Build(fsys, "/missing"); err == nil || !strings.Contains(err.Error(), "kustomize build /missing") {
		t.Errorf("Build of a missing directory: %v, want an error naming it", err)
	}
}
