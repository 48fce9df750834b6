package inject

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func tokenPod(name, ip, token string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t-acme", Annotations: map[string]string{AnnotationTokenHash: TokenHash(token)}},
		Status:     corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// TestPodTokens: a token is taken only from the live pod that carries its
// hash, at that pod's address; once the pod ends or is deleted its token is
// refused as run_ended. (A fake clientset: the informer's logic only; the
// proxy's real-node test proves it against the API server.)
func TestPodTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewClientset(
		tokenPod("job-a", "10.0.0.5", "tok-a", corev1.PodRunning),
		tokenPod("lease-b", "10.0.0.6", "tok-b", corev1.PodRunning),
		tokenPod("job-done", "10.0.0.7", "tok-done", corev1.PodSucceeded),
	)
	p := NewPodTokens(cs, "t-acme")
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	type got struct{ Run, Why string }
	check := func(name, token, from string, want got) {
		t.Helper()
		run, why := p.Verify(token, netip.MustParseAddr(from))
		if diff := cmp.Diff(want, got{run, why}); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", name, diff)
		}
	}
	check("its own pod", "tok-a", "10.0.0.5", got{"job-a", ""})
	check("from another pod", "tok-a", "10.0.0.6", got{"", OutcomeBadToken})
	check("forged", "tok-x", "10.0.0.5", got{"", OutcomeBadToken})
	check("a pod that ended", "tok-done", "10.0.0.7", got{"job-done", OutcomeRunEnded})

	if err := cs.CoreV1().Pods("t-acme").Delete(ctx, "lease-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, why := p.Verify("tok-b", netip.MustParseAddr("10.0.0.6")); why == OutcomeRunEnded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted pod's token is not refused as run_ended after 10 s")
		}
	}
	check("a deleted pod's token from elsewhere", "tok-b", "10.0.0.9", got{"", OutcomeRunEnded})
}
