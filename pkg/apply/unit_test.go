package apply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
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
	got, err := prepare([]*unstructured.Unstructured{secret}, "applyset-x-v1", 2)
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
	again, _ := prepare([]*unstructured.Unstructured{secret}, "applyset-x-v1", 2)
	if again[0].obj.GetAnnotations()[AnnotationAppliedHash] != h1 {
		t.Error("hash is not deterministic")
	}
	changed := secret.DeepCopy()
	_ = unstructured.SetNestedField(changed.Object, "c2Vl", "data", "a")
	other, _ := prepare([]*unstructured.Unstructured{changed}, "applyset-x-v1", 2)
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
			_, err := prepare(objs, "applyset-x-v1", 2)
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
		`field manager "kubectl-edit" on .rules; apply without --force-conflicts=false to take the fields back`
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

func TestChangeSet(t *testing.T) {
	ref := func(name string) ObjectRef {
		return ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	errApply, errPrune := errors.New("ConfigMap/ns/a apply failed: x"), errors.New("ConfigMap/ns/c prune failed: y")
	tests := []struct {
		name             string
		objects          []Change
		wantCreated      int
		wantChanged      bool
		wantErr          []error
		onlyPrunesFailed bool
	}{
		{name: "empty"},
		{name: "unchanged", objects: []Change{{Ref: ref("a"), Action: ActionUnchanged}}},
		{name: "created", objects: []Change{{Ref: ref("a"), Action: ActionCreated}, {Ref: ref("b"), Action: ActionUnchanged}},
			wantCreated: 1, wantChanged: true},
		{name: "retained only", objects: []Change{{Ref: ref("a"), Action: ActionRetained, Prune: true, Note: "n"}}},
		{name: "a prune failed", objects: []Change{{Ref: ref("a"), Action: ActionUnchanged},
			{Ref: ref("c"), Action: ActionFailed, Prune: true, Err: errPrune}},
			wantErr: []error{errPrune}, onlyPrunesFailed: true},
		{name: "an apply and a prune failed", objects: []Change{{Ref: ref("a"), Action: ActionFailed, Err: errApply},
			{Ref: ref("b"), Action: ActionPruned, Prune: true}, {Ref: ref("c"), Action: ActionFailed, Prune: true, Err: errPrune}},
			wantChanged: true, wantErr: []error{errApply, errPrune}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &ChangeSet{Objects: tt.objects}
			if got := c.Count(ActionCreated); got != tt.wantCreated {
				t.Errorf("Count(created) = %d, want %d", got, tt.wantCreated)
			}
			if got := c.Changed(); got != tt.wantChanged {
				t.Errorf("Changed() = %v, want %v", got, tt.wantChanged)
			}
			var got []error
			if err := c.Err(); err != nil {
				got = err.(interface{ Unwrap() []error }).Unwrap()
			}
			if diff := cmp.Diff(tt.wantErr, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Err() (-want +got):\n%s", diff)
			}
			if got := c.OnlyPrunesFailed(); got != tt.onlyPrunesFailed {
				t.Errorf("OnlyPrunesFailed() = %v, want %v", got, tt.onlyPrunesFailed)
			}
		})
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

// fleetPlan is the prune plan of a fleet of n tenants (8 objects each) of which
// the first gone are no longer rendered, and the tenants still rendered.
func fleetPlan(n, gone int) (*prunePlan, sets.Set[string]) {
	plan := &prunePlan{members: 8 * n, tenants: sets.New[string]()}
	desired := sets.New[string]()
	for i := range n {
		ns := fmt.Sprintf("paperclip-c%02d", i)
		plan.tenants.Insert(ns)
		if i >= gone {
			desired.Insert(ns)
			continue
		}
		for k := range 8 {
			plan.objects = append(plan.objects, pruneObject{
				ref: ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("o%d", k)},
				uid: types.UID(fmt.Sprintf("uid-%d-%d", i, k))})
		}
	}
	return plan, desired
}

// TestPruneGuard holds the worked examples of docs/apply.md: the guard counts
// tenants (companies), not objects, and allows a few whatever the fleet.
func TestPruneGuard(t *testing.T) {
	def := DefaultApplyOptions()
	tests := []struct {
		name        string
		fleet, gone int
		empty       bool
		opts        func(*ApplyOptions)
		want        HoldReason // "" = allowed
		wantLimit   int
	}{
		{name: "1 of 2", fleet: 2, gone: 1},
		{name: "2 of 2 (the whole fleet)", fleet: 2, gone: 2, want: HoldWholeFleet, wantLimit: 1},
		{name: "1 of 1 (the whole fleet)", fleet: 1, gone: 1, want: HoldWholeFleet, wantLimit: 0},
		{name: "3 of 4 (the floor)", fleet: 4, gone: 3},
		{name: "1 of 20", fleet: 20, gone: 1},
		{name: "5 of 20 (25%)", fleet: 20, gone: 5},
		{name: "6 of 20", fleet: 20, gone: 6, want: HoldOverLimit, wantLimit: 5},
		{name: "15 of 20", fleet: 20, gone: 15, want: HoldOverLimit, wantLimit: 5},
		{name: "50 of 200", fleet: 200, gone: 50},
		{name: "51 of 200", fleet: 200, gone: 51, want: HoldOverLimit, wantLimit: 50},
		{name: "empty render", fleet: 3, gone: 3, empty: true, want: HoldEmptyRender, wantLimit: 2},
		{name: "nothing gone", fleet: 20, gone: 0},
		{name: "15 of 20, allowed", fleet: 20, gone: 15, opts: func(o *ApplyOptions) { o.AllowMassPrune = true }},
		{name: "empty render, allowed", fleet: 3, gone: 3, empty: true, opts: func(o *ApplyOptions) { o.AllowMassPrune = true }},
		{name: "2 of 3, floor 1", fleet: 3, gone: 2, opts: func(o *ApplyOptions) { o.PruneFloor = 1 }, want: HoldOverLimit, wantLimit: 1},
		{name: "9 of 20, count 9", fleet: 20, gone: 9, opts: func(o *ApplyOptions) { o.PruneMax = intstr.FromInt32(9) }},
		{name: "zero limits", fleet: 20, gone: 1, opts: func(o *ApplyOptions) { o.PruneMax, o.PruneFloor = intstr.IntOrString{}, 0 },
			want: HoldOverLimit, wantLimit: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := def
			if tt.opts != nil {
				tt.opts(&opts)
			}
			plan, desired := fleetPlan(tt.fleet, tt.gone)
			h, err := guardPrune(plan, desired, tt.empty, opts)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if h != nil {
					t.Fatalf("held: %s", h.Describe())
				}
				return
			}
			if h == nil {
				t.Fatalf("allowed, want held (%s)", tt.want)
			}
			if h.Reason != tt.want || h.Limit != tt.wantLimit || len(h.Tenants) != tt.gone || h.Fleet != tt.fleet ||
				h.Objects != 8*tt.gone {
				t.Errorf("hold = %+v, want reason %s, limit %d, %d tenants of %d", h, tt.want, tt.wantLimit, tt.gone, tt.fleet)
			}
			// The token approves exactly this prune.
			if again, _ := guardPrune(plan, desired, tt.empty, opts, h.Token); again != nil {
				t.Errorf("the hold's own token does not approve it")
			}
			other, _ := fleetPlan(tt.fleet+1, tt.gone+1)
			if other.token() == h.Token {
				t.Errorf("two different plans have the same token")
			}
			if again, _ := guardPrune(plan, desired, tt.empty, opts, "0123456789abcdef"); again == nil {
				t.Errorf("another token approves it")
			}
		})
	}
}

func TestPruneRefusedMessage(t *testing.T) {
	plan, desired := fleetPlan(20, 15)
	h, _ := guardPrune(plan, desired, false, DefaultApplyOptions())
	err := error(&PruneRefusedError{Hold: *h, Parent: ObjectRef{Version: "v1", Kind: "Secret", Namespace: "paperclip", Name: "pcsync"}})
	want := "refusing to prune: it would remove 15 of the fleet's 20 tenants (paperclip-c00, paperclip-c01, paperclip-c02, " +
		"paperclip-c03, paperclip-c04, … and 10 more; 120 objects), more than --prune-max 25% (at least --prune-floor 3) " +
		"allows: 5; nothing was changed; to approve exactly this prune: kubectl annotate secret pcsync -n paperclip " +
		"pcsync.io/approve-prune=" + h.Token + " --overwrite (then apply again), or pass --allow-mass-prune"
	if err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err, want)
	}
	if !errors.Is(err, ErrMassPrune) || errors.Is(err, ErrEmptyRender) {
		t.Errorf("errors.Is: %v", err)
	}
}

func TestPrepareAcceptsGoTypes(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "n"},
		"spec":     map[string]any{"port": 443, "ratio": float32(0.5), "list": []string{"a"}}}}
	got, err := prepare([]*unstructured.Unstructured{u}, "applyset-x-v1", 2)
	if err != nil {
		t.Fatal(err)
	}
	spec := got[0].obj.Object["spec"].(map[string]any)
	if spec["port"] != int64(443) || spec["ratio"] != 0.5 || !cmp.Equal(spec["list"], []any{"a"}) {
		t.Errorf("spec = %#v", spec)
	}
	_ = got[0].obj.DeepCopy() // must not panic
}

// TestMissingCiliumHint: a cluster without Cilium is pointed at egress mode
// proxy, the default, which enforces host names on any plugin, never at
// standard, which cannot.
func TestMissingCiliumHint(t *testing.T) {
	got := DefaultMissingKindHints()["cilium.io"]
	want := `install Cilium (it serves cilium.io/v2 CiliumNetworkPolicy), or set Settings spec.egress.mode ` +
		`(or the company's egress.mode) to "proxy", the default, whose egress proxy enforces host names on any network plugin`
	if got != want {
		t.Errorf("hint:\n got %s\nwant %s", got, want)
	}
}
