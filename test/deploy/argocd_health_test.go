package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

// healthKey is argocd-cm's key of the health check of group_kind.
func healthKey(groupKind string) string { return "resource.customizations.health." + groupKind }

// healthChecks builds deploy/argocd/health, included where Argo CD is
// installed, and returns argocd-cm's data: the keys Argo CD's install had
// and the health checks merged in.
func healthChecks(t *testing.T) map[string]any {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	if err := testkustomize.CopyDir(fsys, filepath.Join(deployDir, "argocd", "health"), "/argocd/health"); err != nil {
		t.Fatal(err)
	}
	err := testkustomize.WriteYAML(fsys, "/argocd", map[string]any{
		"kustomization.yaml": "resources: [argocd-cm.yaml]\ncomponents: [health]\n",
		"argocd-cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm, namespace: argocd}\ndata: {url: https://argocd.example.com}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testkustomize.Build(fsys, "/argocd")
	if err != nil {
		t.Fatal(err)
	}
	cm := testkustomize.Find(objs, "ConfigMap", "argocd-cm")
	if cm == nil || len(objs) != 1 {
		t.Fatalf("the build gives %d objects, want argocd-cm only", len(objs))
	}
	data, _ := cm.Object["data"].(map[string]any)
	return data
}

// TestArgoCDHealthComponent: deploy/argocd/health merges its health checks
// into argocd-cm, keeping the keys there.
func TestArgoCDHealthComponent(t *testing.T) {
	var keys []string
	for k := range healthChecks(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{healthKey("PersistentVolumeClaim"), healthKey("cilium.io_CiliumNetworkPolicy"),
		healthKey("pcsync.io_CompanyStatus"), "url"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("argocd-cm's keys (-want +got):\n%s", diff)
	}
}

// TestArgoCDHealthChecks runs each Lua health check of argocd-cm as Argo
// CD does (the object as the global obj, the result's status and message)
// on the objects it judges, with gopher-lua, the Lua of Argo CD's own.
func TestArgoCDHealthChecks(t *testing.T) {
	tests := []struct {
		name, kind, obj, want string
	}{
		{"status not written yet", "pcsync.io_CompanyStatus", `{metadata: {generation: 1}}`,
			"Progressing: waiting for the pcsync daemon's first reconcile"},
		{"ready", "pcsync.io_CompanyStatus", `{metadata: {generation: 1}, status: {observedGeneration: 1, revision: abc,
			conditions: [{type: Ready, status: "True", reason: ReconciliationSucceeded, message: applied revision abc}]}}`,
			"Healthy: applied revision abc"},
		{"ready, an older generation", "pcsync.io_CompanyStatus", `{metadata: {generation: 2}, status: {observedGeneration: 1,
			conditions: [{type: Ready, status: "True", reason: ReconciliationSucceeded, message: applied}]}}`,
			"Progressing: waiting for the pcsync daemon to observe the object's generation"},
		{"failed, retried", "pcsync.io_CompanyStatus", `{metadata: {generation: 1}, status: {observedGeneration: 1, conditions: [
			{type: Ready, status: "False", reason: ReconciliationFailed, message: quota refused},
			{type: Reconciling, status: "True", reason: ProgressingWithRetry, message: quota refused}]}}`,
			"Degraded: ReconciliationFailed: quota refused"},
		{"stalled", "pcsync.io_CompanyStatus", `{metadata: {generation: 1}, status: {observedGeneration: 1, conditions: [
			{type: Ready, status: "False", reason: ConfigInvalid, message: "a.yaml:1:1: bad"},
			{type: Stalled, status: "True", reason: ConfigInvalid, message: "a.yaml:1:1: bad"}]}}`,
			"Degraded: ConfigInvalid: a.yaml:1:1: bad"},
		{"suspended", "pcsync.io_CompanyStatus", `{metadata: {generation: 1}, status: {observedGeneration: 1, suspended: true,
			conditions: [{type: Ready, status: "False", reason: Suspended, message: suspended}]}}`,
			"Suspended: suspended (spec.suspend): nothing applied or pruned, no new run or lease"},
		{"policy without status", "cilium.io_CiliumNetworkPolicy", `{metadata: {name: p}}`, "Healthy"},
		{"policy valid", "cilium.io_CiliumNetworkPolicy", `{status: {conditions: [{type: Valid, status: "True"}],
			nodes: {n1: {enforcing: true, ok: true}}}}`, "Healthy"},
		{"policy not valid", "cilium.io_CiliumNetworkPolicy", `{status: {conditions: [{type: Valid, status: "False",
			message: "invalid toFQDNs"}]}}`, "Degraded: not valid: invalid toFQDNs"},
		{"policy refused by a node", "cilium.io_CiliumNetworkPolicy", `{status: {nodes: {n1: {ok: false, error: "no FQDN proxy"}}}}`,
			"Degraded: node n1: no FQDN proxy"},
		{"claim bound", "PersistentVolumeClaim", `{metadata: {}, status: {phase: Bound}}`, "Healthy: Bound"},
		{"claim lost", "PersistentVolumeClaim", `{metadata: {}, status: {phase: Lost}}`, "Degraded: Lost: its volume is gone"},
		{"another claim pending", "PersistentVolumeClaim", `{metadata: {}, status: {phase: Pending}}`,
			"Progressing: waiting for the claim to be bound"},
		{"pcsync's sessions claim pending", "PersistentVolumeClaim",
			`{metadata: {labels: {app.kubernetes.io/managed-by: pcsync}}, status: {phase: Pending}}`,
			"Healthy: Pending: pcsync's sessions claim is bound when the first agent pod mounts it"},
	}
	checks := healthChecks(t)
	got, want := map[string]string{}, map[string]string{}
	for _, tc := range tests {
		script, _ := checks[healthKey(tc.kind)].(string)
		got[tc.name], want[tc.name] = runHealth(t, script, tc.obj), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
}

// runHealth runs a health check on the object (YAML) and returns
// "status: message" (the status alone when the message is empty).
func runHealth(t *testing.T, script, object string) string {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(object), &obj); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("lua: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the check returned %s, not a table", L.Get(-1).Type())
	}
	status, msg := hs.RawGetString("status").String(), hs.RawGetString("message")
	if msg == lua.LNil || msg.String() == "" {
		return status
	}
	return status + ": " + strings.TrimSpace(msg.String())
}

// toLua is a JSON value as Argo CD hands it to a health check: objects and
// arrays as tables (arrays from index 1), numbers, strings, booleans.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for i, e := range x {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	}
	return lua.LNil
}
