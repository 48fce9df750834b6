//go:build integration

package fleet

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	companystatus "github.com/pcsync/pcsync/pkg/companystatus"
	"github.com/pcsync/pcsync/pkg/config/configtest"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

var (
	fleetSizes   = flag.String("fleet-sizes", "10,100,1000", "the fleet sizes BenchmarkFleet measures, comma-separated")
	fleetSettle  = flag.Duration("fleet-settle", 30*time.Second, "how long the daemon rests after its first apply before the window")
	fleetWindow  = flag.Duration("fleet-window", time.Minute, "the window over which the daemon's rest is measured")
	fleetCommits = flag.Int("fleet-commits", 5, "how many one-company commits are timed to applied")
	fleetIdle    = flag.Int("fleet-proxy-idle", 10, "the fleet's spec.egress.proxyIdleSec: its proxies sleep before the window")
	fleetLogs    = flag.String("fleet-logs", "", "a directory where each size's daemon log is written (daemon-<size>.log)")
	fleetCache   = flag.Bool("fleet-render-cache", false, "the daemon keeps every company's rendered objects (--render-cache)")
	fleetHeap    = flag.String("fleet-heap", "", "a directory where each size's daemon heap profile at rest is written (heap-<size>.pprof; the daemon runs with --profiling)")
)

// fleetAgents is how many agents each company of the fleet has.
const fleetAgents = 3

// fleetFigures are one size's figures.
type fleetFigures struct {
	companies  int
	cold       time.Duration // daemon start → the whole fleet applied
	coldWrites float64       // its mutating requests
	rss        int64         // at rest, after the window
	cpu        time.Duration // CPU time in the window
	requests   float64       // API requests in the window
	commit     []time.Duration
	window     time.Duration
	asleep     time.Duration // the first apply → every proxy scaled to 0
	pods       int           // pods of the fleet's tenants at rest
	podsGone   time.Duration // the first apply → the last proxy pod gone
}

// BenchmarkFleet runs, for each size of -fleet-sizes, one `pcsync daemon`
// (Kubernetes executor, prune, egress mode proxy) on a fleet of that many
// companies of 3 agents each, on the test control plane with kwok nodes,
// and measures: the cold apply of the whole fleet (daemon start → first
// successful reconcile, and its writes); how long until every company's
// egress proxy is scaled to zero (-fleet-proxy-idle: nothing runs) and the
// fleet's pods then (none); after -fleet-settle, over
// -fleet-window, its resident memory, CPU time and API requests (from
// pcsync_kube_api_requests_total: nothing changes, so every request is
// the cost of keeping the fleet); and -fleet-commits times, one company's
// changed host list (a commit) → its egress proxy Deployment updated. A
// table at the end gives each figure per size and per company, against the
// smallest size. Each size's tenants have a prefix of their own and are
// deleted after it.
func BenchmarkFleet(b *testing.B) {
	c := testcluster.Get(b)
	bin := buildPcsync(b)
	var all []fleetFigures
	defer func() { printFleet(os.Stdout, all) }()
	for _, s := range strings.Split(*fleetSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-fleet-sizes: %q is not a size", s)
		}
		b.Run(fmt.Sprintf("companies=%d", n), func(b *testing.B) {
			for range b.N {
				f := measureFleet(b, c, bin, n)
				all = append(all, f)
				b.ReportMetric(f.cold.Seconds(), "cold-s")
				b.ReportMetric(float64(f.rss)/(1<<20), "rss-MiB")
				b.ReportMetric(f.requests/f.window.Minutes(), "requests/min")
				b.ReportMetric(float64(p50(f.commit).Milliseconds()), "commit-ms")
			}
		})
	}
}

// measureFleet measures one fleet of n companies.
func measureFleet(b *testing.B, c *testcluster.Cluster, bin string, n int) fleetFigures {
	prefix := fmt.Sprintf("f%d-", n)
	dir := b.TempDir()
	if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: n, AgentsPerCompany: fleetAgents,
		Mode: "proxy", NamespacePrefix: prefix, ProxyIdleSec: fleetIdle}); err != nil {
		b.Fatal(err)
	}
	sys := c.Namespace(b, "fleet-sys", nil)
	b.Cleanup(func() { deleteTenants(b, c, prefix) })
	// The daemon records each company's status, as deploy/base's does.
	if err := c.ApplyCRD(context.Background(), companystatus.CRD, companystatus.CRDName); err != nil {
		b.Fatal(err)
	}
	f := fleetFigures{companies: n, window: *fleetWindow}
	start := time.Now()
	args := []string{"--config", dir, "--executor", "kubernetes",
		"--spool", b.TempDir(), "--state-dir", b.TempDir(), "--metrics-bind-address", "127.0.0.1:0",
		"--prune", "--applyset", "pcsync", "--applyset-namespace", sys, "--interval", "1h",
		"--debounce", "200ms", "--skip-network-check"}
	d := startDaemon(b, bin, c.KubeconfigPath(), append(args, extraFlags()...)...)
	waitFor(b, 30*time.Minute, "the fleet's first apply", d, func() bool {
		return d.metric(b, "pcsync_reconcile_last_success_timestamp_seconds") > 0
	})
	f.cold = time.Since(start)
	_, f.coldWrites = d.requests(b)

	f.asleep = waitAsleep(b, c, d, prefix, n)
	// The ReplicaSets' controller deletes the proxies' pods at its own
	// pace (kube-controller-manager's client QPS: about 50 s for 1,000).
	waitFor(b, 5*time.Minute, "the proxies' pods gone", d, func() bool { return tenantPods(b, c, prefix) == 0 })
	f.podsGone = time.Since(start)
	time.Sleep(*fleetSettle) // the rest the figures below are about
	f.pods = tenantPods(b, c, prefix)
	req0, _ := d.requests(b)
	_, cpu0 := d.usage(b)
	time.Sleep(f.window)
	req1, _ := d.requests(b)
	rss, cpu1 := d.usage(b)
	f.rss, f.cpu, f.requests = rss, cpu1-cpu0, req1-req0
	if *fleetHeap != "" {
		d.heapProfile(b, filepath.Join(*fleetHeap, fmt.Sprintf("heap-%d.pprof", n)))
	}

	for k := range *fleetCommits {
		f.commit = append(f.commit, commitApplied(b, c, d, dir, prefix, k))
	}
	time.Sleep(time.Second) // the last reconcile's log
	d.stop()
	if *fleetLogs != "" {
		path := filepath.Join(*fleetLogs, fmt.Sprintf("daemon-%d.log", n))
		if err := os.WriteFile(path, []byte(d.log()), 0o644); err != nil {
			b.Errorf("-fleet-logs: %v", err)
		}
	}
	return f
}

// commitApplied changes company-0000's host list in dir (as a Git commit
// would reach the daemon: the file replaced at once) and returns how long
// until its egress proxy Deployment carries the new host.
func commitApplied(b *testing.B, c *testcluster.Cluster, d *daemon, dir, prefix string, k int) time.Duration {
	b.Helper()
	path := filepath.Join(dir, "companies", "company-0000.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	host := fmt.Sprintf("commit-%d.example.com", k)
	old := "git-0.example.com"
	if k > 0 {
		old = fmt.Sprintf("commit-%d.example.com", k-1)
	}
	changed := strings.Replace(string(data), old, host, 1)
	if changed == string(data) {
		b.Fatalf("%s holds no %s", path, old)
	}
	tmp := filepath.Join(dir, "companies", ".commit.tmp")
	if err := os.WriteFile(tmp, []byte(changed), 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	ns := prefix + "company-0000"
	waitFor(b, 5*time.Minute, "Deployment/"+ns+"/"+allow.ProxyName+" with "+host, d, func() bool {
		dep, err := c.Client().AppsV1().Deployments(ns).Get(context.Background(), allow.ProxyName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		spec, _ := json.Marshal(dep.Spec.Template.Spec.Containers)
		return strings.Contains(string(spec), host)
	})
	return time.Since(start)
}

// waitAsleep waits until every proxy Deployment of the fleet asks for 0
// replicas (its idle period passed with nothing to serve) and returns how
// long it took from now.
func waitAsleep(b *testing.B, c *testcluster.Cluster, d *daemon, prefix string, n int) time.Duration {
	b.Helper()
	start := time.Now()
	waitFor(b, 15*time.Minute, fmt.Sprintf("the %d proxies of the fleet scaled to 0", n), d, func() bool {
		l, err := c.Client().AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{
			FieldSelector: "metadata.name=" + allow.ProxyName})
		if err != nil {
			return false
		}
		asleep := 0
		for _, dep := range l.Items {
			if strings.HasPrefix(dep.Namespace, prefix) && dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 {
				asleep++
			}
		}
		return asleep == n
	})
	return time.Since(start)
}

// tenantPods counts the pods of the fleet's tenants that have not finished.
func tenantPods(b *testing.B, c *testcluster.Cluster, prefix string) int {
	b.Helper()
	l, err := c.Client().CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, p := range l.Items {
		if strings.HasPrefix(p.Namespace, prefix) && p.Status.Phase != "Succeeded" && p.Status.Phase != "Failed" {
			n++
		}
	}
	return n
}

// deleteTenants deletes the namespaces whose name starts with prefix and
// waits (up to 10 minutes) until they are gone.
func deleteTenants(b testing.TB, c *testcluster.Cluster, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs := c.Client()
	for {
		l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Errorf("list namespaces: %v", err)
			return
		}
		left := 0
		for _, ns := range l.Items {
			if !strings.HasPrefix(ns.Name, prefix) {
				continue
			}
			left++
			if ns.DeletionTimestamp == nil {
				_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			b.Errorf("%d namespaces %s* still there after 10 minutes", left, prefix)
			return
		case <-time.After(time.Second):
		}
	}
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// printFleet prints the figures of every size, each per company beside the
// smallest size's.
func printFleet(w io.Writer, all []fleetFigures) {
	if len(all) == 0 {
		return
	}
	base := all[0]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "companies\tcold apply\twrites\tproxies asleep after\tpods gone after\tpods at rest\tRSS\tRSS growth/company\tCPU at rest\trequests/min at rest\tcommit → applied p50\t")
	for _, f := range all {
		growth := "-"
		if f.companies != base.companies {
			growth = fmt.Sprintf("%.0f KiB", float64(f.rss-base.rss)/1024/float64(f.companies-base.companies))
		}
		fmt.Fprintf(tw, "%d\t%.1f s (%.1f ms/company)\t%.0f\t%.1f s\t%.1f s\t%d\t%.1f MiB\t%s\t%.2f %%\t%.1f\t%d ms (%.2fx)\t\n",
			f.companies, f.cold.Seconds(), float64(f.cold.Milliseconds())/float64(f.companies), f.coldWrites,
			f.asleep.Seconds(), f.podsGone.Seconds(), f.pods,
			float64(f.rss)/(1<<20), growth, 100*f.cpu.Seconds()/f.window.Seconds(),
			f.requests/f.window.Minutes(), p50(f.commit).Milliseconds(),
			float64(p50(f.commit))/float64(max(p50(base.commit), 1)))
	}
	tw.Flush()
}
