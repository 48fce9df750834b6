package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testkustomize"
)

// monitoringDir is deploy/monitoring and repoRoot the repository, from this
// package's directory.
const (
	monitoringDir = "../../../deploy/monitoring"
	repoRoot      = "../../.."
)

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	return f
}

// wantAlerts are the alerts the issue asks for, each with a runbook in
// docs/daemon.md.
var wantAlerts = []string{
	"PcsyncBudgetNearlySpent", "PcsyncConfigInvalid", "PcsyncDaemonDown", "PcsyncEgressRefused", "PcsyncLeaseAcquiresRefused", "PcsyncLeaseResumesFailing", "PcsyncNetworkPoliciesNotEnforced", "PcsyncNoLeader",
	"PcsyncPaperclipUnreachable", "PcsyncPruneBlocked", "PcsyncReconcileFailing", "PcsyncRunsQueuedTooLong",
	"PcsyncStartWindowCollapsed", "PcsyncWarmPoolShort",
}

// TestPrometheusRuleWrapsRulesFile: prometheusrule.yaml's spec.groups are
// rules.yaml's groups.
func TestPrometheusRuleWrapsRulesFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec ruleFile `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is %s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if diff := cmp.Diff(readRules(t), pr.Spec); diff != "" {
		t.Errorf("prometheusrule.yaml's spec differs from rules.yaml (-rules.yaml +prometheusrule.yaml):\n%s", diff)
	}
}

// TestAlertsHaveSummaryAndRunbook: every alert the issue asks for is there,
// with a severity, a summary, a description and a runbook link whose
// section docs/daemon.md has.
func TestAlertsHaveSummaryAndRunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/daemon.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "#### "); ok {
			headings[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	var got []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			got = append(got, r.Alert)
			anchor := strings.ToLower(r.Alert)
			switch {
			case r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical":
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("%s: no summary or description", r.Alert)
			case !strings.HasSuffix(r.Annotations["runbook_url"], "docs/daemon.md#"+anchor):
				t.Errorf("%s: runbook_url %q does not point to docs/daemon.md#%s", r.Alert, r.Annotations["runbook_url"], anchor)
			case !headings[anchor]:
				t.Errorf("%s: docs/daemon.md has no runbook section \"#### %s\"", r.Alert, r.Alert)
			}
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff(wantAlerts, got); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
}

// build renders a kustomization with kustomize (krusty) into objects.
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testkustomize.BuildDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestServiceMonitorSelectsBaseService: the kustomization builds; its
// ServiceMonitor selects deploy/base's Service pcsync-metrics (labels,
// namespace) on a port the Service has; the dashboard's ConfigMap holds
// dashboard.json as it is.
func TestServiceMonitorSelectsBaseService(t *testing.T) {
	mon := build(t, monitoringDir)
	base := build(t, filepath.Join(monitoringDir, "../base"))
	svc := testkustomize.Find(base, "Service", "pcsync-metrics")
	sm := testkustomize.Find(mon, "ServiceMonitor", "pcsync")
	if svc == nil || sm == nil {
		t.Fatalf("Service pcsync-metrics in deploy/base: %v; ServiceMonitor pcsync here: %v", svc != nil, sm != nil)
	}
	if sm.GetNamespace() != svc.GetNamespace() {
		t.Errorf("ServiceMonitor in namespace %s, the Service in %s", sm.GetNamespace(), svc.GetNamespace())
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 {
		t.Error("ServiceMonitor selects no labels")
	}
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %s=%q", k, v, k, svc.GetLabels()[k])
		}
	}
	nss, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Contains(nss, svc.GetNamespace()) {
		t.Errorf("ServiceMonitor's namespaceSelector %v leaves out %s", nss, svc.GetNamespace())
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var names []string
	for _, p := range ports {
		names = append(names, fmt.Sprint(p.(map[string]any)["name"]))
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) == 0 {
		t.Fatal("ServiceMonitor has no endpoints")
	}
	for _, ep := range eps {
		if port := fmt.Sprint(ep.(map[string]any)["port"]); !slices.Contains(names, port) {
			t.Errorf("ServiceMonitor scrapes port %q; the Service has %v", port, names)
		}
	}
	if testkustomize.Find(mon, "PrometheusRule", "pcsync") == nil {
		t.Error("no PrometheusRule pcsync")
	}
	cm := testkustomize.Find(mon, "ConfigMap", "pcsync-dashboard")
	if cm == nil {
		t.Fatal("no ConfigMap pcsync-dashboard")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap pcsync-dashboard labels %v, want grafana_dashboard=1", cm.GetLabels())
	}
	want, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "pcsync.json")
	if got != string(want) {
		t.Error("ConfigMap pcsync-dashboard's pcsync.json is not dashboard.json")
	}
}

// metricName matches the names of pcsync's metrics in a query.
var metricName = regexp.MustCompile(`\bpcsync_[a-z0-9_]+\b`)

// namedMetrics returns the metric families that the rules and the
// dashboard name (pcsync's; histogram series names reduced to their
// family), sorted.
func namedMetrics(t *testing.T) []string {
	t.Helper()
	var exprs []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	d := readDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			seen[family(n)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// family reduces a histogram's series name to its family's.
func family(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if f, ok := strings.CutSuffix(name, suffix); ok && strings.HasSuffix(f, "_seconds") {
			return f
		}
	}
	return name
}

// grafanaPanelTypes are the panel types of Grafana's core plugins (the
// dashboard model's panel "type").
var grafanaPanelTypes = []string{
	"alertlist", "annolist", "barchart", "bargauge", "candlestick", "canvas", "dashlist", "datagrid",
	"flamegraph", "gauge", "geomap", "heatmap", "histogram", "logs", "news", "nodeGraph", "piechart",
	"row", "stat", "state-timeline", "status-history", "table", "text", "timeseries", "traces", "trend", "xychart",
}

// dashboard is the part of Grafana's dashboard model the tests check.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Editable      bool    `json:"editable"`
	Panels        []panel `json:"panels"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Query      any         `json:"query"`
			Definition string      `json:"definition"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []map[string]any `json:"list"`
	} `json:"annotations"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *datasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	FieldConfig *struct {
		Defaults  map[string]any `json:"defaults"`
		Overrides []any          `json:"overrides"`
	} `json:"fieldConfig"`
	Panels []any `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// TestDashboardModel checks dashboard.json against Grafana's dashboard
// model: a schemaVersion of Grafana 9.4–11 (36–41), a uid and title, panel
// types of Grafana's core panels with unique ids, grid positions inside the
// 24 columns that do not overlap, every query panel on the ${datasource}
// variable with PromQL targets of unique refIds, and every $variable a
// query uses defined or one of Grafana's own.
func TestDashboardModel(t *testing.T) {
	d := readDashboard(t)
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion %d, want 36–41 (Grafana 9.4–11)", d.SchemaVersion)
	}
	if d.UID == "" || len(d.UID) > 40 || d.Title == "" {
		t.Errorf("uid %q (1–40 characters), title %q: want both", d.UID, d.Title)
	}
	if d.Time.From == "" || d.Time.To == "" {
		t.Error("no time range")
	}
	vars := map[string]bool{"__rate_interval": true, "__range": true, "__interval": true}
	for _, v := range d.Templating.List {
		if !slices.Contains([]string{"datasource", "query", "custom", "constant", "interval", "textbox"}, v.Type) {
			t.Errorf("variable %s: type %q", v.Name, v.Type)
		}
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
		}
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Error("no datasource variable")
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	varRef := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	for _, p := range d.Panels {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			t.Errorf("%s: id not positive or not unique", name)
		}
		ids[p.ID] = true
		if !slices.Contains(grafanaPanelTypes, p.Type) {
			t.Errorf("%s: type %q is no Grafana core panel", name, p.Type)
		}
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", name, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("%s overlaps %s at (%d,%d)", name, other, x, y)
				}
				taken[cell{x, y}] = name
			}
		}
		if p.Type == "row" {
			if len(p.Targets) > 0 {
				t.Errorf("%s: a row with queries", name)
			}
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("%s: want a title and a description", name)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource %+v, want prometheus ${datasource}", name, p.Datasource)
		}
		if p.FieldConfig == nil {
			t.Errorf("%s: no fieldConfig", name)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: target %q: refId empty or repeated, or no expr", name, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, m := range varRef.FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[m[1]] {
					t.Errorf("%s: query uses $%s, which is not defined", name, m[1])
				}
			}
		}
	}
}

// TestNamedMetricsAreDocumented: every metric the rules and the dashboard
// name is in docs/metrics-reference.md's metric table (generated from the
// registrations, so a metric the rules name but no code registers fails).
func TestNamedMetricsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/metrics-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `pcsync_") {
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			rows = append(rows, first)
		}
	}
	for _, n := range namedMetrics(t) {
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, "`"+n+"`") }) {
			t.Errorf("%s is not in docs/metrics-reference.md's metric table", n)
		}
	}
}

// TestPodMonitorSelectsEgressProxies: the kustomization's PodMonitor
// selects the pods of the egress proxy render makes (their role label) in
// every namespace, on the port render names metrics.
func TestPodMonitorSelectsEgressProxies(t *testing.T) {
	pm := testkustomize.Find(build(t, monitoringDir), "PodMonitor", "pcsync-egress-proxy")
	if pm == nil {
		t.Fatal("no PodMonitor pcsync-egress-proxy")
	}
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if want := map[string]string{agentpod.LabelRole: agentpod.RoleEgressProxy}; !maps.Equal(sel, want) {
		t.Errorf("PodMonitor selects %v, want %v", sel, want)
	}
	if any, _, _ := unstructured.NestedBool(pm.Object, "spec", "namespaceSelector", "any"); !any {
		t.Error("PodMonitor does not look in every namespace")
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("podMetricsEndpoints %v, want one on port metrics", eps)
	}
}
