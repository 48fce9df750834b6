//go:build integration

package kubeexec

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
)

// BenchmarkStartWithCredentials is what the check that a run's credential
// Secrets exist costs a run's start: the executor's Start (the daemon's
// "starting" event) to the Job visible to a watch, p50 of single runs one
// after another, for a company in egress mode proxy without credentials
// and for one with a credential whose Secret exists (one dry-run create,
// then trusted for 30 s: most runs of the series find it cached).
func BenchmarkStartWithCredentials(b *testing.B) {
	const n = 20
	lines := transcript(b, claudeTranscript)
	for range b.N {
		without := startToJob(b, nil, n, lines)
		with := startToJob(b, credentialCompany, n, lines)
		b.ReportMetric(ms(percentile(without, 0.5)), "no-credentials-start-to-job-p50-ms")
		b.ReportMetric(ms(percentile(with, 0.5)), "credentials-start-to-job-p50-ms")
		b.ReportMetric(float64(percentile(with, 0.5))/float64(percentile(without, 0.5)), "p50-ratio")
	}
}

// startToJob runs a warm-up and then n single runs one after another, each
// finished before the next is dropped, for a company in egress mode proxy
// (company merged into its spec; a credential's Secret model-keys is
// created first), and returns each run's Start-to-Job time.
func startToJob(b *testing.B, company map[string]any, n int, lines []string) []time.Duration {
	b.Helper()
	o := benchOptions(1, testcluster.SucceedAfter(time.Second), lines)
	o.Company["egress"] = map[string]any{"mode": "proxy"}
	maps.Copy(o.Company, company)
	e := newEnv(b, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if company != nil {
		if _, err := e.cs.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "model-keys"},
			StringData: map[string]string{"anthropic": "sk-ant-bench"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	addrs := agentenv.NewAddresses(e.cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	e.waitUntil("the proxy Service's address", func() bool { _, err := addrs.ClusterIP(e.ns); return err == nil })
	d := e.startDaemonWith(false, nil, func(o *Options) { quiet(o); o.ProxyAddresses = addrs })
	defer d.stop(b)
	wt := e.watchRuns(b)
	defer wt.stop()
	e.dropAll(b, []string{"warm-up"})
	d.waitFinished(b, 1, 2*time.Minute)
	var out []time.Duration
	for i := range n {
		name := fmt.Sprintf("single-%02d", i)
		e.dropAll(b, []string{name})
		d.waitFinished(b, 1, 2*time.Minute)
		if r := e.result(name); r.Status != "succeeded" {
			b.Fatalf("%s: %s %v", name, r.Status, deref(r.ErrorMessage))
		}
		wt.mu.Lock()
		out = append(out, wt.jobAt[name].Sub(d.eventTime("starting", name)))
		wt.mu.Unlock()
	}
	return out
}
