//go:build integration

package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	"github.com/pcsync/pcsync/internal/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/kube"
	"github.com/pcsync/pcsync/pkg/render"
)

// benchCompanies is the size of the fleet every client applies: 100 companies, 8
// objects each (Namespace, ServiceAccount, Role, RoleBinding, ResourceQuota,
// LimitRange, two NetworkPolicies), rendered by pkg/render.
const benchCompanies = 100

// BenchmarkApply compares three clients on the same control plane, each applying the
// same 100 rendered companies into namespaces of its own: `kubectl apply
// --server-side -f` of the rendered stream, a bare server-side-apply client (16
// workers, no client rate limit, one PATCH per object), and pcsync (apply.Manager with
// the CLI's defaults; a new Manager per run, like a new process). "cold" creates
// everything (the namespaces are deleted again between runs, untimed); "noop"
// re-applies an unchanged fleet. Rendering is not timed. Reported per op: ns/op,
// objects/op and mutating-requests/op (from the API server's audit log, by user
// agent). A table of all six figures is printed at the end.
func BenchmarkApply(b *testing.B) {
	c := testcluster.Get(b)
	tb := &benchTable{}
	defer tb.print(os.Stdout)
	clients := []benchClient{
		{name: "kubectl", ua: "kubectl/", apply: kubectlApply},
		{name: "bare", ua: "pcsync-bench-bare", apply: bareApply},
		{name: "pcsync", ua: "pcsync-bench-pcsync", apply: pcsyncApply},
	}
	run := 0
	for _, cl := range clients {
		for _, phase := range []string{"cold", "noop"} {
			b.Run(cl.name+"/"+phase, func(b *testing.B) {
				run++
				fleet := renderFleet(b, fmt.Sprintf("b%s%d-", cl.name[:1], run))
				defer fleet.delete(b, c)
				if phase == "noop" {
					cl.apply(b, c, fleet, cl.ua) // the fleet exists before the timed runs
				}
				var total time.Duration
				var mutating int
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if phase == "cold" && i > 0 {
						b.StopTimer()
						fleet.delete(b, c)
						b.StartTimer()
					}
					since := time.Now()
					cl.apply(b, c, fleet, cl.ua)
					total += time.Since(since)
					b.StopTimer()
					mutating += countMutating(b, c, cl.ua, since)
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(len(fleet.objects)), "objects/op")
				b.ReportMetric(float64(mutating)/float64(b.N), "mutating-requests/op")
				tb.add(cl.name, phase, total/time.Duration(b.N), mutating/b.N, len(fleet.objects))
			})
		}
	}
}

type benchClient struct {
	name  string
	ua    string // user agent (prefix) that identifies its requests in the audit log
	apply func(b *testing.B, c *testcluster.Cluster, f *fleet, ua string)
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
func renderFleet(b *testing.B, prefix string) *fleet {
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
	for i := 0; i < benchCompanies; i++ {
		fmt.Fprintf(&companies, `---
apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: c%03d}
spec:
  id: bench-%03d
  egress: {mode: standard, allowCidrs: [10.%d.0.0/16]}
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
	if len(f.objects) != benchCompanies*8 {
		b.Fatalf("rendered %d objects, want %d", len(f.objects), benchCompanies*8)
	}
	return f
}

// delete removes the fleet's namespaces (and the pcsync parent's) and waits until
// they are gone, so that the namespace controller's work does not overlap a timed run.
func (f *fleet) delete(b *testing.B, c *testcluster.Cluster) {
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
func countMutating(b *testing.B, c *testcluster.Cluster, ua string, since time.Time) int {
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
func kubectlApply(b *testing.B, c *testcluster.Cluster, f *fleet, _ string) {
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
func bareApply(b *testing.B, c *testcluster.Cluster, f *fleet, ua string) {
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

// pcsyncApply applies the fleet as `pcsync apply` does, with its default flags.
func pcsyncApply(b *testing.B, c *testcluster.Cluster, f *fleet, ua string) {
	cfg := c.RESTConfig()
	cfg.UserAgent = ua
	kube.DefaultFlags().ConfigureRateLimits(cfg)
	opts := apply.DefaultManagerOptions()
	opts.ApplySet = f.parent
	m, err := apply.NewManager(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	r, err := m.Apply(context.Background(), f.objects, apply.DefaultApplyOptions())
	if err != nil || r.Err() != nil {
		b.Fatalf("pcsync apply: %v %v", err, r.Err())
	}
}

// benchTable collects the figures for the summary table.
type benchTable struct {
	mu   sync.Mutex
	rows map[string]map[string]benchRow
}

type benchRow struct {
	d        time.Duration
	mutating int
	objects  int
}

func (t *benchTable) add(client, phase string, d time.Duration, mutating, objects int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rows == nil {
		t.rows = map[string]map[string]benchRow{}
	}
	if t.rows[client] == nil {
		t.rows[client] = map[string]benchRow{}
	}
	t.rows[client][phase] = benchRow{d: d, mutating: mutating, objects: objects}
}

func (t *benchTable) print(w *os.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\nclient\tobjects\tcold\tmutating\tno-op\tmutating\t\n")
	for _, client := range []string{"kubectl", "bare", "pcsync"} {
		r, ok := t.rows[client]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t\n", client, max(r["cold"].objects, r["noop"].objects),
			fmtDur(r["cold"].d), r["cold"].mutating, fmtDur(r["noop"].d), r["noop"].mutating)
	}
	_ = tw.Flush()
	bare, pc, kc := t.rows["bare"], t.rows["pcsync"], t.rows["kubectl"]
	if bare != nil && pc != nil && bare["cold"].d > 0 {
		fmt.Fprintf(w, "pcsync cold / bare cold     = %.2fx (goal <= 1.5x)\n", pc["cold"].d.Seconds()/bare["cold"].d.Seconds())
	}
	if kc != nil && pc != nil && kc["noop"].d > 0 {
		fmt.Fprintf(w, "pcsync no-op / kubectl no-op = %.4fx (goal <= 0.02x), pcsync no-op mutating requests: %d\n",
			pc["noop"].d.Seconds()/kc["noop"].d.Seconds(), pc["noop"].mutating)
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
