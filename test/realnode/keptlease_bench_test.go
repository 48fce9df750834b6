//go:build integration

package realnode

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

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
// answered, interleaved; and a suspend → its pod gone (the suspend's own
// time: journal, pod delete, gone).
func BenchmarkKeptLease(b *testing.B) {
	p := pushImages(b)
	rec := &suspendTimes{Metrics: metrics.New()}
	e := newLeaseEnvSpec(b, p, nil, func(o *sandbox.Options) {
		o.SuspendCheck, o.Metrics, o.Logger = 200*time.Millisecond, rec, discardLogger()
	}, keptSpec(30, testcluster.LocalPathStorageClass, samples))
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
}
