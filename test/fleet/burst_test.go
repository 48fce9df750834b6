//go:build integration

package fleet

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/config/configtest"
)

var burstRuns = flag.Int("burst-runs", 200, "how many runs BenchmarkBurst drops at once")

// BenchmarkBurst drops -burst-runs run requests at once into one daemon's
// spool and times each from its drop to its Job created (the watch's
// ADDED): spread over as many companies (one run each), against the same
// burst in one company (one agent of that concurrency). Each fleet has a
// daemon and a prefix of its own, deleted after it.
func BenchmarkBurst(b *testing.B) {
	c := testcluster.Get(b)
	bin := buildPcsync(b)
	n := *burstRuns
	for range b.N {
		spread := measureBurst(b, c, bin, "bs-", n, n, 1)
		one := measureBurst(b, c, bin, "b1-", 1, n, n)
		ps, p99s, po, p99o := pct(spread, 50), pct(spread, 99), pct(one, 50), pct(one, 99)
		b.ReportMetric(float64(ps.Milliseconds()), "spread-p50-ms")
		b.ReportMetric(float64(p99s.Milliseconds()), "spread-p99-ms")
		b.ReportMetric(float64(po.Milliseconds()), "one-p50-ms")
		b.ReportMetric(float64(p99o.Milliseconds()), "one-p99-ms")
		fmt.Printf("burst of %d runs, drop → Job created: over %d companies p50 %d ms, p99 %d ms; in one company p50 %d ms, p99 %d ms (%.2fx, %.2fx)\n",
			n, n, ps.Milliseconds(), p99s.Milliseconds(), po.Milliseconds(), p99o.Milliseconds(),
			float64(ps)/float64(max(po, 1)), float64(p99s)/float64(max(p99o, 1)))
	}
}

// measureBurst writes a fleet of companies (one agent each, of concurrency
// conc), starts a daemon on it, drops runs requests spread round-robin over
// the companies, and returns each run's drop → Job created.
func measureBurst(b *testing.B, c *testcluster.Cluster, bin, prefix string, companies, runs, conc int) []time.Duration {
	dir, spool := b.TempDir(), b.TempDir()
	if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: companies, AgentsPerCompany: 1,
		Mode: "proxy", NamespacePrefix: prefix, Concurrency: conc}); err != nil {
		b.Fatal(err)
	}
	sys := c.Namespace(b, "burst-sys", nil)
	b.Cleanup(func() { deleteTenants(b, c, prefix) })
	d := startDaemon(b, bin, c.KubeconfigPath(), "--config", dir, "--executor", "kubernetes",
		"--spool", spool, "--state-dir", b.TempDir(), "--metrics-bind-address", "127.0.0.1:0",
		"--applyset", "pcsync", "--applyset-namespace", sys, "--interval", "1h", "--skip-network-check")
	defer d.stop()
	waitFor(b, 20*time.Minute, "the fleet's first apply", d, func() bool {
		return d.metric(b, "pcsync_reconcile_last_success_timestamp_seconds") > 0
	})
	created := watchJobs(b, c, prefix)
	dropped := make(map[string]time.Time, runs)
	for i := range runs {
		name := fmt.Sprintf("burst-%04d", i)
		dropRun(b, spool, name, fmt.Sprintf("company-%04d", i%companies))
		dropped[name] = time.Now()
	}
	var out []time.Duration
	waitFor(b, 10*time.Minute, fmt.Sprintf("%d Jobs created", runs), d, func() bool { return created.len() >= runs })
	for name, at := range dropped {
		t, ok := created.at(name)
		if !ok {
			b.Fatalf("no Job seen for run %s", name)
		}
		out = append(out, t.Sub(at))
	}
	return out
}

// dropRun writes a run request into spool as writers must: a hidden file
// renamed in.
func dropRun(b *testing.B, spool, name, company string) {
	b.Helper()
	data, _ := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": company,
		"agent": "agent-0", "prompt": "burst"})
	tmp := filepath.Join(spool, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(spool, name+".json")); err != nil {
		b.Fatal(err)
	}
}

// jobsSeen is when a watch first saw each run's Job, by run id.
type jobsSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (j *jobsSeen) len() int { j.mu.Lock(); defer j.mu.Unlock(); return len(j.seen) }

func (j *jobsSeen) at(run string) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.seen[run]
	return t, ok
}

// watchJobs watches pcsync's Jobs in every namespace and records when
// each of a namespace of prefix was added.
func watchJobs(b *testing.B, c *testcluster.Cluster, prefix string) *jobsSeen {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	w, err := c.Client().BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{
		LabelSelector: agentpod.LabelManagedBy + "=" + agentpod.ManagedByValue})
	if err != nil {
		b.Fatal(err)
	}
	j := &jobsSeen{seen: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type != watch.Added || !strings.HasPrefix(job.Namespace, prefix) {
				continue
			}
			now := time.Now()
			j.mu.Lock()
			if _, ok := j.seen[job.Labels[agentpod.LabelRunID]]; !ok {
				j.seen[job.Labels[agentpod.LabelRunID]] = now
			}
			j.mu.Unlock()
		}
	}()
	return j
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
