//go:build integration

package spendkeep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
)

// TestRecordAndApply: pcsync's apply and the Keeper do not fight over the
// proxy's Deployment: once the Keeper has written its record, pcsync diff
// shows no change, pcsync apply keeps the record, and pruning the removed
// tenant leaves nothing of it (the record goes with its Deployment).
func TestRecordAndApply(t *testing.T) {
	c := testcluster.Get(t)
	cs := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	ns, parentNS := "spendapply-"+id, "pcsync-sys-"+id
	for _, n := range []string{ns, parentNS} {
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: parentNS}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{agentpod.LabelManagedBy: agentpod.ManagedByValue, "paperclip.io/company": "acme"}
	podLabels := map[string]any{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelRole: agentpod.RoleEgressProxy}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns, "labels": labels}}},
		{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": DeploymentName, "namespace": ns, "labels": labels},
			"spec": map[string]any{"selector": map[string]any{"matchLabels": podLabels}, "template": map[string]any{
				"metadata": map[string]any{"labels": podLabels},
				"spec": map[string]any{"terminationGracePeriodSeconds": int64(0), "containers": []any{
					map[string]any{"name": "egress-proxy", "image": "example.invalid/none:1"}}}}}}},
	}
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: parentNS}
	m, err := apply.NewManager(c.RESTConfig(), mo)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := m.Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply: %v %v", err, r.Err())
	}

	ps := &proxies{addrs: map[string]string{}}
	pod := awaitPod(ctx, t, cs, ns, "", "")
	p := ps.start(t, pod.Status.PodIP)
	kctx, stop := context.WithCancel(ctx)
	k := New(cs, Options{Interval: 200 * time.Millisecond, Client: ps.client()})
	if err := k.Run(kctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); k.Wait() }()
	p.gate.Ledger().Add("r1", "coder", 1234)
	awaitRecord(ctx, t, cs, ns, 1234)

	d, err := m.Diff(ctx, objs, apply.DefaultDiffOptions())
	if err != nil || d.Err() != nil {
		t.Fatalf("diff: %v %v", err, d.Err())
	}
	for _, ch := range d.Objects {
		if ch.Diff != "" || (ch.Action != apply.ActionUnchanged && ch.Action != apply.ActionConfigured) {
			t.Errorf("diff of %s after the Keeper wrote: %s\n%s", ch.Ref, ch.Action, ch.Diff)
		}
	}
	if r, err := m.Apply(ctx, objs, apply.DefaultApplyOptions()); err != nil || r.Err() != nil {
		t.Fatalf("apply again: %v %v", err, r.Err())
	}
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, DeploymentName, metav1.GetOptions{})
	if err != nil || !strings.Contains(dep.Annotations[AnnotationRecord], `"company":1234`) {
		t.Fatalf("the record after apply: %q (%v)", dep.Annotations[AnnotationRecord], err)
	}

	// The tenant removed: prune deletes its Deployment, and the record
	// with it.
	po := apply.DefaultApplyOptions()
	po.Prune, po.AllowMassPrune = true, true
	if r, err := m.Apply(ctx, nil, po); err != nil || r.Err() != nil {
		t.Fatalf("prune: %v %v", err, r.Err())
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := cs.AppsV1().Deployments(ns).Get(ctx, DeploymentName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Deployment 30 s after prune: %v", err)
		}
	}
}
