//go:build integration

package paperclip

import (
	"context"
	"os/exec"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestSandboxSuspendResumeOnRealNode: through the real Paperclip, a stock
// claude_local agent's lease kept between runs (reuseLease, warm) of a
// Company that suspends idle kept leases, on the real node with its
// local-path claim: after the first run the lease sits idle for its
// idleSec and its pod goes (the claim stays); the agent's second run gets
// the same provider lease back through resumeLease, on a new pod that
// mounts the claim, with a file the first pod left in HOME, and succeeds;
// Paperclip's record of that run's lease says it was resumed, and pcsync's
// metadata in it names the claim and when the lease was suspended.
// (The workspace is Paperclip's to mirror from the project at each run's
// start; test/realnode's TestKeptLeaseOnRealNode proves it kept byte for
// byte.)
func TestSandboxSuspendResumeOnRealNode(t *testing.T) {
	onRealNode(t)
	srv := sharedServer(t)
	metrics := freeAddr(t)
	sw := newRealNodeSandboxWorldWith(t, srv, sandboxOptions{
		EnvConfig:  map[string]any{"reuseLease": true, "runnerLifecycleMode": "warm"},
		Company:    map[string]any{"sandbox": map[string]any{"suspend": map[string]any{"idleSec": 30, "size": "1Gi"}}},
		DaemonArgs: []string{"--metrics-bind-address", metrics},
	})
	coder := sw.realNodeAgent(t, "Coder")
	issueID := sw.reuseProject(t, coder.ID)
	run1 := sw.waitAgentRun(t, coder.ID, "", 2*time.Minute)
	if got := srv.API.waitRun(t, run1.ID, 3*time.Minute); got.Status != "succeeded" {
		t.Fatalf("first run %s: status %s, error %q", run1.ID, got.Status, str(got.Error))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pods, err := sw.c.Client().CoreV1().Pods(sw.ns).List(ctx, leasePodsOnly)
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("lease pods after the first run: %v %v", pods, err)
	}
	first := pods.Items[0]
	id := first.Name
	if out, err := sw.kubectlExec(ctx, id, `echo kept > "$HOME/marker"`); err != nil {
		t.Fatalf("marker: %v %s", err, out)
	}

	// Idle for its idleSec: the pod goes, the claim stays.
	for {
		_, err := sw.c.Client().CoreV1().Pods(sw.ns).Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("lease %s's pod is still there after its idle time", id)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := sw.c.Client().CoreV1().PersistentVolumeClaims(sw.ns).Get(ctx, id, metav1.GetOptions{}); err != nil {
		t.Fatalf("the suspended lease's claim: %v", err)
	}

	wake := sw.wakeIssue(t, coder.ID, issueID, run1.ID, "e2e: resume")
	if got := srv.API.waitRun(t, wake.ID, 3*time.Minute); got.Status != "succeeded" {
		t.Fatalf("second run %s: status %s, error %q", wake.ID, got.Status, str(got.Error))
	}
	again, err := sw.c.Client().CoreV1().Pods(sw.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil || again.UID == first.UID || again.Labels[leasepod.LabelLease] != id {
		t.Fatalf("the resumed lease's pod: %v (the first was %s)", err, first.UID)
	}
	if out, err := sw.kubectlExec(ctx, id, `cat "$HOME/marker"`); err != nil || out != "kept\n" {
		t.Errorf("HOME after the resume: %q %v", out, err)
	}
	var leases []struct {
		ProviderLeaseID string         `json:"providerLeaseId"`
		HeartbeatRunID  string         `json:"heartbeatRunId"`
		Metadata        map[string]any `json:"metadata"`
	}
	srv.API.must(t, "GET", "/api/environments/"+sw.envID+"/leases", nil, &leases)
	resumed := 0
	for _, l := range leases {
		if l.ProviderLeaseID != id {
			t.Errorf("Paperclip's lease of run %s is provider lease %s, want %s", l.HeartbeatRunID, l.ProviderLeaseID, id)
		}
		md, _ := l.Metadata[sandbox.MetadataResumed].(map[string]any)
		switch l.HeartbeatRunID {
		case wake.ID:
			resumed++
			acq, _ := l.Metadata["sandboxLeaseAcquisition"].(map[string]any)
			if acq["outcome"] != "resumed" || md["claim"] != id || md["suspendedAt"] == nil {
				t.Errorf("Paperclip's record of the resumed run's lease: acquisition %v, %s %v", acq, sandbox.MetadataResumed, md)
			}
		case run1.ID:
			if md != nil {
				t.Errorf("Paperclip's record of the first run's lease says it resumed a suspension: %v", md)
			}
		}
	}
	if resumed != 1 {
		t.Errorf("Paperclip's leases: %d records of run %s, want 1", resumed, wake.ID)
	}
	if n := metricSum(t, metrics, `pcsync_sandbox_resumes_total{company="`+sw.pc.Slug+`",outcome="done"}`); n != 1 {
		t.Errorf("resumes done: %v, want 1", n)
	}
}

// kubectlExec runs script with sh in the lease pod's main container.
func (sw *sandboxWorld) kubectlExec(ctx context.Context, pod, script string) (string, error) {
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", sw.c.KubeconfigPath(), "exec", "-n", sw.ns, pod,
		"-c", leasepod.ContainerName, "--", "sh", "-c", script).CombinedOutput()
	return string(out), err
}
