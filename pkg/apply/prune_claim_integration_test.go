//go:build integration

package apply_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestPruneTenantWithKeptLeaseClaim: a removed company's Namespace that
// holds the claim of a suspended sandbox lease (the daemon's, labelled
// with its lease) is pruned, and the claim goes with it; another claim
// (the control, not a lease's) keeps the Namespace until it is gone. The
// lease's label is leasepod's, so this fails if manager_prune.go's copy
// of it drifts.
func TestPruneTenantWithKeptLeaseClaim(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	objs := e.companies(4)
	if r, err := e.manager().Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}
	ns := e.companyNS(3)
	claim := func(name string, labels map[string]string) {
		t.Helper()
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("pcsync-test-none"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const lease = "pcsync-sbx-kept00000001"
	claim(lease, map[string]string{"app.kubernetes.io/managed-by": "pcsync", leasepod.LabelLease: lease})
	claim("scratch", map[string]string{"app.kubernetes.io/managed-by": "pcsync"})

	opts := apply.DefaultApplyOptions()
	opts.Prune, opts.PruneFloor = true, 1
	kept := objs[:24]
	r, err := e.manager().Apply(ctx, kept, opts)
	if err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	last := r.Objects[len(r.Objects)-1]
	wantNote := "holds objects that are not in the set, which deleting it would delete too: persistentvolumeclaim/scratch; " +
		"it is pruned once they are gone"
	if last.Ref.String() != "Namespace/"+ns || last.Action != apply.ActionRetained || last.Note != wantNote {
		t.Errorf("the control: last result = %+v", last)
	}
	if err := e.cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func() error {
		_, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "scratch", metav1.GetOptions{})
		return err
	})
	if r, err = e.manager().Apply(ctx, kept, opts); err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	if got := pruneActions(r)["Namespace/"+ns]; got != apply.ActionPruned {
		t.Errorf("Namespace/%s: %s, want pruned", ns, got)
	}
	waitGone(t, func() error {
		_, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, lease, metav1.GetOptions{})
		return err
	})
	waitGone(t, func() error {
		_, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
}
