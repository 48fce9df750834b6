//go:build integration

package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// TestWaitStartedEndsWhenTheServerAnswers: on the real API server, a pod
// whose status never says Running (bound to a node that does not exist)
// ends the wait as soon as its early stream answers; a pod whose image
// cannot be pulled ends it at once with the pull's reason while the stream
// does not answer; and without an answer the wait lasts until its context
// ends.
func TestWaitStartedEndsWhenTheServerAnswers(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "early", nil)
	m := &Manager{cs: c.Client()}
	ctx := context.Background()
	pod := func(name string) *corev1.Pod {
		p, err := c.Client().CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: "no-such-node",
				Containers: []corev1.Container{{Name: leasepod.ContainerName, Image: "example.invalid/agent:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	answered := &warmStream{done: make(chan struct{}), cancel: func() {}, c: &cmdclient.Client{}}
	silent := &warmStream{done: make(chan struct{}), cancel: func() {}}

	go func() { time.Sleep(200 * time.Millisecond); close(answered.done) }()
	bounded, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := m.waitStarted(bounded, pod("answers"), answered); err != nil {
		t.Errorf("the stream answered: %v, want the wait to end without an error", err)
	}

	pulling := pod("cannot-pull")
	pulling.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: leasepod.ContainerName,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}
	if _, err := c.Client().CoreV1().Pods(ns).UpdateStatus(ctx, pulling, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ue *UserError
	if err := m.waitStarted(ctx, pulling, silent); !errors.As(err, &ue) || ue.Code != CodeImagePullFailed {
		t.Errorf("an image that cannot be pulled: %v, want a %s error", err, CodeImagePullFailed)
	}

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := m.waitStarted(short, pod("never"), silent); err == nil {
		t.Error("neither Running nor an answer: the wait ended without an error")
	}
}
