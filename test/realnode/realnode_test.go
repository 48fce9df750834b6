//go:build integration

package realnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/podwait"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// restricted is the namespace label that makes Pod Security admission enforce the
// restricted profile, so that every pod here proves it passes.
var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}

// setup returns the cluster's clientset, its real node and a fresh restricted
// namespace.
func setup(t *testing.T) (kubernetes.Interface, *testcluster.RealNode, string) {
	t.Helper()
	c := testcluster.Get(t)
	node := c.RealNode()
	if node == nil {
		t.Fatal("the cluster has no real node")
	}
	return c.Client(), node, c.Namespace(t, t.Name(), restricted)
}

// testContext bounds one test or subtest: two minutes, so that a hang fails it
// with a message instead of eating the whole binary's -timeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// podSpec is a restricted pod spec pinned to the real node, with one container
// "main" running image with args (the image's entrypoint if command is empty).
func podSpec(node *testcluster.RealNode, image string, command []string, restart corev1.RestartPolicy) corev1.PodSpec {
	spec := corev1.PodSpec{
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: ptr.To(int64(2)),
		AutomountServiceAccountToken:  ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(int64(1000)),
			RunAsGroup:     ptr.To(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            "main",
			Image:           image,
			Command:         command,
			ImagePullPolicy: corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}
	node.Pin(&spec)
	return spec
}

// createPod creates a pod and waits until it is Running (or has ended, if
// wantEnded), failing the test on a terminal phase it did not want.
func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, spec corev1.PodSpec, wantEnded bool) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	got, err := waitPod(ctx, cs, ns, name, func(p *corev1.Pod) bool {
		switch p.Status.Phase {
		case corev1.PodRunning:
			return !wantEnded
		case corev1.PodSucceeded, corev1.PodFailed:
			return true
		}
		return false
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v", ns, name, err)
	}
	if !wantEnded && got.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod %s/%s: phase %s, want Running: %s", ns, name, got.Status.Phase, describe(got))
	}
	return got
}

// waitPod polls the pod until done says so or ctx ends.
func waitPod(ctx context.Context, cs kubernetes.Interface, ns, name string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var last *corev1.Pod
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if done(p) {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("not found: %w (%w)", ctx.Err(), err)
			}
			return nil, fmt.Errorf("%w waiting; last seen: %s", ctx.Err(), describe(last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitPodIP waits up to within for the API server to hold pod ns/name's IP
// (status.podIP), which the kubelet posts in its own time: after the pod's
// containers run, and after an exec into them answers.
func waitPodIP(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, name string, within time.Duration) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	pod, err := podwait.Until(ctx, cs, ns, name, func(p *corev1.Pod) (bool, error) {
		return p != nil && p.Status.PodIP != "", nil
	})
	if err != nil {
		last := "never seen"
		if pod != nil {
			last = describe(pod)
		}
		t.Fatalf("Pod/%s/%s: waited %s for status.podIP: %v; last seen: %s", ns, name, within, err, last)
	}
	return pod
}

// describe summarises a pod's phase and container states for a failure message.
func describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, node %q", p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			fmt.Fprintf(&b, "; %s: %s", c.Type, c.Message)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, "; %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, "; %s terminated: %s exit %d", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
	}
	return b.String()
}

// TestPodLogs runs pods from the pause image (and from an image the test pushes)
// on the real node and reads their output through the API server's pods/log. A
// follower of a container that keeps running stops after the lines it expects; a
// follower of one that exits sees the stream end by itself.
func TestPodLogs(t *testing.T) {
	cs, node, ns := setup(t)
	ctx := testContext(t)

	// An image pushed by the test: the pause image with default arguments.
	base, err := node.Registry().Image(ctx, node.PauseImage())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Cmd = []string{"-print", "from a pushed image", "-exit", "0"}
	pushed, err := mutate.Config(base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pushedRef := node.Registry().Ref("tests/pushed:1")
	if err := node.Registry().Push(ctx, pushedRef, pushed); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		image   string
		command []string
		exits   bool // the container exits: follow to the end of the stream
		want    string
	}{
		{name: "running", image: node.PauseImage(), command: []string{"/pause", "-print", "hello from the real node", "-print", "second line"},
			want: "hello from the real node\nsecond line\n"},
		{name: "exited", image: node.PauseImage(), command: []string{"/pause", "-print", "bye", "-exit", "0"}, exits: true,
			want: "bye\n"},
		{name: "pushed-image", image: pushedRef, exits: true, want: "from a pushed image\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			createPod(ctx, t, cs, ns, tt.name, podSpec(node, tt.image, tt.command, corev1.RestartPolicyNever), tt.exits)
			stream, err := cs.CoreV1().Pods(ns).GetLogs(tt.name, &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
			if err != nil {
				t.Fatalf("logs: %v", err)
			}
			defer stream.Close()
			var got string
			if tt.exits {
				b, err := io.ReadAll(stream)
				if err != nil {
					t.Fatalf("logs: %v", err)
				}
				got = string(b)
			} else {
				r := bufio.NewReader(stream)
				for range strings.Count(tt.want, "\n") {
					line, err := r.ReadString('\n')
					got += line
					if err != nil {
						t.Fatalf("logs after %q: %v", got, err)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExec runs commands in a running container through the API server's
// pods/exec over WebSocket: stdin reaches the command and its end is seen as EOF,
// and the exit code comes back.
func TestExec(t *testing.T) {
	c := testcluster.Get(t)
	cs, node, ns := setup(t)
	ctx := testContext(t)
	createPod(ctx, t, cs, ns, "target", podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever), false)

	tests := []struct {
		name       string
		command    []string
		stdin      string
		wantStdout string
		wantCode   int
	}{
		{name: "stdin-eof", command: []string{"/pause", "-cat", "-print", "done", "-exit", "0"}, stdin: "hello\nworld\n",
			wantStdout: "hello\nworld\ndone\n"},
		{name: "exit-code", command: []string{"/pause", "-exit", "3"}, wantCode: 3},
		{name: "stdin-then-exit", command: []string{"/pause", "-cat", "-exit", "7"}, stdin: "abc", wantStdout: "abc", wantCode: 7},
		{name: "big-stdin", command: []string{"/pause", "-cat", "-exit", "0"}, stdin: strings.Repeat("0123456789abcdef", 64<<10),
			wantStdout: strings.Repeat("0123456789abcdef", 64<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("target").SubResource("exec").
				VersionedParams(&corev1.PodExecOptions{
					Container: "main", Command: tt.command, Stdin: true, Stdout: true, Stderr: true,
				}, scheme.ParameterCodec)
			ex, err := remotecommand.NewWebSocketExecutor(c.RESTConfig(), "GET", req.URL().String())
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{
				Stdin: strings.NewReader(tt.stdin), Stdout: &stdout, Stderr: &stderr,
			})
			code := 0
			var exitErr utilexec.ExitError
			switch {
			case errors.As(err, &exitErr):
				code = exitErr.ExitStatus()
			case err != nil:
				t.Fatalf("exec %q: %v (stderr %q)", tt.command, err, stderr.String())
			}
			type result struct {
				Stdout string
				Code   int
			}
			want := result{tt.wantStdout, tt.wantCode}
			got := result{stdout.String(), code}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("exec %q (-want +got):\n%s", tt.command, diff)
			}
		})
	}
}

// TestJob runs Jobs on the real node: a pod exiting 0 completes the Job, one
// exiting 3 with backoffLimit 0 fails it.
func TestJob(t *testing.T) {
	cs, node, ns := setup(t)
	tests := []struct {
		name       string
		exit       string
		wantType   batchv1.JobConditionType
		wantReason string
	}{
		{name: "succeeds", exit: "0", wantType: batchv1.JobComplete, wantReason: ""},
		{name: "fails", exit: "3", wantType: batchv1.JobFailed, wantReason: "BackoffLimitExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: tt.name},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To(int32(0)),
					Template: corev1.PodTemplateSpec{
						Spec: podSpec(node, node.PauseImage(), []string{"/pause", "-print", "job " + tt.name, "-exit", tt.exit}, corev1.RestartPolicyNever),
					},
				},
			}
			if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				Type   batchv1.JobConditionType
				Reason string
			}
			var got outcome
			for got.Type == "" {
				j, err := cs.BatchV1().Jobs(ns).Get(ctx, tt.name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range j.Status.Conditions {
					if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
						got = outcome{c.Type, c.Reason}
					}
				}
				if got.Type != "" {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("job %s/%s: no Complete or Failed condition: %v (status %+v)", ns, tt.name, ctx.Err(), j.Status)
				case <-time.After(100 * time.Millisecond):
				}
			}
			if tt.wantType == batchv1.JobComplete {
				got.Reason = "" // CompletionsReached or empty, by version
			}
			if diff := cmp.Diff(outcome{tt.wantType, tt.wantReason}, got); diff != "" {
				t.Errorf("job outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodStartLatency creates pods one after another on the real node and logs the
// create → Running times and the kubelet's and containerd's memory. It asserts
// only that every pod runs; the figures are for docs/development/testcluster.md.
func TestPodStartLatency(t *testing.T) {
	cs, node, ns := setup(t)
	ctx := testContext(t)
	const n = 8
	var took []time.Duration
	for i := range n {
		name := fmt.Sprintf("latency-%d", i)
		begin := time.Now()
		createPod(ctx, t, cs, ns, name, podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever), false)
		took = append(took, time.Since(begin))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("pod create → Running on the real node, %d pods: p50 %s, min %s, max %s", n,
		took[n/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
	for name, b := range node.ResidentMemory() {
		t.Logf("%s resident memory: %.0f MB", name, float64(b)/1e6)
	}
}
