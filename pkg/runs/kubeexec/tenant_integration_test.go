//go:build integration

package kubeexec

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestNoJobInANamespaceThatIsNotTheCompanys: the company's namespace exists
// but is not its tenant namespace (someone else's, which pcsync apply left
// alone). The run fails at once, saying so and how to adopt it; no Job and
// no Secret is created there.
func TestNoJobInANamespaceThatIsNotTheCompanys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.SucceedAfter(time.Second)})
	patch := []byte(`{"metadata":{"labels":{"paperclip.io/company":null}}}`)
	if _, err := e.cs.CoreV1().Namespaces().Patch(context.Background(), e.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.drop("foreign-1", nil)
	d := e.startDaemon(true, nil)
	d.wait(t)

	res := e.result("foreign-1")
	msg := deref(res.ErrorMessage)
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrInvalidRequest ||
		!strings.Contains(msg, "no Job created: Namespace/"+e.ns+" exists but is not company "+e.slug+"'s tenant namespace") ||
		!strings.Contains(msg, "kubectl annotate namespace/"+e.ns+" pcsync.io/adopt="+e.slug) {
		t.Fatalf("result: %s %s %q", res.Status, deref(res.ErrorCode), msg)
	}
	if n := e.auditCount("create", "jobs", "") + e.auditCount("create", "secrets", ""); n != 0 {
		t.Errorf("%d Job or Secret creates in %s, want none", n, e.ns)
	}
}
