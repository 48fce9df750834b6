//go:build integration

package deploy

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

// TestPaperclipServerSideDryRun server-side dry-run applies every object
// of deploy/paperclip, and creates (dry run) the pod its Deployment makes
// in the namespace, which enforces Pod Security restricted: the pcsync
// sidecar, git-sync and the Paperclip server all pass it.
func TestPaperclipServerSideDryRun(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	objs := buildDir(t, "paperclip")
	cfg := c.RESTConfig()
	w := &warnings{}
	cfg.WarningHandler = w
	a := newApplier(t, cfg)
	for _, o := range []*unstructured.Unstructured{testkustomize.Find(objs, "Namespace", "paperclip"), testkustomize.Find(objs, "ServiceAccount", "pcsync")} {
		if err := a.apply(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { deleteNamespace(t, c.Client(), "paperclip") })
	for _, o := range objs {
		if err := a.apply(ctx, o, true); err != nil {
			t.Errorf("%s/%s: server-side dry run: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if len(w.list) > 0 {
		t.Errorf("API server warnings (Pod Security warn mode, deprecations):\n%s", strings.Join(w.list, "\n"))
	}
	dep := typed[appsv1.Deployment](t, testkustomize.Find(objs, "Deployment", "paperclip-server"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "paperclip-server-", Namespace: "paperclip", Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	if err := createWhenSAExists(ctx, c.Client(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the Paperclip pod with the pcsync sidecar in namespace paperclip: %v", err)
	}
}
