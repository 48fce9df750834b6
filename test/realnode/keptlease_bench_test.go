//go:build integration

package realnode

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// suspendTimes records the Manager's suspends and resumes beside the
// daemon's own metrics.
type suspendTimes struct {
	sandbox.Metrics
	mu               sync.Mutex
	suspends, resume []time.Duration
}

func (s *suspendTimes) SandboxSuspend(company string, d time.Duration, outcome string) {
	s.mu.Lock()
	s.suspends = append(s.suspends, d)
	s.mu.Unlock()
	s.Metrics.SandboxSuspend(company, d, outcome)
}

func (s *suspendTimes) SandboxResume(company string, d time.Duration, outcome string) {
	s.mu.Lock()
	s.resume = append(s.resume, d)
	s.mu.Unlock()
	s.Metrics.SandboxResume(company, d, outcome)
}

// BenchmarkKeptLease, side by side on the real node: a suspended lease's
// resume by its next execute → that execute answered (the lease's
// workspace 100 MB in 10,000 files on its local-path claim) against a cold
// acquire of the same image with an empty workspace → its first execute
// answered, interleaved; a suspend → its pod gone (the suspend's own
// time: journal, pod delete, gone); and the daemon's memory during a 1 GiB
// workspace's suspend.
func BenchmarkKeptLease(b *testing.B) {
	p := pushImages(b)
	rec := &suspendTimes{Metrics: metrics.New()}
	e := newLeaseEnvSpec(b, p, nil, func(o *sandbox.Options) {
		o.SuspendCheck, o.Metrics, o.Logger = 200*time.Millisecond, rec, discardLogger()
	}, keptSpec(30, testcluster.LocalPathStorageClass, samples+1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ids := make([]string, samples)
	for i := range ids {
		info := e.acquire(ctx, b, sandbox.EnvironmentConfig{Core: keptCore, LeaseTTLSec: 3600}, "kept-"+strconv.Itoa(i))
		ids[i] = info.ID
		if r := e.execLong(b, info.ID, keptWorkspace); code(r) != 0 {
			b.Fatalf("workspace: %q %q", r.Stdout, r.Stderr)
		}
	}
	for _, id := range ids {
		waitPodGone(ctx, b, e, id)
	}
	release := func(id string) {
		if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: id, Cancel: true}); err != nil {
			b.Fatal(err)
		}
	}
	var resumed, cold []time.Duration
	for i, id := range ids {
		began := time.Now()
		if r := e.exec(b, id, sandbox.ExecParams{Command: "true"}); code(r) != 0 {
			b.Fatalf("the first execute after the resume: %+v", r)
		}
		resumed = append(resumed, time.Since(began))
		release(id)
		began = time.Now()
		info := e.acquire(ctx, b, sandbox.EnvironmentConfig{LeaseTTLSec: 3600}, "cold-"+strconv.Itoa(i))
		if r := e.exec(b, info.ID, sandbox.ExecParams{Command: "true"}); code(r) != 0 {
			b.Fatalf("the cold lease's first execute: %+v", r)
		}
		cold = append(cold, time.Since(began))
		release(info.ID)
	}
	report(b, "resume-first-execute-vs-cold", "resume → the first execute answered (100 MB / 10,000 files on the claim) vs a cold acquire → its first execute (empty workspace)", resumed, cold)
	rec.mu.Lock()
	suspends := rec.suspends
	rec.mu.Unlock()
	report(b, "suspend-pod-gone", "suspend → the pod gone", suspends, nil)
	suspendMemory(ctx, b, e)
}

// suspendMemory reports the daemon's resident memory (this process runs
// the Manager) while a lease with a 1 GiB workspace is suspended, against
// the same just before: sampled every 5 ms from the end of the workspace's
// fill until the pod is gone.
func suspendMemory(ctx context.Context, b *testing.B, e *leaseEnv) {
	info := e.acquire(ctx, b, sandbox.EnvironmentConfig{Core: keptCore, LeaseTTLSec: 3600}, "kept-1gib")
	if r := e.execLong(b, info.ID, "dd if=/dev/urandom of=/workspace/big bs=1M count=1024 2>/dev/null && sync"); code(r) != 0 {
		b.Fatalf("workspace of 1 GiB: %q %q", r.Stdout, r.Stderr)
	}
	rest, peak := selfRSS(b), int64(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := e.c.Client().CoreV1().Pods(e.ns).Get(ctx, info.ID, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-tick.C:
			peak = max(peak, selfRSS(b))
		}
	}
	if _, err := e.m.Release(ctx, sandbox.ReleaseParams{ID: info.ID, Cancel: true}); err != nil {
		b.Fatal(err)
	}
	b.Run("suspend-1gib-daemon-rss", func(b *testing.B) {
		b.ReportMetric(float64(rest)/(1<<20), "rest-MiB")
		b.ReportMetric(float64(peak-rest)/(1<<20), "during-suspend-delta-MiB")
		b.Logf("the daemon's resident memory while a 1 GiB workspace's lease is suspended: %.1f MiB at rest, peak %+.1f MiB (goal ≤ +64 MiB)",
			float64(rest)/(1<<20), float64(peak-rest)/(1<<20))
	})
}

// selfRSS is this process's resident memory in bytes (VmRSS).
func selfRSS(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	b.Fatal("/proc/self/status: no VmRSS")
	return 0
}
