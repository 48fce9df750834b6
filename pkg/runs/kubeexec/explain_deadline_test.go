package kubeexec

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/result"
)

// The Job controller kills the pod at the deadline; under load it can count
// that failure first and report BackoffLimitExceeded. A failure at or after
// the deadline is still a timeout; one before it is not.
func TestDeadlinePassedWhateverTheReason(t *testing.T) {
	start := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	job := func(failedAfter time.Duration) *batchv1.Job {
		c := cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		c.LastTransitionTime = metav1.NewTime(start.Add(failedAfter))
		j := testJob(c)
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(2))
		j.Status.StartTime = &metav1.Time{Time: start}
		return j
	}
	tests := []struct {
		name        string
		failedAfter time.Duration
		want        result.ErrorCode
	}{
		{"failed after the deadline", 3 * time.Second, result.ErrTimeout},
		{"failed at the deadline", 2 * time.Second, result.ErrTimeout},
		{"failed before the deadline", time.Second, result.ErrAgentFailed},
	}
	for _, tt := range tests {
		v := explain(observation{Job: job(tt.failedAfter), Timeout: 2 * time.Second, TimeoutSource: "the request's timeoutSec"})
		if v.Code != tt.want || v.TimedOut != (tt.want == result.ErrTimeout) {
			t.Errorf("%s: code %s timedOut=%v, want %s", tt.name, v.Code, v.TimedOut, tt.want)
		}
	}
}
