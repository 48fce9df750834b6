//go:build integration

package apply_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/fastpath"
	"github.com/pcsync/pcsync/pkg/render"
)

// benchCompanies is the size of the fleet every client applies
// (-apply-bench-companies; 1,000 for the fleet's figures): 100 companies,
// benchObjectsPerCompany objects each (Namespace, ServiceAccount, Role, two
// RoleBindings, ResourceQuota, LimitRange, two NetworkPolicies), rendered by
// pkg/render.
var benchCompanies = flag.Int("apply-bench-companies", 100, "how many companies BenchmarkApply applies")

// benchObjectsPerCompany is how many objects pkg/render gives each company of the
// fleet (8 until the RoleBinding pcsync of commit 7242cac).
const benchObjectsPerCompany = 9

// benchRounds is the number of rounds per benchmark iteration
// (-apply-bench-rounds): each round applies once with every client.
var benchRounds = flag.Int("apply-bench-rounds", 3, "rounds per BenchmarkApply iteration, each applying once with every client")

var benchClients = flag.String("apply-bench-clients", "kubectl,bare,pcsync",
	"the clients BenchmarkApply compares, comma-separated (kubectl, bare, pcsync, pcsync-reference)")

// benchScenarios are the scenarios BenchmarkApply runs
// (-apply-bench-scenarios noop: only the no-op, e.g. kubectl's at 1,000
// companies, whose cold applies take minutes each).
var benchScenarios = flag.String("apply-bench-scenarios", "cold,noop", "the scenarios BenchmarkApply runs, comma-separated (cold, noop)")

// BenchmarkApply compares pcsync with its peers on the same control plane in the same
// run: `kubectl apply --server-side -f` of the rendered stream, a bare server-side
// apply client (client-go's dynamic client, 16 workers, no client-side rate limit,
// Namespaces first, one PATCH per object) and pcsync (apply.Manager with the CLI's
// defaults; a new Manager per apply, like a new process). Each applies the same
// -apply-bench-companies rendered companies (100 by default: 900 objects) into
// namespaces of its own. "cold" creates
// everything (the client's namespaces are deleted, untimed, before each of its
// applies); "noop" applies an unchanged fleet again. Rendering is not timed.
//
// Every iteration runs -apply-bench-rounds rounds, and every round applies once with each
// client, in an order that rotates from round to round, so that the clients share the
// machine's load alike. Reported per scenario: each client's p50 and p99 (ms) and
// mutating requests per apply (from the API server's audit log, by user agent),
// pcsync's ratio to each peer (of the p50s), and the 1-minute load average before and
// after. A table at the end prints the same, with every round's figures.
// -apply-bench-clients bare,pcsync leaves kubectl out; pcsync-reference (not run by
// default) is pcsync on the reference path of its no-op check
// (ManagerOptions.Reference, see fastpath_compare.go).
func BenchmarkApply(b *testing.B) {
	c := testcluster.Get(b)
	tb := &benchTable{}
	defer tb.print(os.Stdout)
	all := []benchClient{
		{name: "kubectl", short: "k", ua: "kubectl/", apply: kubectlApply},
		{name: "bare", short: "b", ua: "pcsync-bench-bare", apply: bareApply},
		{name: "pcsync", short: "p", ua: "pcsync-bench-pcsync", apply: pcsyncApply(false)},
		{name: "pcsync-reference", short: "r", ua: "pcsync-bench-reference", apply: pcsyncApply(true)},
	}
	var clients []benchClient
	for _, cl := range all {
		if slices.Contains(strings.Split(*benchClients, ","), cl.name) {
			clients = append(clients, cl)
		}
	}
	if len(clients) == 0 {
		b.Fatalf("-apply-bench-clients %q names none of kubectl, bare, pcsync, pcsync-reference", *benchClients)
	}
	for _, scenario := range strings.Split(*benchScenarios, ",") {
		if scenario != "cold" && scenario != "noop" {
			b.Fatalf("-apply-bench-scenarios: %q is neither cold nor noop", scenario)
		}
		b.Run(scenario, func(b *testing.B) {
			b.StopTimer()
			fleets := map[string]*fleet{}
			for _, cl := range clients {
				f := renderFleet(b, fmt.Sprintf("b%s%s-", cl.short, scenario[:1]))
				fleets[cl.name] = f
				defer f.delete(b, c)
				if scenario == "noop" {
					cl.apply(b, c, f, cl.ua) // the fleet exists before the timed applies
				}
			}
			s := &benchScenario{name: scenario, load0: loadAverage()}
			for i := 0; i < b.N; i++ {
				for r := 0; r < *benchRounds; r++ {
					round := map[string]time.Duration{}
					n := len(s.rounds)
					for k := range clients {
						cl := clients[(n+k)%len(clients)]
						f := fleets[cl.name]
						if scenario == "cold" {
							f.delete(b, c)
						}
						since := time.Now()
						b.StartTimer()
						cl.apply(b, c, f, cl.ua)
						b.StopTimer()
						round[cl.name] = time.Since(since)
						s.add(cl.name, round[cl.name], countMutating(b, c, cl.ua, since))
					}
					s.rounds = append(s.rounds, round)
				}
			}
			s.load1 = loadAverage()
			s.objects = *benchCompanies * benchObjectsPerCompany
			s.report(b)
			tb.add(s)
		})
	}
}

type benchClient struct {
	name  string
	short string // a letter of the client's namespace prefix
	ua    string // user agent (prefix) that identifies its requests in the audit log
	apply func(b testing.TB, c *testcluster.Cluster, f *fleet, ua string)
}

// fleet is one rendered fleet of companies.
type fleet struct {
	prefix     string
	objects    []*unstructured.Unstructured
	file       string // the objects as one YAML stream
	namespaces []string
	parent     apply.ParentRef
}

// renderFleet renders benchCompanies companies with namespace prefix prefix through
// pkg/config and pkg/render.
func renderFleet(b testing.TB, prefix string) *fleet {
	b.Helper()
	dir := b.TempDir()
	settings := `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: bench}
spec:
  namespacePrefix: ` + prefix + `
  egress: {mode: standard}
`
	if err := os.WriteFile(filepath.Join(dir, "settings.yaml"), []byte(settings), 0o600); err != nil {
		b.Fatal(err)
	}
	var companies strings.Builder
	for i := 0; i < *benchCompanies; i++ {
		fmt.Fprintf(&companies, `---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: c%03d}
spec:
  id: bench-%03d
  egress: {mode: standard, allowCidrs: [10.%d.0.0/16], allowPrivateCidrs: true}
  agents:
    - {name: coder, adapter: claude_local}
`, i, i, i%250)
	}
	if err := os.WriteFile(filepath.Join(dir, "companies.yaml"), []byte(companies.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		b.Fatalf("load: %v", err)
	}
	out, err := render.Render(m, render.DefaultOptions())
	if err != nil {
		b.Fatalf("render: %v", err)
	}
	f := &fleet{prefix: prefix, objects: out.Objects,
		parent: apply.ParentRef{Name: "pcsync", Namespace: prefix + "sys"}}
	var stream strings.Builder
	for _, o := range out.Objects {
		if o.GetKind() == "Namespace" {
			f.namespaces = append(f.namespaces, o.GetName())
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			b.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(y)
	}
	f.file = filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(f.file, []byte(stream.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	if len(f.objects) != *benchCompanies*benchObjectsPerCompany {
		b.Fatalf("rendered %d objects, want %d", len(f.objects), *benchCompanies*benchObjectsPerCompany)
	}
	return f
}

// delete removes the fleet's namespaces (and the pcsync parent's) and waits until
// they are gone, so that the namespace controller's work does not overlap a timed run.
func (f *fleet) delete(b testing.TB, c *testcluster.Cluster) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nss := append([]string{f.parent.Namespace}, f.namespaces...)
	for _, ns := range nss {
		err := c.Client().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	for _, ns := range nss {
		for {
			_, err := c.Client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("namespace %s not deleted: %v", ns, ctx.Err())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// countMutating counts the audit log's requests of user agent ua since t.
func countMutating(b testing.TB, c *testcluster.Cluster, ua string, since time.Time) int {
	b.Helper()
	evs, err := c.AuditEvents(func(ev testcluster.AuditEvent) bool {
		return strings.HasPrefix(ev.UserAgent, ua) && !ev.RequestReceivedTimestamp.Before(since.Add(-time.Millisecond))
	})
	if err != nil {
		b.Fatal(err)
	}
	return len(evs)
}

// kubectlApply runs `kubectl apply --server-side -f` on the fleet's stream.
func kubectlApply(b testing.TB, c *testcluster.Cluster, f *fleet, _ string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", c.KubeconfigPath(), "apply", "--server-side",
		"-f", f.file)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// bareApply is the simplest fast client: server-side apply of every object, 16 at a
// time, no client-side rate limit, Namespaces first.
func bareApply(b testing.TB, c *testcluster.Cluster, f *fleet, ua string) {
	ctx := context.Background()
	cfg := c.RESTConfig()
	cfg.UserAgent = ua
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		b.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	var namespaces, rest []*unstructured.Unstructured
	for _, o := range f.objects {
		// Through JSON: the renderer's Go ints become int64 like a decoded manifest.
		raw, _ := json.Marshal(o.Object)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			b.Fatal(err)
		}
		if u.GetKind() == "Namespace" {
			namespaces = append(namespaces, u)
		} else {
			rest = append(rest, u)
		}
	}
	for _, batch := range [][]*unstructured.Unstructured{namespaces, rest} {
		work := make(chan *unstructured.Unstructured)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range work {
					gvk := u.GroupVersionKind()
					mp, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
					if err == nil {
						_, err = dyn.Resource(mp.Resource).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u,
							metav1.ApplyOptions{FieldManager: "bench-bare", Force: true})
					}
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
				}
			}()
		}
		for _, u := range batch {
			work <- u
		}
		close(work)
		wg.Wait()
		if firstErr != nil {
			b.Fatal(firstErr)
		}
	}
}

// pcsyncApply applies the fleet as `pcsync apply` does, with its default flags, and
// with reference as `pcsync apply --reference-paths` does.
func pcsyncApply(reference fastpath.Reference) func(b testing.TB, c *testcluster.Cluster, f *fleet, ua string) {
	return func(b testing.TB, c *testcluster.Cluster, f *fleet, ua string) {
		cfg := c.RESTConfig()
		cfg.UserAgent = ua
		kube.DefaultFlags().ConfigureRateLimits(cfg)
		opts := apply.DefaultManagerOptions()
		opts.ApplySet = f.parent
		opts.Reference = reference
		m, err := apply.NewManager(cfg, opts)
		if err != nil {
			b.Fatal(err)
		}
		r, err := m.Apply(context.Background(), f.objects, apply.DefaultApplyOptions())
		if err != nil || r.Err() != nil {
			b.Fatalf("pcsync apply: %v %v", err, r.Err())
		}
	}
}

// benchScenario collects one scenario's figures.
type benchScenario struct {
	name         string
	objects      int
	load0, load1 float64
	clients      []string // in the order first seen
	durations    map[string][]time.Duration
	mutating     map[string]int
	rounds       []map[string]time.Duration
}

func (s *benchScenario) add(client string, d time.Duration, mutating int) {
	if s.durations == nil {
		s.durations, s.mutating = map[string][]time.Duration{}, map[string]int{}
	}
	if _, ok := s.durations[client]; !ok {
		s.clients = append(s.clients, client)
	}
	s.durations[client] = append(s.durations[client], d)
	s.mutating[client] += mutating
}

// percentile returns the p-th percentile (0 < p <= 100, nearest rank) of a client's
// durations.
func (s *benchScenario) percentile(client string, p float64) time.Duration {
	ds := slices.Clone(s.durations[client])
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// ratio is pcsync's p50 over the peer's, 0 when either is missing.
func (s *benchScenario) ratio(peer string) float64 {
	p, q := s.percentile("pcsync", 50), s.percentile(peer, 50)
	if p == 0 || q == 0 {
		return 0
	}
	return p.Seconds() / q.Seconds()
}

func (s *benchScenario) mutatingPerApply(client string) float64 {
	return float64(s.mutating[client]) / float64(len(s.durations[client]))
}

func (s *benchScenario) report(b *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, cl := range s.clients {
		b.ReportMetric(ms(s.percentile(cl, 50)), cl+"-p50-ms")
		b.ReportMetric(ms(s.percentile(cl, 99)), cl+"-p99-ms")
		b.ReportMetric(s.mutatingPerApply(cl), cl+"-mutating/apply")
	}
	for _, peer := range []string{"bare", "kubectl"} {
		if r := s.ratio(peer); r > 0 {
			b.ReportMetric(r, "pcsync/"+peer+"-ratio")
		}
	}
	b.ReportMetric(float64(s.objects), "objects/apply")
	b.ReportMetric(s.load0, "load1-before")
	b.ReportMetric(s.load1, "load1-after")
}

// loadAverage is the machine's 1-minute load average (0 if unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// benchTable collects the scenarios for the summary table.
type benchTable struct {
	mu        sync.Mutex
	scenarios []*benchScenario
}

func (t *benchTable) add(s *benchScenario) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scenarios = append(t.scenarios, s)
}

func (t *benchTable) print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.scenarios {
		fmt.Fprintf(w, "\n%s: %d objects, load average %.2f before, %.2f after, %d rounds\n", s.name, s.objects,
			s.load0, s.load1, len(s.rounds))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "client\tp50\tp99\tmutating/apply\tpcsync/client\t\n")
		for _, cl := range s.clients {
			ratio := "-"
			if cl != "pcsync" && s.ratio(cl) > 0 {
				ratio = fmt.Sprintf("%.2fx", s.ratio(cl))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t\n", cl, fmtDur(s.percentile(cl, 50)), fmtDur(s.percentile(cl, 99)),
				s.mutatingPerApply(cl), ratio)
		}
		_ = tw.Flush()
		for i, r := range s.rounds {
			var parts []string
			for _, cl := range s.clients {
				parts = append(parts, cl+" "+fmtDur(r[cl]))
			}
			if r["pcsync"] > 0 && r["bare"] > 0 {
				parts = append(parts, fmt.Sprintf("pcsync/bare %.2fx", r["pcsync"].Seconds()/r["bare"].Seconds()))
			}
			fmt.Fprintf(w, "  round %d: %s\n", i+1, strings.Join(parts, ", "))
		}
	}
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
