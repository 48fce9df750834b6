//go:build integration

package apply_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/apply"
)

// rulesOwners returns, as kubectl shows them (--show-managed-fields), the
// managers that own a Role's .rules.
func rulesOwners(t *testing.T, e *env, ns, name string) []string {
	t.Helper()
	out, stderr, err := e.kubectl("-n", ns, "get", "role", name, "--show-managed-fields", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get role: %v: %s", err, stderr)
	}
	var role struct {
		Metadata struct {
			ManagedFields []struct {
				Manager   string          `json:"manager"`
				Operation string          `json:"operation"`
				FieldsV1  json.RawMessage `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &role); err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, mf := range role.Metadata.ManagedFields {
		if strings.Contains(string(mf.FieldsV1), `"f:rules"`) {
			owners = append(owners, mf.Manager+"/"+mf.Operation)
		}
	}
	return owners
}

// TestForeignEditIsTakenBack: another field manager changes a field pcsync
// declares (kubectl patch --field-manager). diff shows exactly that drift (and,
// strict, the conflict); apply takes the field back, and kubectl's view of
// managedFields shows pcsync as its only owner again.
func TestForeignEditIsTakenBack(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(1)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	ns := e.companyNS(0)
	if _, stderr, err := e.kubectl("-n", ns, "patch", "role", "paperclip-tenant-role", "--field-manager=hand-edit",
		"--type=json", "-p", `[{"op":"add","path":"/rules/0/verbs/-","value":"list"}]`); err != nil {
		t.Fatalf("kubectl patch: %v: %s", err, stderr)
	}
	if diff := cmp.Diff([]string{"hand-edit/Update"}, rulesOwners(t, e, ns, "paperclip-tenant-role")); diff != "" {
		t.Errorf(".rules owners after the patch (-want +got):\n%s", diff)
	}

	// Strict: the conflict, naming the other manager.
	strict := apply.DefaultDiffOptions()
	strict.ForceConflicts = false
	d, err := e.manager().Diff(ctx, objs, strict)
	if err != nil {
		t.Fatal(err)
	}
	var ce *apply.ConflictError
	if err := d.Err(); !errors.As(err, &ce) || !strings.Contains(err.Error(), `field manager "hand-edit" on .rules`) {
		t.Errorf("strict diff error = %v, want a conflict with hand-edit on .rules", err)
	}

	// Default: the drift, as apply would take it back.
	d, err = e.manager().Diff(ctx, objs, apply.DefaultDiffOptions())
	if err != nil || d.Err() != nil {
		t.Fatalf("diff: %v %v", err, d.Err())
	}
	var changed []string
	for _, o := range d.Objects {
		if o.Action != apply.ActionUnchanged {
			changed = append(changed, string(o.Action)+" "+o.Ref.String())
			if !strings.Contains(o.Diff, "\n-  - list\n") {
				t.Errorf("diff does not remove the added verb:\n%s", o.Diff)
			}
		}
	}
	if diff := cmp.Diff([]string{"configured Role/" + ns + "/paperclip-tenant-role"}, changed); diff != "" || !d.Changed() {
		t.Errorf("diff actions (-want +got):\n%s", diff)
	}
	if d.MutatingRequests == 0 {
		t.Errorf("diff sent no server-side dry run")
	}
	if got := rulesOwners(t, e, ns, "paperclip-tenant-role"); !cmp.Equal(got, []string{"hand-edit/Update"}) {
		t.Errorf("diff changed the owners: %v", got)
	}

	// Apply takes the field back.
	r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	if got := actions(r)["Role/"+ns+"/paperclip-tenant-role"]; got != apply.ActionConfigured {
		t.Errorf("role action = %s, want configured", got)
	}
	if diff := cmp.Diff([]string{"pcsync/Apply"}, rulesOwners(t, e, ns, "paperclip-tenant-role")); diff != "" {
		t.Errorf(".rules owners after apply (-want +got):\n%s", diff)
	}
	role, err := e.cs.RbacV1().Roles(ns).Get(ctx, "paperclip-tenant-role", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := role.Rules[0].Verbs; !cmp.Equal(got, []string{"get"}) {
		t.Errorf("verbs after apply = %v, want [get]", got)
	}
	d, err = e.manager().Diff(ctx, objs, apply.DefaultDiffOptions())
	if err != nil || d.Err() != nil || d.Changed() {
		t.Errorf("diff after apply: %v %v changed=%v", err, d.Err(), d.Changed())
	}
}

// TestPruneGuardFleets: the prune guard's worked examples on the control plane.
// Removing 1 of 2 or 1 of 20 companies is pruned at once; 15 of 20 and an empty
// render are refused before anything changes, diff --prune says so, and the
// annotation with the refusal's token approves exactly that prune.
func TestPruneGuardFleets(t *testing.T) {
	tests := []struct {
		name        string
		fleet, keep int
		held        apply.HoldReason
	}{
		{"1 of 2", 2, 1, ""},
		{"1 of 20", 20, 19, ""},
		{"15 of 20", 20, 5, apply.HoldOverLimit},
		{"empty render", 2, 0, apply.HoldEmptyRender},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			objs := e.companies(tt.fleet)
			if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
				t.Fatalf("apply: %v %v", err, r.Err())
			}
			kept := objs[:8*tt.keep]
			gone := 8 * (tt.fleet - tt.keep)
			opts := apply.DefaultApplyOptions()
			opts.Prune = true
			if tt.held == "" {
				r, err := e.manager().Apply(ctx, kept, opts)
				if err != nil || r.Err() != nil {
					t.Fatalf("prune: %v %v", err, r.Err())
				}
				if got := r.Count(apply.ActionPruned); got != gone {
					t.Errorf("pruned %d, want %d", got, gone)
				}
				return
			}

			dopts := apply.DefaultDiffOptions()
			dopts.Prune = true
			d, err := e.manager().Diff(ctx, kept, dopts)
			if err != nil || d.PruneHeld == nil || d.PruneHeld.Reason != tt.held {
				t.Fatalf("diff --prune: %v, held %+v, want %s", err, d.PruneHeld, tt.held)
			}
			_, err = e.manager().Apply(ctx, kept, opts)
			var refused *apply.PruneRefusedError
			if !errors.As(err, &refused) || refused.Hold.Reason != tt.held {
				t.Fatalf("prune: %v, want refused (%s)", err, tt.held)
			}
			if refused.Hold.Token != d.PruneHeld.Token || refused.Hold.Objects != gone ||
				len(refused.Hold.Tenants) != tt.fleet-tt.keep {
				t.Errorf("hold %+v, diff's %+v", refused.Hold, *d.PruneHeld)
			}
			for i := tt.keep; i < tt.fleet; i++ {
				n, err := e.cs.CoreV1().Namespaces().Get(ctx, e.companyNS(i), metav1.GetOptions{})
				if err != nil || n.DeletionTimestamp != nil {
					t.Fatalf("refused prune touched %s: %v", e.companyNS(i), err)
				}
			}

			// Approve exactly this prune, as the message says.
			args := strings.Fields(refused.Hold.ApproveCommand(refused.Parent))[1:]
			if _, stderr, err := e.kubectl(args...); err != nil {
				t.Fatalf("kubectl %v: %v: %s", args, err, stderr)
			}
			r, err := e.manager().Apply(ctx, kept, opts)
			if err != nil || r.Err() != nil {
				t.Fatalf("approved prune: %v %v", err, r.Err())
			}
			if got := r.Count(apply.ActionPruned); got != gone {
				t.Errorf("approved prune deleted %d, want %d", got, gone)
			}
			parent, err := e.cs.CoreV1().Secrets(e.parent.Namespace).Get(ctx, e.parent.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := parent.Annotations[apply.AnnotationApprovePrune]; ok {
				t.Errorf("approval %q left on the parent after the prune it approved", v)
			}
		})
	}
}
