//go:build integration

package realnode

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// A claim that names no StorageClass gets the real node's default one
// (local-path-provisioner, run by the harness): it waits for its first consumer,
// binds when a pod that uses it is scheduled, and its volume is a directory on
// the node. The files one pod writes there are read byte for byte by a second
// pod that mounts the same claim after the first is gone; deleting the claim
// removes the volume and its directory.
func TestDynamicVolume(t *testing.T) {
	c := testcluster.Get(t)
	cs, node, ns := setup(t)
	ctx := testContext(t)

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	got, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := ptr.Deref(got.Spec.StorageClassName, ""); sc != node.StorageClass() {
		t.Fatalf("the claim's StorageClass: %q, want the default %q", sc, node.StorageClass())
	}
	waitClaimEvent(ctx, t, cs, ns, "data", "WaitForFirstConsumer")
	if got, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
		t.Fatalf("before any pod uses it the claim is %s with volume %q, want Pending with none", got.Status.Phase, got.Spec.VolumeName)
	}

	files := map[string][]byte{"blob": make([]byte, 1<<20), "dir/sub/notes.txt": []byte("kept\nacross pods\n"), "empty": nil}
	if _, err := rand.Read(files["blob"]); err != nil {
		t.Fatal(err)
	}
	createPod(ctx, t, cs, ns, "writer", claimPodSpec(node, "data"), false)
	for name, data := range files {
		cmd := []string{"/pause", "-write", "/data/" + name, "-exit", "0"}
		if _, _, err := podExecIn(ctx, c, ns, "writer", "main", bytes.NewReader(data), cmd); err != nil {
			t.Fatal(err)
		}
	}
	got, err = cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimBound {
		t.Fatalf("with a pod Running on it the claim is %s, want Bound", got.Status.Phase)
	}
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || filepath.Dir(pv.Spec.HostPath.Path) != node.VolumeDir() {
		t.Fatalf("PersistentVolume %s: source %+v, want a directory of %s", pv.Name, pv.Spec.PersistentVolumeSource, node.VolumeDir())
	}
	dir := pv.Spec.HostPath.Path
	for name, data := range files { // the node's own view of the volume
		if onHost, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(onHost, data) {
			t.Fatalf("%s on the node: %d bytes (%v), want the %d the pod wrote", filepath.Join(dir, name), len(onHost), err, len(data))
		}
	}

	deletePod(ctx, t, cs, ns, "writer")
	createPod(ctx, t, cs, ns, "reader", claimPodSpec(node, "data"), false)
	for name, data := range files {
		out, _, err := podExecIn(ctx, c, ns, "reader", "main", nil, []string{"/pause", "-read", "/data/" + name, "-exit", "0"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal([]byte(out), data) {
			t.Errorf("%s read by the second pod: %d bytes, not the %d the first wrote", name, len(out), len(data))
		}
	}
	deletePod(ctx, t, cs, ns, "reader")
	t.Logf("local-path-provisioner resident: %d MiB", node.ResidentMemory()["local-path-provisioner"]>>20)

	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVolumeGone(ctx, t, cs, pv.Name, dir)
}

// claimPodSpec is a restricted pod pinned to the real node, sleeping, with the
// claim mounted at /data.
func claimPodSpec(node *testcluster.RealNode, claim string) corev1.PodSpec {
	spec := podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever)
	spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return spec
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}); err != nil {
		t.Fatal(err)
	}
	if err := podwait.Gone(ctx, cs, ns, name); err != nil {
		t.Fatalf("pod %s/%s not gone: %v", ns, name, err)
	}
}

// waitClaimEvent waits for an Event of the claim with the reason.
func waitClaimEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, claim, reason string) {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": claim, "reason": reason}.String()
	for {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil && len(evs.Items) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %s Event for claim %s/%s: %v (last error %v)", reason, ns, claim, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitVolumeGone waits until the PersistentVolume is deleted and its directory
// on the node removed (the provisioner's helper pod does it).
func waitVolumeGone(ctx context.Context, t *testing.T, cs kubernetes.Interface, pv, dir string) {
	t.Helper()
	for {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		_, serr := os.Stat(dir)
		if apierrors.IsNotFound(err) && errors.Is(serr, fs.ErrNotExist) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PersistentVolume %s (get: %v) or its directory %s (stat: %v) still there: %v",
				pv, err, dir, serr, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
