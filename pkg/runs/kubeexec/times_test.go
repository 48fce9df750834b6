package kubeexec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/result"
)

// TestRunTimes: a run's times are pcsync init's record where the image has
// it, else what the daemon's watch saw (to the millisecond: a sub-second run
// of an image without pcsync lasts more than 0 ms, even one the watch never
// saw running), else the kubelet's whole seconds, else the Job's creation to
// now.
func TestRunTimes(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 7, 0, time.UTC) // a whole second, as the kubelet reports
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	sec := metav1.NewTime(t0)
	waiting := &corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	running := &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: sec}}}
	terminated := &corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: sec, FinishedAt: sec}}}
	// The kubelet's times: start and end in the same second.
	kubelet := verdict{StartedAt: t0, FinishedAt: t0}
	type look struct {
		cs *corev1.ContainerStatus
		at time.Time
	}
	type want struct {
		Started, Finished time.Time
		DurationMs        int64
		By                *result.TimedBy
	}
	by := func(b result.TimedBy) *result.TimedBy { return &b }
	for _, tt := range []struct {
		name    string
		looks   []look
		verdict verdict
		endNow  bool
		want    want
	}{{
		name:    "pcsync init's record",
		looks:   []look{{nil, ms(-900)}, {running, ms(100)}, {terminated, ms(1300)}},
		verdict: verdict{StartedAt: ms(12), FinishedAt: ms(437), Timed: true},
		want:    want{ms(12), ms(437), 425, by(result.TimedByInit)},
	}, {
		name:    "an image without pcsync: the watch saw the container start and end",
		looks:   []look{{nil, ms(-900)}, {waiting, ms(-400)}, {running, ms(150)}, {running, ms(200)}, {terminated, ms(520)}},
		verdict: kubelet,
		want:    want{ms(150), ms(520), 370, by(result.TimedByWatch)},
	}, {
		name:    "an image without pcsync: started and ended between two status updates, timed from the last look before it started",
		looks:   []look{{nil, ms(-900)}, {waiting, ms(-400)}, {terminated, ms(520)}},
		verdict: kubelet,
		want:    want{ms(-400), ms(520), 920, by(result.TimedByWatch)},
	}, {
		name:    "adopted while it ran: the first look is no start",
		looks:   []look{{running, ms(150)}, {terminated, ms(520)}},
		verdict: kubelet,
		want:    want{t0, t0, 0, by(result.TimedByKubelet)},
	}, {
		name:    "cancelled while it ran: from the watched start to now",
		looks:   []look{{waiting, ms(-400)}, {running, ms(150)}},
		verdict: verdict{},
		endNow:  true,
		want:    want{ms(150), ms(2000), 1850, by(result.TimedByWatch)},
	}, {
		name:    "the container never started: the Job's creation to now",
		looks:   []look{{nil, ms(-900)}, {waiting, ms(-400)}},
		verdict: verdict{},
		endNow:  true,
		want:    want{ms(-1000), ms(2000), 3000, nil},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var w watchedTimes
			for _, l := range tt.looks {
				w.observe(l.cs, l.at)
			}
			rt := runTimes{verdict: tt.verdict, watch: w, created: ms(-1000), endNow: tt.endNow, now: ms(2000)}
			s, f, b := rt.resolve()
			var r result.RunResult
			r.SetTimes(s, f)
			got := want{s, f, *r.DurationMs, b}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("times (-want +got):\n%s", diff)
			}
		})
	}
}
