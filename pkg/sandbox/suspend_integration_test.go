//go:build integration

package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// testClass is the StorageClass whose claims provideVolumes binds.
const testClass = "pcsync-test-kept"

// keptCore is the environment's Paperclip fields of a kept lease.
var keptCore = map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm"}

// provideVolumes stands in for a provisioner on kwok: each claim of
// namespace ns of StorageClass testClass gets a PersistentVolume bound to
// it (claimRef), which the API server's binder completes. The real node's
// tests use a real provisioner.
func provideVolumes(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := e.c.Client()
	w, err := cs.CoreV1().PersistentVolumeClaims(e.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != testClass || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
				continue
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(pvc.UID)},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              testClass,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pvc.Name}},
					ClaimRef:                      &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
				},
			}
			_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
				t.Errorf("PersistentVolume for %s: %v", pvc.Name, err)
			}
			name := pv.Name
			t.Cleanup(func() { _ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}()
}

// keptEnv is an env whose company suspends kept leases on claims of
// class, checked every 100 ms.
func keptEnv(t *testing.T, class string) *env {
	t.Helper()
	return keptEnvWith(t, class, envOptions{})
}

// keptEnvWith is keptEnv with the env's other options o.
func keptEnvWith(t *testing.T, class string, o envOptions) *env {
	t.Helper()
	o.NoPools, o.Sandbox = true, "{suspend: {idleSec: 30, size: 1Gi, storageClassName: "+class+"}}"
	e := newEnv(t, o)
	e.tune = func(o *Options) { o.SuspendCheck = 100 * time.Millisecond }
	e.m.Close()
	e.start()
	provideVolumes(t, e)
	return e
}

// idleNow makes lease id idle for an hour, as if no command had come
// since, so that the next check suspends it.
func (e *env) idleNow(t *testing.T, id string) {
	t.Helper()
	l := e.m.lookup(id)
	if l == nil {
		t.Fatalf("lease %s not held", id)
	}
	l.mu.Lock()
	l.lastUsed = time.Now().Add(-time.Hour)
	l.mu.Unlock()
}

// waitState waits until lease id is in state want.
func (e *env) waitState(t *testing.T, id string, want LeaseState) {
	t.Helper()
	var got LeaseState
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if l := e.m.lookup(id); l != nil {
			if got = l.State(); got == want {
				return
			}
		}
	}
	t.Fatalf("lease %s: state %s, want %s\nlogs:\n%s", id, got, want, e.logs.String())
}

// leasePods lists the pods of lease id that are not being deleted.
func (e *env) leasePods(t *testing.T, id string) []corev1.Pod {
	t.Helper()
	list, err := e.c.Client().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: leasepod.LabelLease + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) claim(t *testing.T, id string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := e.c.Client().CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// TestKeptLeaseSuspendResume: a kept lease's pod mounts its claim from its
// start; idle, its pod is deleted and its claim kept, the lease still
// Paperclip's under the same id; a daemon that restarts (its journal
// lost, too) adopts it suspended from its claim; the next execute resumes
// it on one new pod mounting the claim, and a release deletes pod and
// claim. A lease of a non-kept environment gets no claim (the control).
func TestKeptLeaseSuspendResume(t *testing.T) {
	e := keptEnv(t, testClass)
	plain := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600})
	if e.claim(t, plain.ID) != nil {
		t.Errorf("lease %s of an environment that keeps no lease has a claim", plain.ID)
	}
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	pvc := e.claim(t, info.ID)
	if pvc == nil {
		t.Fatalf("kept lease %s has no claim\nlogs:\n%s", info.ID, e.logs.String())
	}
	if pvc.Labels[leasepod.LabelOwner] != "pcsync" || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("claim labels %v, access modes %v", pvc.Labels, pvc.Spec.AccessModes)
	}
	first := e.leasePods(t, info.ID)
	if len(first) != 1 || !mountsClaim(&first[0], info.ID) {
		t.Fatalf("kept lease %s: pods %d, want 1 mounting its claim at /workspace and HOME: %+v", info.ID, len(first), podVolumes(first))
	}
	if r := e.exec(t, info.ID, ExecParams{Command: "sh", Args: []string{"-c", "echo kept > note"}}); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("write: %+v", r)
	}

	e.idleNow(t, plain.ID) // the control: not kept, never suspended
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	if pods := e.leasePods(t, info.ID); len(pods) != 0 {
		t.Errorf("suspended lease %s still has %d pods", info.ID, len(pods))
	}
	if e.claim(t, info.ID) == nil {
		t.Fatalf("suspended lease %s lost its claim", info.ID)
	}
	if s := e.m.lookup(plain.ID).State(); s != LeaseReady {
		t.Errorf("the lease that keeps nothing went %s", s)
	}

	// A restart with the journal lost: the claim's record brings it back.
	e.m.Close()
	if err := removeJournal(e); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitState(t, info.ID, LeaseSuspended)

	r := e.exec(t, info.ID, ExecParams{Command: "cat", Args: []string{"note"}})
	if r.Stdout != "kept\n" {
		t.Errorf("after the resume: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	again := e.leasePods(t, info.ID)
	if len(again) != 1 || again[0].UID == first[0].UID || !mountsClaim(&again[0], info.ID) {
		t.Errorf("resumed lease %s: %d pods (want 1, new, on its claim)", info.ID, len(again))
	}
	// The resume hook of a lease already back (the execute resumed it)
	// says nothing of a suspension; of a suspended one, its claim and when.
	if got, err := e.m.Resume(context.Background(), info.ID); err != nil || got.ID != info.ID || got.Metadata[MetadataResumed] != nil {
		t.Errorf("resume hook of a ready lease: %+v, %v", got, err)
	}
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	got, err := e.m.Resume(context.Background(), info.ID)
	if err != nil {
		t.Fatalf("resume hook of the suspended lease: %v", err)
	}
	md, _ := got.Metadata[MetadataResumed].(map[string]any)
	if md["claim"] != info.ID || md["suspendedAt"] == nil || md["idleSec"] != 30 { // keptEnv's idleSec
		t.Errorf("resume hook of the suspended lease: metadata %s = %v", MetadataResumed, md)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := e.m.Release(ctx, ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if pvc := e.claim(t, info.ID); pvc != nil && pvc.DeletionTimestamp == nil {
		t.Errorf("released lease %s kept its claim", info.ID)
	}
}

// TestKeptLeaseExecuteWhileSuspending: an execute that comes while its
// lease is being suspended waits for the suspend, then resumes it and
// runs on the new pod, never on the one being deleted.
func TestKeptLeaseExecuteWhileSuspending(t *testing.T) {
	e := keptEnv(t, testClass)
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	first := e.leasePods(t, info.ID)
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspending)
	r := e.exec(t, info.ID, ExecParams{Command: "echo", Args: []string{"after"}})
	if r.Stdout != "after\n" {
		t.Errorf("execute during the suspend: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	pods := e.leasePods(t, info.ID)
	if len(pods) != 1 || len(first) != 1 || pods[0].UID == first[0].UID {
		t.Errorf("pods after: %d (want 1, not the suspended one)", len(pods))
	}
}

// TestKeptLeaseStorageFaults: a resume whose claim is gone is refused
// with storage_gone naming the claim, and the lease ends; a kept lease
// whose StorageClass does not exist is refused naming the class and the
// claim's phase, and leaves no claim; one whose quota holds no claim is
// refused with quota_full naming the claim and the quota's fields, with
// no pod.
func TestKeptLeaseStorageFaults(t *testing.T) {
	e := keptEnv(t, testClass)
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	cs := e.c.Client()
	if err := cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(context.Background(), info.ID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for e.claim(t, info.ID) != nil {
		time.Sleep(50 * time.Millisecond)
	}
	_, err := e.m.Resume(context.Background(), info.ID)
	var ue *UserError
	if !errors.As(err, &ue) || ue.Code != CodeStorageGone || !strings.Contains(ue.Message, "PersistentVolumeClaim/"+e.ns+"/"+info.ID) {
		t.Errorf("resume without its claim: %v, want %s naming the claim", err, CodeStorageGone)
	}
	e.waitGoneLease(t, info.ID)

	bad := keptEnv(t, "no-such-class")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, err = bad.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: bad.slug(), LeaseTTLSec: 3600, TimeoutMs: 15000, Core: keptCore},
		AdapterType: "claude_local", RunID: "run-1"})
	if !errors.As(err, &ue) || !strings.Contains(ue.Message, "StorageClass no-such-class") || !strings.Contains(ue.Message, "Pending") {
		t.Errorf("acquire on a missing StorageClass: %v, want it named with the claim's phase", err)
	}
	list, lerr := cs.CoreV1().PersistentVolumeClaims(bad.ns).List(context.Background(), metav1.ListOptions{FieldSelector: fields.Everything().String()})
	for deadline := time.Now().Add(20 * time.Second); lerr == nil && len(list.Items) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, lerr = cs.CoreV1().PersistentVolumeClaims(bad.ns).List(context.Background(), metav1.ListOptions{})
	}
	if lerr != nil || len(list.Items) != 0 {
		t.Errorf("claims left by the refused acquire: %v %v", list, lerr)
	}

	full := keptEnv(t, testClass)
	if _, err := cs.CoreV1().ResourceQuotas(full.ns).Create(context.Background(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "paperclip-quota"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = full.m.Acquire(ctx, AcquireParams{Config: EnvironmentConfig{Company: full.slug(), LeaseTTLSec: 3600, Core: keptCore},
		AdapterType: "claude_local", RunID: "run-1"})
	if !errors.As(err, &ue) || ue.Code != CodeQuotaFull || !strings.Contains(ue.Message, "PersistentVolumeClaim/"+full.ns+"/") ||
		!strings.Contains(ue.Message, "spec.quota.persistentVolumeClaims") {
		t.Errorf("acquire with no room for a claim: %v, want %s naming the claim and the quota's field", err, CodeQuotaFull)
	}
	if pods, _ := cs.CoreV1().Pods(full.ns).List(context.Background(), leasePodsOnly()); len(pods.Items) != 0 {
		t.Errorf("the refused kept lease left %d pods", len(pods.Items))
	}
}

// leasePodsOnly lists lease pods.
func leasePodsOnly() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: leasepod.LabelLease}
}

// waitGoneLease waits until the manager no longer holds lease id.
func (e *env) waitGoneLease(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if e.m.lookup(id) == nil {
			return
		}
	}
	t.Fatalf("lease %s still held\nlogs:\n%s", id, e.logs.String())
}

// mountsClaim says pod mounts claim id at /workspace and HOME.
func mountsClaim(pod *corev1.Pod, id string) bool {
	vol := ""
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == id {
			vol = v.Name
		}
	}
	n := 0
	for _, vm := range mainContainer(pod).VolumeMounts {
		if vm.Name == vol && (vm.MountPath == leasepod.PodWorkspace || vm.MountPath == leasepod.PodHome) {
			n++
		}
	}
	return vol != "" && n == 2
}

// removeJournal deletes the env's lease journal, as a daemon whose state
// directory was lost would find it.
func removeJournal(e *env) error {
	err := os.Remove(filepath.Join(e.hostDir, "state", journalFile))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// podVolumes is what pods mount, for a failure's message.
func podVolumes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, vm := range mainContainer(&p).VolumeMounts {
			out = append(out, p.Name+":"+vm.Name+"@"+vm.MountPath+"/"+vm.SubPath)
		}
	}
	return out
}

// mainContainer is the lease pod's container that runs the command server.
func mainContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == leasepod.ContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}

// journalRecord is lease id's record in the env's journal (the Manager
// closed).
func journalRecord(t *testing.T, e *env, id string) leasepod.Record {
	t.Helper()
	r, ok := journalLease(t, e, id)
	if !ok {
		t.Fatalf("lease %s not in the journal", id)
	}
	return r
}

// TestKeptLeaseDaemonCrashes: a daemon that ended at each step of a
// suspend or a resume leaves a lease the next daemon takes over with one
// pod, never two, and whose next execute runs:
//   - after journaling the suspend, before the pod's delete: the lease is
//     adopted ready on its pod;
//   - with the pod being deleted (a finalizer holds it): the lease is
//     suspended, and its resume waits the old pod gone before it creates
//     the new one;
//   - after the resume's pod create, before journaling it: the lease is
//     adopted ready on that pod.
func TestKeptLeaseDaemonCrashes(t *testing.T) {
	const finalizer = "pcsync.io/test-hold"
	for _, step := range []string{"journaled", "deleting", "created"} {
		t.Run(step, func(t *testing.T) {
			e := keptEnv(t, testClass)
			info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
			cs := e.c.Client().CoreV1().Pods(e.ns)
			ctx := context.Background()
			first := e.leasePods(t, info.ID)
			if step == "created" {
				e.idleNow(t, info.ID)
				e.waitState(t, info.ID, LeaseSuspended)
			}
			e.m.Close()
			r := journalRecord(t, e, info.ID)
			var want types.UID
			switch step {
			case "journaled":
				r.Suspended, r.PodUID = true, ""
				j, _ := openJournal(filepath.Join(e.hostDir, "state"))
				if err := j.put(r); err != nil {
					t.Fatal(err)
				}
				want = first[0].UID
			case "deleting":
				patch := []byte(`{"metadata":{"finalizers":["` + finalizer + `"]}}`)
				if _, err := cs.Patch(ctx, info.ID, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
				// Grace 0: once its finalizer goes, the API server removes
				// it itself. With a grace period kwok's stage deletes it,
				// by name, and that delete can reach the resume's new pod.
				if err := cs.Delete(ctx, info.ID, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
					t.Fatal(err)
				}
			case "created":
				pod, err := leasepod.BuildPod(&r, e.model)
				if err != nil {
					t.Fatal(err)
				}
				created, err := cs.Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want = created.UID
			}
			e.start()
			if step == "deleting" {
				e.waitState(t, info.ID, LeaseSuspended)
				go func() { // the old pod goes a moment after the resume began
					time.Sleep(time.Second)
					_, _ = cs.Patch(ctx, info.ID, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				}()
			}
			if r := e.exec(t, info.ID, ExecParams{Command: "echo", Args: []string{"on"}}); r.Stdout != "on\n" {
				t.Fatalf("execute after the restart: %q %q\nlogs:\n%s", r.Stdout, r.Stderr, e.logs.String())
			}
			pods := e.leasePods(t, info.ID)
			switch {
			case len(pods) != 1:
				t.Errorf("lease %s has %d pods, want 1", info.ID, len(pods))
			case want != "" && pods[0].UID != want:
				t.Errorf("lease %s on pod %s, want the one there at the restart, %s", info.ID, pods[0].UID, want)
			case want == "" && pods[0].UID == first[0].UID:
				t.Errorf("lease %s still on the pod that was being deleted", info.ID)
			}
		})
	}
}

// TestKeptLeaseOrphanClaim: a claim of this daemon's owner whose lease it
// does not hold is deleted once older than ClaimGrace; the claim of a
// lease it holds (suspended) is kept (the control); so is a claim of
// another owner.
func TestKeptLeaseOrphanClaim(t *testing.T) {
	e := keptEnv(t, testClass)
	e.tune = func(o *Options) {
		o.SuspendCheck, o.ClaimSweep, o.ClaimGrace = 100*time.Millisecond, 200*time.Millisecond, time.Second
	}
	e.m.Close()
	e.start()
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	c, _ := e.model.Company(e.slug())
	claim := func(id, owner string) {
		r := leasepod.Record{ID: id, Namespace: e.ns, Company: e.slug(), ExpiresAt: time.Now().Add(time.Hour),
			Keep: &leasepod.Keep{IdleSec: 30, Size: "1Gi", StorageClassName: testClass}}
		pvc, err := leasepod.BuildClaim(&r, c, owner)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Client().CoreV1().PersistentVolumeClaims(e.ns).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim("pcsync-sbx-orphan0001", "pcsync")
	claim("pcsync-sbx-others0001", "another-pcsync")
	for deadline := time.Now().Add(20 * time.Second); e.claim(t, "pcsync-sbx-orphan0001") != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned claim is still there\nlogs:\n%s", e.logs.String())
		}
	}
	if e.claim(t, info.ID) == nil {
		t.Errorf("the suspended lease's claim was swept")
	}
	if e.claim(t, "pcsync-sbx-others0001") == nil {
		t.Errorf("another owner's claim was swept")
	}
}

// TestKeptLeaseCredentialAfterResume: in egress mode proxy with a declared
// credential, a kept lease's token is made again for the pod of its
// resume (the proxy knows a token by its hash on the pod): the first
// pod's annotation is the control, the resumed pod gets its own.
func TestKeptLeaseCredentialAfterResume(t *testing.T) {
	e := keptEnvWith(t, testClass, envOptions{ProxyIP: "10.0.0.42", Agents: "[{name: coder, adapter: claude_local}]",
		Credentials: "[{name: claude, provider: anthropic, type: apiKey, secretRef: {name: model-keys, key: anthropic}}]"})
	ctx := context.Background()
	if _, err := e.c.Client().CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
		StringData: map[string]string{"anthropic": "sk-ant-kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	withKey := ExecParams{Command: "sh", Args: []string{"-c", "echo ok"}, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-from-paperclip"}}
	tokenHash := func() string {
		t.Helper()
		if r := e.exec(t, info.ID, withKey); r.Stdout != "ok\n" {
			t.Fatalf("execute with a key: %q %q", r.Stdout, r.Stderr)
		}
		pods := e.leasePods(t, info.ID)
		if len(pods) != 1 {
			t.Fatalf("lease %s: %d pods", info.ID, len(pods))
		}
		return pods[0].Annotations[agentpod.AnnotationTokenHash]
	}
	first := tokenHash()
	if first == "" {
		t.Fatalf("the control: the first pod has no token hash")
	}
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	if again := tokenHash(); again == "" || again == first {
		t.Errorf("the resumed pod's token hash %q (the first pod's %q): want a token of its own", again, first)
	}
}

// TestKeptLeaseExpiresSuspended: a suspended lease whose TTL ends is
// ended with its claim deleted, no pod made for it.
func TestKeptLeaseExpiresSuspended(t *testing.T) {
	e := keptEnv(t, testClass)
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 4, Core: keptCore})
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	e.waitGoneLease(t, info.ID)
	if pvc := e.claim(t, info.ID); pvc != nil && pvc.DeletionTimestamp == nil {
		t.Errorf("the expired lease's claim is still there")
	}
	if pods := e.leasePods(t, info.ID); len(pods) != 0 {
		t.Errorf("the expired lease has %d pods", len(pods))
	}
}

// TestKeptLeaseResumeNotice: through the hook API, the first execute
// after a kept lease's resume from suspension answers one log line
// before its output, naming the lease, its claim and its idle time; the
// command's own output lines hold none of it. The execute before the
// suspend (the control) and the one after the notice answer none.
func TestKeptLeaseResumeNotice(t *testing.T) {
	e := keptEnv(t, testClass)
	info := e.acquire(t, EnvironmentConfig{LeaseTTLSec: 3600, Core: keptCore})
	sock := filepath.Join(e.hostDir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = ServeAPI(ctx, e.m, sock) }()
	waitSocket(t, sock)
	api := newAPIClient(sock)
	echo := map[string]any{"lease": map[string]any{"providerLeaseId": info.ID}, "command": "echo", "args": []string{"out"}}
	logs := func(what string) []string {
		t.Helper()
		lines, err := api.executeLines(echo)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var out, logged []string
		for _, l := range lines {
			if s, ok := l["stdout"].(string); ok {
				out = append(out, s)
			}
			if s, ok := l["log"].(string); ok {
				logged = append(logged, s)
			}
		}
		if strings.Join(out, "") != "out\n" {
			t.Errorf("%s: stdout lines %q, want the command's output only", what, out)
		}
		return logged
	}
	if got := logs("before the suspend"); len(got) != 0 {
		t.Errorf("an execute on a lease never suspended logged %q", got)
	}
	e.idleNow(t, info.ID)
	e.waitState(t, info.ID, LeaseSuspended)
	got := logs("the first after the resume")
	want := "[pcsync] lease " + info.ID + " resumed: its workspace and HOME were kept on claim " + info.ID + " while suspended for "
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.HasSuffix(got[0], " (suspended after 30s idle)\n") {
		t.Errorf("the first execute after the resume logged %q, want one line %q…", got, want)
	}
	if got := logs("the second after the resume"); len(got) != 0 {
		t.Errorf("the notice came again: %q", got)
	}
}
