//go:build integration

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/reconcile"
)

// TestDaemonPruneGuard: the daemon with --prune and the default guard. Removing
// 1 of 2 or 1 of 20 companies from the repository is pruned at the next
// reconcile. Removing 15 of 20, or every file (an empty render), is held:
// nothing is deleted, pcsync_prune_blocked counts the tenants, /readyz is
// degraded with PruneAllowed=False naming the approval command; annotating the
// ApplySet parent with the hold's token lets the daemon prune and clear the
// annotation.
func TestDaemonPruneGuard(t *testing.T) {
	tests := []struct {
		name        string
		fleet, keep int
		held        apply.HoldReason
	}{
		{"1 of 2", 2, 1, ""},
		{"1 of 20", 20, 19, ""},
		{"15 of 20", 20, 5, apply.HoldOverLimit},
		{"empty render", 2, 0, apply.HoldEmptyRender},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			slug := func(i int) string { return fmt.Sprintf("c%02d", i) }
			files := map[string]string{}
			for i := range tt.fleet {
				files[slug(i)+".yaml"] = company(slug(i), "")
			}
			e.files(e.dir, files)
			d := e.start(daemonConfig{interval: time.Hour, prune: true})
			e.waitFor("every company applied", func(ctx context.Context) bool {
				for i := range tt.fleet {
					if e.quotaPods(ctx, slug(i)) != "20" {
						return false
					}
				}
				return true
			})
			for i := tt.keep; i < tt.fleet; i++ {
				if err := os.Remove(filepath.Join(e.dir, slug(i)+".yaml")); err != nil {
					t.Fatal(err)
				}
			}
			goneDeleting := func(ctx context.Context) bool {
				for i := tt.keep; i < tt.fleet; i++ {
					if !e.nsGoneOrDeleting(ctx, slug(i)) {
						return false
					}
				}
				return true
			}
			if tt.held == "" {
				e.waitFor("the removed companies pruned", goneDeleting)
				e.waitFor("pcsync_prune_blocked 0", func(context.Context) bool {
					v, ok := scrapeQuiet(d)["pcsync_prune_blocked"]
					return ok && v == 0
				})
				for i := range tt.keep {
					if !e.nsExists(context.Background(), slug(i)) {
						t.Errorf("kept company %s was pruned", slug(i))
					}
				}
				return
			}

			gone := float64(tt.fleet - tt.keep)
			e.waitFor("the prune held", func(context.Context) bool { return scrapeQuiet(d)["pcsync_prune_blocked"] == gone })
			var hold *apply.PruneHold
			for _, out := range d.reconciles() {
				if out.Report != nil && out.Report.PruneHeld != nil {
					hold = out.Report.PruneHeld
				}
			}
			if hold == nil || hold.Reason != tt.held {
				t.Fatalf("held prune = %+v, want %s", hold, tt.held)
			}
			code, body := d.get(t, "/readyz")
			var rep health.Report
			if err := json.Unmarshal([]byte(body), &rep); err != nil {
				t.Fatalf("/readyz: %v\n%s", err, body)
			}
			approve := fmt.Sprintf("kubectl annotate secret pcsync -n %s %s=%s --overwrite", e.ns, apply.AnnotationApprovePrune, hold.Token)
			var cond health.Condition
			for _, c := range rep.Conditions {
				if c.Type == reconcile.CondPruneAllowed {
					cond = c
				}
			}
			if code != 200 || rep.Status != health.StateDegraded || cond.Status != health.StatusFalse ||
				cond.Reason != "PruneHeld" || !strings.Contains(cond.Message, approve) {
				t.Errorf("/readyz = %d %s, PruneAllowed %+v; want degraded, False/PruneHeld naming %q", code, rep.Status, cond, approve)
			}
			// Several reconciles (approval polls) later, nothing was deleted.
			polls := len(d.reconciles())
			e.waitFor("two more reconciles", func(context.Context) bool { return len(d.reconciles()) >= polls+2 })
			ctx := context.Background()
			for i := range tt.fleet {
				if !e.nsExists(ctx, slug(i)) {
					t.Fatalf("held prune deleted company %s", slug(i))
				}
			}
			if got := scrape(t, d)["pcsync_pruned_objects_total"]; got != 0 {
				t.Errorf("pcsync_pruned_objects_total = %v while held", got)
			}

			// Approve, as the message says.
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, apply.AnnotationApprovePrune, hold.Token)
			if _, err := e.c.Client().CoreV1().Secrets(e.ns).Patch(ctx, "pcsync", types.MergePatchType, []byte(patch),
				metav1.PatchOptions{FieldManager: "kubectl-annotate"}); err != nil {
				t.Fatal(err)
			}
			e.waitFor("the approved prune carried out", goneDeleting)
			e.waitFor("pcsync_prune_blocked back to 0", func(context.Context) bool {
				v, ok := scrapeQuiet(d)["pcsync_prune_blocked"]
				return ok && v == 0
			})
			e.waitFor("the approval removed from the parent", func(ctx context.Context) bool {
				p, err := e.c.Client().CoreV1().Secrets(e.ns).Get(ctx, "pcsync", metav1.GetOptions{})
				if err != nil {
					return false
				}
				_, has := p.Annotations[apply.AnnotationApprovePrune]
				return !has
			})
			for i := range tt.keep {
				if !e.nsExists(ctx, slug(i)) {
					t.Errorf("kept company %s was pruned", slug(i))
				}
			}
		})
	}
}
