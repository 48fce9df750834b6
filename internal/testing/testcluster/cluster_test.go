//go:build integration

package testcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// restricted are the Pod Security labels pcsync puts on tenant namespaces.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce": "restricted",
	"pod-security.kubernetes.io/warn":    "restricted",
	"pod-security.kubernetes.io/audit":   "restricted",
}

func client(t *testing.T) (*testcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	c := testcluster.Get(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c, cs
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 100ms until it returns true or ctx ends; the last
// description of the state is in the failure.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string, error)) {
	t.Helper()
	last := ""
	for {
		ok, state, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("%s: timed out; last state: %s", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restrictedPod returns a pod spec that Pod Security "restricted" admits.
func restrictedPod(labels map[string]string) corev1.PodTemplateSpec {
	no, yes := false, true
	uid := int64(1000)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "agent",
				Image: "registry.example/agent:v1",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
			}},
		},
	}
}

// withNodeSelector is a test-only annotation key: createPod turns "k=v" into the pod's
// node selector.
const withNodeSelector = "selftest.pcsync.io/node-selector"

func createPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string, labels, annotations map[string]string) *corev1.Pod {
	t.Helper()
	tmpl := restrictedPod(labels)
	if sel, ok := annotations[withNodeSelector]; ok {
		k, v, _ := strings.Cut(sel, "=")
		tmpl.Spec.NodeSelector = map[string]string{k: v}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations}, Spec: tmpl.Spec}
	out, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return out
}

func TestServerSideApplyConflict(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "ssa", nil)
	ctx := ctxT(t, time.Minute)
	cms := cs.CoreV1().ConfigMaps(ns)

	_, err := cms.Apply(ctx, corev1ac.ConfigMap("shared", ns).WithData(map[string]string{"owner": "alice"}),
		metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("alice applies: %v", err)
	}
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("shared", ns).WithData(map[string]string{"owner": "bob"}),
		metav1.ApplyOptions{FieldManager: "bob"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("bob applies a field alice owns: got %v, want a 409 conflict", err)
	}
	if !strings.Contains(err.Error(), "data.owner") {
		t.Errorf("conflict should name the field data.owner: %v", err)
	}
	got, err := cms.Apply(ctx, corev1ac.ConfigMap("shared", ns).WithData(map[string]string{"owner": "bob"}),
		metav1.ApplyOptions{FieldManager: "bob", Force: true})
	if err != nil {
		t.Fatalf("bob force-applies: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"owner": "bob"}, got.Data); diff != "" {
		t.Errorf("data after force (-want +got):\n%s", diff)
	}
	var managers []string
	for _, mf := range got.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply && strings.Contains(string(mf.FieldsV1.Raw), `"f:owner"`) {
			managers = append(managers, mf.Manager)
		}
	}
	if diff := cmp.Diff([]string{"bob"}, managers); diff != "" {
		t.Errorf("managers of data.owner (-want +got):\n%s", diff)
	}
}

func TestNetworkPolicyStored(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "netpol", nil)
	ctx := ctxT(t, time.Minute)
	want := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}
	_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"}, Spec: want,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create NetworkPolicy: %v", err)
	}
	got, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, "deny-all", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NetworkPolicy: %v", err)
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("NetworkPolicy spec (-want +got):\n%s", diff)
	}
	// Validation is real: a bad port is refused.
	bad := intstr.FromString("not a port!")
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &bad}},
		}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("invalid NetworkPolicy: got %v, want Invalid", err)
	}
}

func TestResourceQuotaStatus(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "quota", nil)
	ctx := ctxT(t, time.Minute)
	_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:        resource.MustParse("1"),
			corev1.ResourceRequestsCPU: resource.MustParse("2"),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create quota: %v", err)
	}
	usedPods := func() (bool, string, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		used, ok := q.Status.Used[corev1.ResourcePods]
		return ok && used.Value() == 1, fmt.Sprintf("status %+v", q.Status), nil
	}
	waitFor(t, ctx, "quota status filled in", func() (bool, string, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, ok := q.Status.Used[corev1.ResourcePods]
		return ok && len(q.Status.Hard) == 2, fmt.Sprintf("status %+v", q.Status), nil
	})
	createPod(t, ctx, cs, ns, "one", testcluster.RunForever(), nil)
	waitFor(t, ctx, "quota counts the pod", usedPods)
	// The second pod exceeds pods=1 and is refused by admission.
	tmpl := restrictedPod(nil)
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Spec: tmpl.Spec}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("second pod: got %v, want Forbidden: exceeded quota", err)
	}
}

func TestCustomResource(t *testing.T) {
	t.Parallel()
	c, _ := client(t)
	ns := c.Namespace(t, "crd", nil)
	ctx := ctxT(t, time.Minute)
	dyn := c.Dynamic()
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.selftest.pcsync.io"},
		"spec": map[string]any{
			"group": "selftest.pcsync.io",
			"scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type":       "object",
						"required":   []any{"size"},
						"properties": map[string]any{"size": map[string]any{"type": "integer", "minimum": int64(1)}},
					}},
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create CRD: %v", err)
	}
	gvr := schema.GroupVersionResource{Group: "selftest.pcsync.io", Version: "v1", Resource: "widgets"}
	obj := func(name string, size int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "selftest.pcsync.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"size": size},
		}}
	}
	// The new resource is served once the CRD is Established.
	waitFor(t, ctx, "custom object created", func() (bool, string, error) {
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj("w", 3), metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, err.Error(), nil
		}
		return err == nil, "", err
	})
	got, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get custom object: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"size": int64(3)}, got.Object["spec"]); diff != "" {
		t.Errorf("custom object spec (-want +got):\n%s", diff)
	}
	_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, obj("bad", 0), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("schema validation: got %v, want Invalid (size < 1)", err)
	}
}

// terminal summarises how a pod's first container ended.
type terminal struct {
	Phase    corev1.PodPhase
	Reason   string
	ExitCode int32
	Message  string
}

func TestJobOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		wantJob     batchv1.JobConditionType
		wantReason  string // of the Job condition
		want        terminal
		minDuration time.Duration // Running → terminal, at least
	}{
		{
			name:    "no sim labels: a Job's pod succeeds",
			labels:  map[string]string{"app": "plain"},
			wantJob: batchv1.JobComplete,
			want:    terminal{Phase: corev1.PodSucceeded, Reason: "Completed", ExitCode: 0},
		},
		{
			name:        "succeed after a chosen delay",
			labels:      testcluster.SucceedAfter(1500 * time.Millisecond),
			wantJob:     batchv1.JobComplete,
			want:        terminal{Phase: corev1.PodSucceeded, Reason: "Completed", ExitCode: 0},
			minDuration: 1500 * time.Millisecond,
		},
		{
			name:       "OOMKilled",
			labels:     testcluster.OOMKilled(0),
			wantJob:    batchv1.JobFailed,
			wantReason: "BackoffLimitExceeded",
			want:       terminal{Phase: corev1.PodFailed, Reason: "OOMKilled", ExitCode: 137},
		},
		{
			name:        "error with a message from the annotation",
			labels:      testcluster.FailWith("Error", 1, 200*time.Millisecond),
			annotations: map[string]string{testcluster.AnnotationMessage: "agent crashed: exit status 1"},
			wantJob:     batchv1.JobFailed,
			wantReason:  "BackoffLimitExceeded",
			want:        terminal{Phase: corev1.PodFailed, Reason: "Error", ExitCode: 1, Message: "agent crashed: exit status 1"},
		},
		{
			name:       "message from a label",
			labels:     testcluster.Merge(testcluster.FailWith("ContainerCannotRun", 127, 0), map[string]string{testcluster.LabelMessage: "claude-not-found"}),
			wantJob:    batchv1.JobFailed,
			wantReason: "BackoffLimitExceeded",
			want:       terminal{Phase: corev1.PodFailed, Reason: "ContainerCannotRun", ExitCode: 127, Message: "claude-not-found"},
		},
	}
	c, cs := client(t)
	ns := c.Namespace(t, "jobs", restricted)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t, 90*time.Second)
			tmpl := restrictedPod(tc.labels)
			tmpl.Annotations = tc.annotations
			name := fmt.Sprintf("job-%d", i)
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: tmpl},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create Job: %v", err)
			}
			var job *batchv1.Job
			waitFor(t, ctx, "Job finished", func() (bool, string, error) {
				job, err = cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				for _, cond := range job.Status.Conditions {
					if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
						return true, "", nil
					}
				}
				return false, fmt.Sprintf("status %+v", job.Status), nil
			})
			var cond *batchv1.JobCondition
			for i := range job.Status.Conditions {
				if job.Status.Conditions[i].Type == tc.wantJob && job.Status.Conditions[i].Status == corev1.ConditionTrue {
					cond = &job.Status.Conditions[i]
				}
			}
			if cond == nil {
				t.Fatalf("Job conditions %+v: want %s=True", job.Status.Conditions, tc.wantJob)
			}
			if tc.wantReason != "" && cond.Reason != tc.wantReason {
				t.Errorf("Job %s reason = %q, want %q", tc.wantJob, cond.Reason, tc.wantReason)
			}
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("pods of Job %s: %v, %d pods", name, err, len(pods.Items))
			}
			pod := pods.Items[0]
			if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
				t.Fatalf("container statuses: %+v", pod.Status.ContainerStatuses)
			}
			term := pod.Status.ContainerStatuses[0].State.Terminated
			got := terminal{Phase: pod.Status.Phase, Reason: term.Reason, ExitCode: term.ExitCode, Message: term.Message}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod outcome (-want +got):\n%s", diff)
			}
			if ran := term.FinishedAt.Sub(pod.Status.StartTime.Time); ran < tc.minDuration-time.Second {
				// API timestamps have second precision; allow for the rounding.
				t.Errorf("pod ran %s, want at least %s", ran, tc.minDuration)
			}
		})
	}
}

func TestRunningThenSucceeded(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "phases", restricted)
	ctx := ctxT(t, time.Minute)
	createPod(t, ctx, cs, ns, "p", testcluster.SucceedAfter(2*time.Second), nil)
	var runningAt time.Time
	waitFor(t, ctx, "pod Running", func() (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase == corev1.PodSucceeded {
			return false, "", errors.New("pod Succeeded without being seen Running")
		}
		runningAt = time.Now()
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
	})
	waitFor(t, ctx, "pod Succeeded", func() (bool, string, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase), nil
	})
	if d := time.Since(runningAt); d < 1500*time.Millisecond {
		t.Errorf("Succeeded %s after Running, want about 2s", d)
	}
}

func TestWaitingOutcomes(t *testing.T) {
	t.Parallel()
	type waiting struct {
		Phase          corev1.PodPhase
		Scheduled      corev1.ConditionStatus
		ScheduleReason string
		WaitReason     string
		MessageHas     bool
	}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        waiting
		wantMessage string // substring of the waiting or scheduling message
	}{
		{"ErrImagePull", testcluster.ImagePullFailure("ErrImagePull"), nil,
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionTrue, WaitReason: "ErrImagePull", MessageHas: true},
			"registry.example/agent:v1"},
		{"ImagePullBackOff by default", testcluster.ImagePullFailure(""), nil,
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionTrue, WaitReason: "ImagePullBackOff", MessageHas: true},
			"Back-off pulling image"},
		{"image pull message from annotation", testcluster.ImagePullFailure("ErrImagePull"),
			map[string]string{testcluster.AnnotationMessage: "unauthorized: authentication required"},
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionTrue, WaitReason: "ErrImagePull", MessageHas: true},
			"unauthorized: authentication required"},
		{"pending in ContainerCreating", testcluster.PendingForever(), nil,
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionTrue, WaitReason: "ContainerCreating"}, ""},
		{"unschedulable", testcluster.Unschedulable(), nil,
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionFalse, ScheduleReason: "Unschedulable", MessageHas: true},
			"didn't match Pod's node affinity/selector"},
		{"unschedulable with a node selector of its own", testcluster.Unschedulable(),
			map[string]string{withNodeSelector: "kubernetes.io/os=linux"},
			waiting{Phase: corev1.PodPending, Scheduled: corev1.ConditionFalse, ScheduleReason: "Unschedulable", MessageHas: true},
			"didn't match Pod's node affinity/selector"},
	}
	c, cs := client(t)
	ns := c.Namespace(t, "waiting", restricted)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t, time.Minute)
			name := fmt.Sprintf("pod-%d", i)
			createPod(t, ctx, cs, ns, name, tc.labels, tc.annotations)
			var got waiting
			var message string
			waitFor(t, ctx, "pod reaches its waiting state", func() (bool, string, error) {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				got, message = waiting{Phase: p.Status.Phase}, ""
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodScheduled {
						got.Scheduled, got.ScheduleReason = cond.Status, cond.Reason
						if cond.Status == corev1.ConditionFalse {
							message = cond.Message
						}
					}
				}
				if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil {
					w := p.Status.ContainerStatuses[0].State.Waiting
					got.WaitReason, message = w.Reason, message+w.Message
				}
				got.MessageHas = tc.wantMessage != "" && strings.Contains(message, tc.wantMessage)
				return cmp.Equal(tc.want, got), fmt.Sprintf("%+v message %q", got, message), nil
			})
			// It stays that way (the stages end here).
			time.Sleep(time.Second)
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != corev1.PodPending {
				t.Errorf("phase after 1s = %s, want Pending", p.Status.Phase)
			}
		})
	}
}

func TestLogsFollow(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "logs", restricted)
	ctx := ctxT(t, time.Minute)

	nsSrc, err := c.ServeLogs(ctx, ns, nil, []string{"namespace line 1", "namespace line 2"})
	if err != nil {
		t.Fatal(err)
	}
	podSrc, err := c.ServeLogs(ctx, ns, []string{"special"}, []string{`{"type":"system"}`})
	if err != nil {
		t.Fatal(err)
	}
	createPod(t, ctx, cs, ns, "follower", testcluster.RunForever(), nil)
	createPod(t, ctx, cs, ns, "special", testcluster.RunForever(), nil)
	for _, name := range []string{"follower", "special"} {
		waitFor(t, ctx, name+" Running", func() (bool, string, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
		})
	}

	// ServeLogs returns once kwok applies the rule; the per-pod rule wins over the
	// namespace rule (read without follow).
	body, err := cs.CoreV1().Pods(ns).GetLogs("special", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of the special pod: %v", err)
	}
	if diff := cmp.Diff("{\"type\":\"system\"}\n", string(body)); diff != "" {
		t.Errorf("special pod log (-want +got):\n%s", diff)
	}
	if err := podSrc.Append("not followed"); err != nil {
		t.Fatal(err)
	}

	// Follow the namespace rule's pod; append while following.
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := cs.CoreV1().Pods(ns).GetLogs("follower", &corev1.PodLogOptions{Follow: true}).Stream(followCtx)
	if err != nil {
		t.Fatalf("follow logs: %v", err)
	}
	defer stream.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stream)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("log stream ended early")
			}
			return l
		case <-time.After(15 * time.Second):
			t.Fatal("no log line within 15s")
		}
		return ""
	}
	got := []string{next(), next()}
	if err := nsSrc.Append("appended while following", "and one more"); err != nil {
		t.Fatal(err)
	}
	got = append(got, next(), next())
	want := []string{"namespace line 1", "namespace line 2", "appended while following", "and one more"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("followed lines (-want +got):\n%s", diff)
	}
}

func TestPodSecurityRestrictedEnforced(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "psa", restricted)
	ctx := ctxT(t, time.Minute)
	yes := true
	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.example/x:v1",
			SecurityContext: &corev1.SecurityContext{Privileged: &yes},
		}}},
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Fatalf("privileged pod in a restricted namespace: got %v, want Forbidden by PodSecurity", err)
	}
	// The same pod is fine where no policy is enforced, and a compliant pod is fine here.
	open := c.Namespace(t, "psa-open", nil)
	if _, err := cs.CoreV1().Pods(open).Create(ctx, privileged, metav1.CreateOptions{}); err != nil {
		t.Errorf("privileged pod in an unrestricted namespace: %v", err)
	}
	createPod(t, ctx, cs, ns, "compliant", testcluster.RunForever(), nil)
}

func TestNamespaceDeletedToCompletion(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "gone", nil)
	ctx := ctxT(t, 2*time.Minute)
	createPod(t, ctx, cs, ns, "running", testcluster.RunForever(), nil)
	_, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec:       batchv1.JobSpec{Template: restrictedPod(testcluster.RunForever())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "pods Running", func() (bool, string, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d of %d pods running", running, len(pods.Items)), nil
	})
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "namespace gone", func() (bool, string, error) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s conditions %+v", n.Status.Phase, n.Status.Conditions), nil
	})
}

func TestMetricsAndAudit(t *testing.T) {
	t.Parallel()
	c, _ := client(t)
	ns := c.Namespace(t, "audit", nil)
	ctx := ctxT(t, time.Minute)
	cfg := c.RESTConfig()
	cfg.UserAgent = "testcluster-selftest-" + ns
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events, err := c.AuditEvents(func(e testcluster.AuditEvent) bool { return e.UserAgent == cfg.UserAgent })
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ Verb, Resource, Namespace, Name string }
	var got []seen
	for _, e := range events {
		got = append(got, seen{e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name})
	}
	if diff := cmp.Diff([]seen{{"create", "configmaps", ns, "x"}}, got); diff != "" {
		t.Errorf("audited requests of this client, reads excluded (-want +got):\n%s", diff)
	}

	text, err := c.MetricsText(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "apiserver_request_total{") {
		t.Fatalf("metrics lack apiserver_request_total")
	}
	counts, err := c.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var posts float64
	for _, rc := range counts {
		if rc.Mutating() && rc.Verb == "POST" && rc.Resource == "configmaps" && rc.Code == "201" {
			posts += rc.Count
		}
	}
	if posts < 1 {
		t.Errorf("apiserver_request_total has no created configmap: %+v", counts)
	}
}

// TestNoProcessLeftBehind starts a second cluster in a child test binary that panics
// without calling Close, and checks that the kernel took every component down with it.
func TestNoProcessLeftBehind(t *testing.T) {
	t.Parallel()
	testcluster.Get(t) // part of the self-test binary's cluster tests
	ctx := ctxT(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), panicHelperEnv+"="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // it panics: a non-zero exit is expected
	var pids map[string]int
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "PIDS "); ok {
			if err := json.Unmarshal([]byte(rest), &pids); err != nil {
				t.Fatalf("PIDS line %q: %v", rest, err)
			}
		}
	}
	if len(pids) != len(testcluster.Binaries) {
		t.Fatalf("child printed PIDs %v; stdout:\n%s\nstderr:\n%s", pids, out, tail(stderr.String(), 3000))
	}
	if !strings.Contains(stderr.String(), "panic helper: dying without Close") {
		t.Fatalf("child did not panic as planned; stderr:\n%s", tail(stderr.String(), 3000))
	}
	waitFor(t, ctx, "components of the dead test binary gone", func() (bool, string, error) {
		var alive []string
		for name, pid := range pids {
			if processAlive(pid) {
				alive = append(alive, fmt.Sprintf("%s(%d)", name, pid))
			}
		}
		return len(alive) == 0, fmt.Sprintf("still alive: %v", alive), nil
	})
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestStartFailureReportsComponentLog makes kube-apiserver refuse its command line: Start
// must fail with the tail of that component's log and leave no process behind.
func TestStartFailureReportsComponentLog(t *testing.T) {
	t.Parallel()
	testcluster.Get(t) // part of the self-test binary's cluster tests
	ctx := ctxT(t, time.Minute)
	opts := testcluster.DefaultOptions()
	opts.WorkDir = t.TempDir()
	opts.ExtraAPIServerArgs = []string{"--no-such-flag=1"}
	c, err := testcluster.Start(ctx, opts)
	if err == nil {
		_ = c.Close()
		t.Fatal("Start succeeded with a bad kube-apiserver flag")
	}
	for _, want := range []string{"kube-apiserver", "exited", "unknown flag: --no-such-flag", "last lines of kube-apiserver"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error lacks %q:\n%v", want, err)
		}
	}
	// etcd had started; it must be gone again (found by the work dir on its command line).
	waitFor(t, ctx, "etcd of the failed start stopped", func() (bool, string, error) {
		pids, err := processesMentioning(opts.WorkDir)
		return len(pids) == 0, fmt.Sprintf("processes using %s: %v", opts.WorkDir, pids), err
	})
}

// processesMentioning lists live processes whose command line contains s.
func processesMentioning(s string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(s)) || !processAlive(pid) {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}

// TestJobDeadlineAndTTL covers what pcsync's run timeouts and cleanup rely on: a Job
// past activeDeadlineSeconds fails with DeadlineExceeded and its running pod is
// removed; a finished Job with ttlSecondsAfterFinished=0 is deleted, and the garbage
// collector removes its pods.
func TestJobDeadlineAndTTL(t *testing.T) {
	t.Parallel()
	c, cs := client(t)
	ns := c.Namespace(t, "deadline", restricted)
	ctx := ctxT(t, 2*time.Minute)
	jobs := cs.BatchV1().Jobs(ns)
	_, err := jobs.Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(2)),
			Template: restrictedPod(testcluster.RunForever())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = jobs.Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "short-lived"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), TTLSecondsAfterFinished: ptr.To(int32(0)),
			Template: restrictedPod(testcluster.SucceedAfter(0))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "Job past its deadline fails", func() (bool, string, error) {
		j, err := jobs.Get(ctx, "slow", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				if cond.Reason != "DeadlineExceeded" {
					return false, "", fmt.Errorf("Job failed with reason %q, want DeadlineExceeded", cond.Reason)
				}
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", j.Status), nil
	})
	waitFor(t, ctx, "pods of both Jobs gone", func() (bool, string, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, p.Name+"/"+string(p.Status.Phase))
		}
		return len(left) == 0, fmt.Sprintf("pods left: %v", left), nil
	})
	waitFor(t, ctx, "finished Job deleted by its TTL", func() (bool, string, error) {
		_, err := jobs.Get(ctx, "short-lived", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("get: %v", err), nil
	})
}
