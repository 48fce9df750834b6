package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestApplySetIDFormat(t *testing.T) {
	id := ApplySetID("pcsync", "paperclip", schema.GroupKind{Kind: "Secret"})
	if !strings.HasPrefix(id, "applyset-") || !strings.HasSuffix(id, "-v1") || len(id) != len("applyset-")+43+len("-v1") {
		t.Errorf("ApplySetID = %q, want applyset-<43 base64url chars>-v1", id)
	}
	if strings.ContainsAny(id, "+/=") {
		t.Errorf("ApplySetID %q is not URL-safe unpadded base64", id)
	}
	if other := ApplySetID("pcsync", "other", schema.GroupKind{Kind: "Secret"}); other == id {
		t.Error("the namespace must change the ID")
	}
}

func TestPrepare(t *testing.T) {
	secret := mustObj(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n",
		"resourceVersion":"9","managedFields":[{"manager":"x"}]},
		"data":{"a":"YQ=="},"stringData":{"b":"bee"},"status":{"x":1}}`)
	got, err := prepare([]*unstructured.Unstructured{secret}, "applyset-x-v1")
	if err != nil {
		t.Fatal(err)
	}
	d := got[0]
	if _, ok := d.obj.Object["stringData"]; ok {
		t.Error("stringData was not folded into data")
	}
	data, _, _ := unstructured.NestedStringMap(d.obj.Object, "data")
	if diff := cmp.Diff(map[string]string{"a": "YQ==", "b": "YmVl"}, data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if d.obj.GetResourceVersion() != "" || d.obj.GetManagedFields() != nil || d.obj.Object["status"] != nil {
		t.Error("server-owned fields were kept")
	}
	if d.obj.GetLabels()[LabelPartOf] != "applyset-x-v1" {
		t.Error("part-of label missing")
	}
	h1 := d.obj.GetAnnotations()[AnnotationAppliedHash]
	if h1 == "" {
		t.Fatal("no applied-hash annotation")
	}
	// The hash is stable and changes with the content.
	again, _ := prepare([]*unstructured.Unstructured{secret}, "applyset-x-v1")
	if again[0].obj.GetAnnotations()[AnnotationAppliedHash] != h1 {
		t.Error("hash is not deterministic")
	}
	changed := secret.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, "c2Vl", "data", "a")
	other, _ := prepare([]*unstructured.Unstructured{changed}, "applyset-x-v1")
	if other[0].obj.GetAnnotations()[AnnotationAppliedHash] == h1 {
		t.Error("hash did not change with the content")
	}
	if secret.Object["stringData"] == nil {
		t.Error("prepare modified its input")
	}
}

func TestPrepareRejects(t *testing.T) {
	ns := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`
	tests := []struct {
		name string
		objs []string
		want string
	}{
		{"duplicate", []string{ns, ns}, "given twice"},
		{"no name", []string{`{"apiVersion":"v1","kind":"Namespace","metadata":{}}`}, "metadata.name are required"},
		{"foreign set", []string{`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a",
			"labels":{"applyset.kubernetes.io/part-of":"applyset-other-v1"}}}`}, "of another ApplySet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, s := range tt.objs {
				objs = append(objs, mustObj(t, s))
			}
			_, err := prepare(objs, "applyset-x-v1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExplainApplyError(t *testing.T) {
	conflict := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-edit" using v1`, Field: ".rules"},
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "helm" using v1`, Field: ".metadata.labels.a"},
			{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "helm" using v1`, Field: ".metadata.labels.b"},
		}},
	}}
	err := explainApplyError(conflict)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("not a ConflictError: %v", err)
	}
	want := `conflict with field manager "helm" on .metadata.labels.a, .metadata.labels.b; ` +
		`field manager "kubectl-edit" on .rules; pass --force-conflicts to take ownership`
	if err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err, want)
	}

	immutable := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Message: `RoleBinding.rbac.authorization.k8s.io "rb" is invalid: roleRef: Invalid value: "x": cannot change roleRef`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "secretvalue": cannot change roleRef`, Field: "roleRef"},
		}},
	}}
	err = explainApplyError(immutable)
	if !errors.Is(err, ErrImmutable) {
		t.Fatalf("not ErrImmutable: %v", err)
	}
	if strings.Contains(err.Error(), "secretvalue") || !strings.Contains(err.Error(), "roleRef: cannot change roleRef") ||
		!strings.Contains(err.Error(), "--force") {
		t.Errorf("message: %s", err)
	}
}

func TestRedact(t *testing.T) {
	s := mustObj(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"aHVudGVyMg=="}}`)
	err := redact(errors.New(`bad value "hunter2" (aHVudGVyMg==)`), s)
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg") {
		t.Errorf("secret leaked: %s", err)
	}
	cm := mustObj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"hunter2"}}`)
	if err := redact(errors.New("hunter2"), cm); err.Error() != "hunter2" {
		t.Errorf("non-Secret error changed: %s", err)
	}
}

func TestMaskSecretData(t *testing.T) {
	from := mustObj(t, `{"apiVersion":"v1","kind":"Secret","data":{"same":"YQ==","changed":"YQ==","gone":"YQ=="}}`)
	to := mustObj(t, `{"apiVersion":"v1","kind":"Secret","data":{"same":"YQ==","changed":"Yg==","new":"Yw=="}}`)
	maskSecretData(from, to)
	wantFrom := map[string]any{"same": "***", "changed": "*** (before)", "gone": "***"}
	wantTo := map[string]any{"same": "***", "changed": "*** (after)", "new": "***"}
	if diff := cmp.Diff(wantFrom, from.Object["data"]); diff != "" {
		t.Errorf("from (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTo, to.Object["data"]); diff != "" {
		t.Errorf("to (-want +got):\n%s", diff)
	}
}

func TestOutput(t *testing.T) {
	r := &Report{
		ApplySetID: "applyset-x-v1",
		Parent:     ObjectRef{Version: "v1", Kind: "Secret", Namespace: "paperclip", Name: "pcsync"},
		Objects: []ObjectResult{
			{Ref: ObjectRef{Version: "v1", Kind: "Namespace", Name: "paperclip-acme"}, Action: ActionCreated},
			{Ref: ObjectRef{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy", Namespace: "paperclip-acme",
				Name: "paperclip-deny-all"}, Action: ActionUnchanged},
			{Ref: ObjectRef{Group: "cilium.io", Version: "v2", Kind: "CiliumNetworkPolicy", Namespace: "paperclip-acme",
				Name: "paperclip-egress-fqdn"}, Action: ActionFailed, Err: errors.New("CiliumNetworkPolicy/paperclip-acme/paperclip-egress-fqdn apply failed: x")},
		},
		MutatingRequests: 1,
		Duration:         1234 * time.Millisecond,
	}
	var out, errOut bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	want := "namespace/paperclip-acme created\n" +
		"networkpolicy.networking.k8s.io/paperclip-deny-all unchanged (paperclip-acme)\n" +
		"ciliumnetworkpolicy.cilium.io/paperclip-egress-fqdn failed (paperclip-acme)\n" +
		"summary: 1 created, 0 configured, 1 unchanged, 0 recreated, 0 pruned, 0 retained, 1 failed; 3 objects, 1 mutating requests, 1.23s\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	_ = r.WriteErrors(&errOut)
	if errOut.String() != "error: CiliumNetworkPolicy/paperclip-acme/paperclip-egress-fqdn apply failed: x\n" {
		t.Errorf("errors: %q", errOut.String())
	}
	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var j JSONReport
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.Summary.Created != 1 || j.Summary.Failed != 1 || j.Objects[2].APIVersion != "cilium.io/v2" ||
		j.ApplySet.Parent != "secret/pcsync" || j.Objects[2].Error == "" {
		t.Errorf("JSON: %s", out.String())
	}
	if got := ObjectLine(ObjectRef{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Namespace: "ns", Name: "r"},
		ActionConfigured, true); got != "role.rbac.authorization.k8s.io/r configured (ns, dry run)" {
		t.Errorf("dry-run line: %q", got)
	}
}

func TestParsePruneMax(t *testing.T) {
	tests := []struct {
		in      string
		want    intstr.IntOrString
		wantErr bool
	}{
		{"25%", intstr.FromString("25%"), false},
		{"10", intstr.FromInt32(10), false},
		{"0", intstr.FromInt32(0), false},
		{"abc", intstr.IntOrString{}, true},
		{"-1", intstr.IntOrString{}, true},
	}
	for _, tt := range tests {
		got, err := ParsePruneMax(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParsePruneMax(%q) err = %v", tt.in, err)
			continue
		}
		if !tt.wantErr && got != tt.want {
			t.Errorf("ParsePruneMax(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCheckPruneLimits(t *testing.T) {
	plan := &prunePlan{members: 32, objects: make([]pruneObject, 8)}
	if err := checkPruneLimits(plan, ApplyOptions{PruneMax: intstr.FromString("25%")}); err != nil {
		t.Errorf("8 of 32 at 25%%: %v", err)
	}
	plan.objects = make([]pruneObject, 9)
	if err := checkPruneLimits(plan, ApplyOptions{PruneMax: intstr.FromString("25%")}); !errors.Is(err, ErrMassPrune) {
		t.Errorf("9 of 32 at 25%%: %v", err)
	}
	if err := checkPruneLimits(plan, ApplyOptions{PruneMax: intstr.FromString("25%"), AllowMassPrune: true}); err != nil {
		t.Errorf("allowed: %v", err)
	}
	if err := checkPruneLimits(plan, ApplyOptions{PruneMax: intstr.FromInt32(9)}); err != nil {
		t.Errorf("count 9: %v", err)
	}
	if err := checkPruneLimits(plan, ApplyOptions{}); !errors.Is(err, ErrMassPrune) {
		t.Errorf("the zero value must allow no deletion: %v", err)
	}
}

func TestPrepareAcceptsGoTypes(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "n"},
		"spec":     map[string]any{"port": 443, "ratio": float32(0.5), "list": []string{"a"}}}}
	got, err := prepare([]*unstructured.Unstructured{u}, "applyset-x-v1")
	if err != nil {
		t.Fatal(err)
	}
	spec := got[0].obj.Object["spec"].(map[string]any)
	if spec["port"] != int64(443) || spec["ratio"] != 0.5 || !cmp.Equal(spec["list"], []any{"a"}) {
		t.Errorf("spec = %#v", spec)
	}
	_ = got[0].obj.DeepCopy() // must not panic
}
