package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestCreateError: a refused lease pod is explained by what refused it:
// the quota, a missing namespace, RBAC (pcsync holds pods create only in
// tenant namespaces whose RoleBinding pcsync is applied), or admission.
func TestCreateError(t *testing.T) {
	r := leasepod.Record{ID: "lease-1", Namespace: "paperclip-acme", Company: "acme"}
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name     string
		err      error
		wantCode Code
		wantPart string
	}{
		{"quota", apierrors.NewForbidden(pods, "lease-1", errors.New("exceeded quota: paperclip-quota")), "quota_full", "ResourceQuota paperclip-quota"},
		{"no namespace", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "paperclip-acme"), "namespace_missing", "run `pcsync apply`"},
		{"rbac", apierrors.NewForbidden(pods, "", errors.New(`User "system:serviceaccount:pcsync-system:pcsync" cannot create resource "pods" in API group "" in the namespace "paperclip-acme"`)),
			"pod_forbidden", "whose RoleBinding pcsync grants it the ClusterRole pcsync-tenant"},
		{"admission", apierrors.NewForbidden(pods, "lease-1", errors.New(`violates PodSecurity "restricted:latest"`)), "pod_forbidden", "violates PodSecurity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ue *UserError
			if !errors.As(createError(r, tt.err), &ue) {
				t.Fatalf("createError(%v) is not a UserError", tt.err)
			}
			if diff := cmp.Diff(tt.wantCode, ue.Code); diff != "" {
				t.Errorf("code (-want +got):\n%s", diff)
			}
			if !strings.Contains(ue.Message, tt.wantPart) {
				t.Errorf("message %q does not say %q", ue.Message, tt.wantPart)
			}
			if tt.name == "admission" && strings.Contains(ue.Message, "RoleBinding") {
				t.Errorf("an admission refusal blamed on RBAC: %q", ue.Message)
			}
		})
	}
}
