//go:build integration

package podwait

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func running(p *corev1.Pod) (bool, error) {
	if p == nil {
		return false, errors.New("gone")
	}
	return p.Status.Phase == corev1.PodRunning, nil
}

// TestUntil: Until returns once the pod runs (kwok's node runs it), with
// the pod as last seen; a pod no node takes is returned as last seen when
// the wait ends, its error wrapping the context's; cond's error ends the
// wait as it is; Gone returns once the pod is deleted, and at once for a
// pod that never was.
func TestUntil(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "podwait", nil)
	cs := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mk := func(name string, selector map[string]string) {
		t.Helper()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeSelector: selector, TerminationGracePeriodSeconds: ptr.To(int64(0)),
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	mk("runs", nil)
	p, err := Until(ctx, cs, ns, "runs", running)
	if err != nil || p == nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("Until running: pod %v, %v; want the running pod", p, err)
	}

	mk("nowhere", map[string]string{"pool": "none"})
	short, stop := context.WithTimeout(ctx, 3*time.Second)
	p, err = Until(short, cs, ns, "nowhere", running)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) || p == nil || p.Name != "nowhere" {
		t.Errorf("Until on a pod no node takes: pod %v, %v; want the pod as last seen and DeadlineExceeded", p, err)
	}

	refused := errors.New("refused")
	if _, err := Until(ctx, cs, ns, "nowhere", func(*corev1.Pod) (bool, error) { return false, refused }); !errors.Is(err, refused) {
		t.Errorf("Until with a failing cond: %v, want its error", err)
	}

	begin := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "runs", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := Gone(ctx, cs, ns, "runs"); err != nil {
		t.Errorf("Gone after the delete: %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "runs", metav1.GetOptions{}); err == nil {
		t.Errorf("Gone returned after %s while the pod is still there", time.Since(begin))
	}
	short, stop = context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	var got []string
	if err := Gone(short, cs, ns, "nowhere"); err != nil {
		got = append(got, err.Error())
	}
	if err := Gone(ctx, cs, ns, "never-was"); err != nil {
		got = append(got, err.Error())
	}
	want := []string{"Pod/" + ns + "/nowhere still there: context deadline exceeded"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Gone on a pod still there and on one that never was (-want +got):\n%s", diff)
	}
}
