//go:build integration

package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestConfigEditIsApplied: a new company and a changed quota in the config
// directory reach the cluster without a restart.
func TestConfigEditIsApplied(t *testing.T) {
	e := newEnv(t)
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "")})
	e.start(daemonConfig{interval: time.Hour})
	e.waitFor("acme applied at start", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "20" })

	edited := time.Now()
	e.files(e.dir, map[string]string{"globex.yaml": company("globex", "")})
	applied := e.waitFor("globex applied", func(ctx context.Context) bool { return e.quotaPods(ctx, "globex") == "20" })
	t.Logf("config edit (new company) → its objects in the cluster: %v", applied.Sub(edited).Round(time.Millisecond))

	edited = time.Now()
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "  quota: {pods: 7}\n")})
	applied = e.waitFor("acme's new quota applied", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "7" })
	t.Logf("config edit (changed quota) → applied: %v", applied.Sub(edited).Round(time.Millisecond))
}

// TestSandboxHearsConfigChanges: the sandbox is told of a config edit
// when the config loop loads it (its warm pools follow at once), with no
// reconcile interval to wait for: after the signal, its model holds the
// new company.
func TestSandboxHearsConfigChanges(t *testing.T) {
	e := newEnv(t)
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "")})
	seen := make(chan []string, 16)
	e.start(daemonConfig{interval: time.Hour, sandbox: func(ctx context.Context, model func() *config.Model, changed <-chan struct{}) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				var slugs []string
				for _, c := range model().Companies {
					slugs = append(slugs, c.Slug())
				}
				seen <- slugs
			}
		}
	}})
	e.waitFor("acme applied at start", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "20" })

	e.files(e.dir, map[string]string{"globex.yaml": company("globex", "")})
	deadline := time.After(waitDeadline)
	for {
		select {
		case slugs := <-seen:
			if slices.Contains(slugs, "globex") {
				return
			}
		case <-deadline:
			t.Fatal("the sandbox was not told of the config that adds globex")
		}
	}
}

// TestGitSyncSymlinkSwapIsApplied: --config is a symbolic link that
// git-sync swaps to a new checkout; the new checkout is applied.
func TestGitSyncSymlinkSwapIsApplied(t *testing.T) {
	e := newEnv(t)
	gitRoot := filepath.Join(e.root, "git")
	e.dir = filepath.Join(gitRoot, "config") // the published link
	publish := func(rev string, files map[string]string) {
		wt := filepath.Join(gitRoot, ".worktrees", rev)
		e.files(wt, files)
		tmp := filepath.Join(gitRoot, ".config.tmp-link")
		if err := os.Symlink(filepath.Join(".worktrees", rev), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, e.dir); err != nil {
			t.Fatal(err)
		}
	}
	publish("rev1", map[string]string{"acme.yaml": company("acme", "")})
	e.start(daemonConfig{interval: time.Hour})
	e.waitFor("rev1 applied", func(ctx context.Context) bool { return e.nsExists(ctx, "acme") })

	swapped := time.Now()
	publish("rev2", map[string]string{"acme.yaml": company("acme", "  quota: {pods: 3}\n"), "initech.yaml": company("initech", "")})
	applied := e.waitFor("rev2 applied", func(ctx context.Context) bool {
		return e.quotaPods(ctx, "acme") == "3" && e.quotaPods(ctx, "initech") == "20"
	})
	t.Logf("git-sync symlink swap → applied: %v", applied.Sub(swapped).Round(time.Millisecond))

	// git-sync removes the old worktree; nothing changes.
	if err := os.RemoveAll(filepath.Join(gitRoot, ".worktrees", "rev1")); err != nil {
		t.Fatal(err)
	}
	publish("rev3", map[string]string{"acme.yaml": company("acme", "  quota: {pods: 4}\n"), "initech.yaml": company("initech", "")})
	e.waitFor("rev3 applied", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "4" })
}

// TestInvalidEditPrunesNothing: with --prune, an edit that removes a company
// and breaks another is invalid as a whole: nothing is applied or pruned,
// the failure shows in the metrics and /readyz, and the fixed config is
// applied (and pruned) again.
func TestInvalidEditPrunesNothing(t *testing.T) {
	e := newEnv(t)
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", ""), "globex.yaml": company("globex", "")})
	d := e.start(daemonConfig{interval: time.Hour, prune: true})
	e.waitFor("both companies applied", func(ctx context.Context) bool {
		return e.quotaPods(ctx, "acme") == "20" && e.quotaPods(ctx, "globex") == "20"
	})

	// Remove globex, change acme's quota and break acme in the same edit.
	if err := os.Remove(filepath.Join(e.dir, "globex.yaml")); err != nil {
		t.Fatal(err)
	}
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "  quota: {pods: 9}\n  bogus: true\n")})
	e.waitFor("the invalid config reported", func(context.Context) bool {
		for _, out := range d.reconciles() {
			if out.FailedStage == reconcile.StageLoad {
				return true
			}
		}
		return false
	})
	ctx := context.Background()
	got := map[string]any{"globex exists": e.nsExists(ctx, "globex"), "acme pods": e.quotaPods(ctx, "acme")}
	if diff := cmp.Diff(map[string]any{"globex exists": true, "acme pods": "20"}, got); diff != "" {
		t.Errorf("after the invalid edit the cluster changed (-want +got):\n%s", diff)
	}
	var bad reconcile.Outcome
	for _, out := range d.reconciles() {
		if out.FailedStage != "" {
			bad = out
		}
	}
	if diff := cmp.Diff([]string{filepath.Join(e.dir, "acme.yaml") + ":9:3: spec.bogus: field not allowed"}, bad.ConfigErrors); diff != "" {
		t.Errorf("config errors (-want +got):\n%s", diff)
	}
	if bad.Report != nil {
		t.Error("an invalid config reached apply")
	}

	series := scrape(t, d)
	want := map[string]float64{
		`pcsync_config_valid`:                         0,
		`pcsync_reconcile_errors_total{stage="load"}`: 1,
		`pcsync_pruned_objects_total`:                 0,
	}
	if diff := cmp.Diff(want, pick(series, want)); diff != "" {
		t.Errorf("metrics after the invalid edit (-want +got):\n%s", diff)
	}
	code, body := d.get(t, "/readyz")
	var rep health.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("/readyz: %v\n%s", err, body)
	}
	cond := map[string]health.Status{}
	for _, c := range rep.Conditions {
		cond[c.Type] = c.Status
	}
	if diff := cmp.Diff([]any{200, health.StateDegraded, health.StatusFalse, health.StatusTrue},
		[]any{code, rep.Status, cond[reconcile.CondConfigValid], cond[reconcile.CondConfigLoaded]}); diff != "" {
		t.Errorf("/readyz after the invalid edit (-want +got):\n%s\n%s", diff, body)
	}

	// Fixed: acme's quota changes and globex is pruned.
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "  quota: {pods: 9}\n")})
	e.waitFor("fixed config applied and globex pruned", func(ctx context.Context) bool {
		return e.quotaPods(ctx, "acme") == "9" && e.nsGoneOrDeleting(ctx, "globex")
	})
	// The metrics are recorded once the apply returns.
	e.waitFor("the prune counted", func(context.Context) bool { return scrapeQuiet(d)[`pcsync_pruned_objects_total`] >= 1 })
	if got := scrape(t, d)[`pcsync_config_valid`]; got != 1 {
		t.Errorf("pcsync_config_valid = %v after the fix, want 1", got)
	}
}

// TestDriftIsCorrectedAtTheNextInterval: changes made in the cluster (a
// field taken over as kubectl edit does, a deleted object) are undone by the
// periodic reconcile, with no change in the config directory.
func TestDriftIsCorrectedAtTheNextInterval(t *testing.T) {
	e := newEnv(t)
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "")})
	d := e.start(daemonConfig{interval: 2 * time.Second})
	ns := e.namespace("acme")
	e.waitFor("acme applied", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "20" })

	ctx := context.Background()
	cs := e.c.Client()
	// As kubectl edit does: an update by another field manager (retried,
	// since the quota controller writes the status meanwhile).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "paperclip-quota", metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("999")
		_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.RbacV1().Roles(ns).Delete(ctx, "paperclip-tenant-role", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	drifted := time.Now()
	fixed := e.waitFor("drift corrected", func(ctx context.Context) bool {
		_, err := cs.RbacV1().Roles(ns).Get(ctx, "paperclip-tenant-role", metav1.GetOptions{})
		return err == nil && e.quotaPods(ctx, "acme") == "20"
	})
	t.Logf("drift → corrected: %v (interval 2s + jitter)", fixed.Sub(drifted).Round(time.Millisecond))

	// One or two periodic reconciles (the interval may pass between the two
	// changes) corrected two objects; their outcomes are reported once
	// their apply has returned.
	e.waitFor("the drift reported", func(context.Context) bool {
		n := 0
		for _, out := range d.reconciles() {
			n += out.Drift
		}
		return n >= 2
	})
	trig := map[reconcile.Trigger]int{}
	for _, out := range d.reconciles() {
		trig[out.Trigger] += out.Drift
	}
	if diff := cmp.Diff(map[reconcile.Trigger]int{reconcile.TriggerStart: 0, reconcile.TriggerInterval: 2}, trig); diff != "" {
		t.Errorf("objects corrected per trigger (-want +got):\n%s", diff)
	}
	if got := scrape(t, d)[`pcsync_drift_corrections_total`]; got != 2 {
		t.Errorf("pcsync_drift_corrections_total = %v, want 2", got)
	}
}

// TestOnlyTheLeaderActs: two daemons on the same config, spool and Lease.
// Only the leader applies and runs agents; when it stops, the other takes
// over, applies config changes and runs new requests.
func TestOnlyTheLeaderActs(t *testing.T) {
	e := newEnv(t)
	spool := filepath.Join(e.root, "spool")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "")})
	a := e.start(daemonConfig{name: "a", interval: time.Hour, leader: true, runs: true, spool: spool})
	e.waitFor("a leads and applies", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "20" })
	b := e.start(daemonConfig{name: "b", interval: time.Hour, leader: true, runs: true, spool: spool})
	e.waitFor("b serves as a standby", func(context.Context) bool { return scrapeQuiet(b)["pcsync_leader"] == 0 && b.addr != "" })

	// While a leads: a config change and a run request are a's alone.
	e.files(e.dir, map[string]string{"globex.yaml": company("globex", "")})
	dropRun(t, spool, "first", "acme")
	e.waitFor("a applies globex", func(ctx context.Context) bool { return e.quotaPods(ctx, "globex") == "20" })
	waitResult(t, e, spool, "first")

	// a stops gracefully; b takes over.
	stopping := time.Now()
	if err := a.stop(); err != nil {
		t.Errorf("a: %v", err)
	}
	stopped := time.Now()
	tookOver := e.waitFor("b leads", func(context.Context) bool { return scrapeQuiet(b)["pcsync_leader"] == 1 })
	t.Logf("graceful stop of the leader: a stopped in %v; b led %v after a had stopped (retry period 250ms)",
		stopped.Sub(stopping).Round(time.Millisecond), tookOver.Sub(stopped).Round(time.Millisecond))

	e.files(e.dir, map[string]string{"initech.yaml": company("initech", "")})
	e.waitFor("b applies initech", func(ctx context.Context) bool { return e.quotaPods(ctx, "initech") == "20" })
	dropRun(t, spool, "second", "initech") // a company only the new config has
	res := waitResult(t, e, spool, "second")

	if diff := cmp.Diff(map[string][]string{"a": {"first"}, "b": {"second"}},
		map[string][]string{"a": a.exec.runs(), "b": b.exec.runs()}); diff != "" {
		t.Errorf("runs started per daemon (-want +got):\n%s", diff)
	}
	if res.Status != result.StatusSucceeded {
		t.Errorf("second run: %s %v", res.Status, res.ErrorMessage)
	}
	// Mutating requests per daemon, from the API server's audit log: b sent
	// none before a had stopped.
	events, err := e.c.AuditEvents(func(ev testcluster.AuditEvent) bool {
		return strings.HasPrefix(ev.UserAgent, e.userAgent("")) && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch"
	})
	if err != nil {
		t.Fatal(err)
	}
	var early []string
	for _, ev := range events {
		if ev.UserAgent == e.userAgent("b") && ev.RequestReceivedTimestamp.Before(stopping) {
			early = append(early, ev.Verb+" "+ev.RequestURI)
		}
	}
	if len(early) > 0 {
		t.Errorf("the standby sent mutating requests while the other daemon led:\n%s", strings.Join(early, "\n"))
	}
	var aCount, bCount int
	for _, ev := range events {
		switch ev.UserAgent {
		case e.userAgent("a"):
			aCount++
		case e.userAgent("b"):
			bCount++
		}
	}
	if aCount == 0 || bCount == 0 {
		t.Errorf("mutating requests: a %d, b %d; want both > 0 (each applied while it led)", aCount, bCount)
	}
}

// TestMetricsAreServed scrapes /metrics after a reconcile and a run and
// checks the daemon's series.
func TestMetricsAreServed(t *testing.T) {
	e := newEnv(t)
	spool := filepath.Join(e.root, "spool")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	e.files(e.dir, map[string]string{"acme.yaml": company("acme", "")})
	d := e.start(daemonConfig{interval: time.Hour, runs: true, spool: spool})
	e.waitFor("acme applied", func(ctx context.Context) bool { return e.quotaPods(ctx, "acme") == "20" })
	dropRun(t, spool, "r1", "acme")
	waitResult(t, e, spool, "r1")
	e.waitFor("the run and the reconcile counted", func(context.Context) bool {
		s := scrapeQuiet(d)
		return s[`pcsync_runs_total{adapter="claude_local",company="acme",status="succeeded"}`] == 1 &&
			s[`pcsync_reconcile_duration_seconds_count{outcome="success"}`] == 1
	})

	series := scrape(t, d)
	want := map[string]float64{
		`pcsync_config_valid`: 1,
		`pcsync_leader`:       1,
		`pcsync_reconcile_duration_seconds_count{outcome="success"}`:                   1,
		`pcsync_objects_applied_total{action="created"}`:                               13, // the tenant's objects, RoleBinding pcsync and the egress proxy's four (the default mode, proxy) included
		`pcsync_runs_total{adapter="claude_local",company="acme",status="succeeded"}`:  1,
		`pcsync_run_duration_seconds_count{adapter="claude_local",status="succeeded"}`: 1,
		`pcsync_tokens_total{agent="coder",company="acme",kind="input"}`:               10,
		`pcsync_tokens_total{agent="coder",company="acme",kind="output"}`:              5,
		`pcsync_cost_usd_total{agent="coder",company="acme"}`:                          0.5,
		`pcsync_runs_queued`:             0,
		`pcsync_runs_in_flight`:          0,
		`pcsync_drift_corrections_total`: 0,
		`pcsync_pruned_objects_total`:    0,
	}
	if diff := cmp.Diff(want, pick(series, want)); diff != "" {
		t.Errorf("/metrics (-want +got):\n%s", diff)
	}
	if _, ok := series[`pcsync_reconcile_last_success_timestamp_seconds`]; !ok {
		t.Error("no pcsync_reconcile_last_success_timestamp_seconds")
	}
	if code, body := d.get(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := d.get(t, "/readyz"); code != 200 || !strings.Contains(body, `"status": "ready"`) {
		t.Errorf("/readyz: %d\n%s", code, body)
	}
}

// dropRun writes a run request into the spool the recommended way.
func dropRun(t *testing.T, spool, name, company string) {
	t.Helper()
	writeAtomic(t, filepath.Join(spool, name+".yaml"),
		"apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: "+company+"\nagent: coder\nprompt: hello\n")
}

func waitResult(t *testing.T, e *env, spool, name string) result.RunResult {
	t.Helper()
	p := filepath.Join(spool, name+".result.json")
	e.waitFor("result of "+name, func(context.Context) bool { _, err := os.Stat(p); return err == nil })
	r, err := result.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$`)

// scrape reads /metrics into series → value.
func scrape(t *testing.T, d *daemonRun) map[string]float64 {
	t.Helper()
	code, body := d.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return parseMetrics(body)
}

// scrapeQuiet is scrape for polling: an unreachable endpoint gives nothing.
func scrapeQuiet(d *daemonRun) map[string]float64 {
	resp, err := httpGet("http://" + d.addr + "/metrics")
	if err != nil {
		return map[string]float64{}
	}
	return parseMetrics(resp)
}

func parseMetrics(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var v float64
		if err := json.Unmarshal([]byte(m[2]), &v); err != nil {
			continue
		}
		out[m[1]] = v
	}
	return out
}

// pick returns the series of got that want names (absent ones as -1).
func pick(got, want map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k := range want {
		v, ok := got[k]
		if !ok {
			v = -1
		}
		out[k] = v
	}
	return out
}
