//go:build integration

package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/apply"
)

// Every test binary of this package built with the integration tag runs
// one real control plane; the unit tests run alongside.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// faultyApplier is a real applier that fails the calls it is told to.
type faultyApplier struct {
	Applier
	fail bool
}

func (f *faultyApplier) Apply(ctx context.Context, objs []*unstructured.Unstructured, o apply.ApplyOptions) (*apply.ChangeSet, error) {
	if f.fail {
		return &apply.ChangeSet{}, errors.New("injected failure")
	}
	return f.Applier.Apply(ctx, objs, o)
}

// clusterStep is one reconcile of TestLoopAppliesWhatChangedOnACluster.
type clusterStep struct {
	name    string
	edit    func(t *testing.T)
	trigger Trigger
	fail    bool
	want    stepOutcome
	// pods is acme's ResourceQuota's hard pods in the cluster after it.
	pods string
}

// stepOutcome is what the test compares of a reconcile.
type stepOutcome struct {
	Partial                      bool
	Given, Writes, Drift, Pruned int
	Failed                       Stage
}

// TestLoopAppliesWhatChangedOnACluster: on a real control plane, a change
// of the config directory sends only what changed; drift made in the
// cluster waits for the interval, which corrects it; a failure makes the
// next change apply in full; a removed company is pruned.
func TestLoopAppliesWhatChangedOnACluster(t *testing.T) {
	c := testcluster.Get(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "t" + hex.EncodeToString(b) + "-"
	t.Cleanup(func() { deleteNamespaces(t, c, prefix) })
	dir := t.TempDir()
	write(t, filepath.Join(dir, "settings.yaml"), fmt.Sprintf(
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: test}\nspec:\n  namespacePrefix: %s\n", prefix))
	write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
	write(t, filepath.Join(dir, "globex.yaml"), company("globex"))
	mo := apply.DefaultManagerOptions()
	mo.ApplySet = apply.ParentRef{Name: "pcsync", Namespace: c.Namespace(t, "reconcile", nil)}
	m, err := apply.NewManager(c.RESTConfig(), mo)
	if err != nil {
		t.Fatal(err)
	}
	fa := &faultyApplier{Applier: m}
	o := DefaultOptions(dir)
	o.Watch, o.Apply.Prune = false, true
	o.Logger = slog.New(slog.DiscardHandler)
	l, err := New(fa, o)
	if err != nil {
		t.Fatal(err)
	}
	quota := func(pods int) func(t *testing.T) {
		return func(t *testing.T) {
			write(t, filepath.Join(dir, "acme.yaml"), company("acme")+fmt.Sprintf("  quota: {pods: %d}\n", pods))
		}
	}
	rendered := len(company1Objects(t))
	steps := []clusterStep{
		{"start", nil, TriggerStart, false, stepOutcome{Given: 2 * rendered, Writes: 2*rendered + 1}, ""},
		{"a change sends what changed", quota(5), TriggerChange, false, stepOutcome{Partial: true, Given: 1, Writes: 1}, "5"},
		{"drift waits for the interval", driftQuota(c, prefix+"acme", "99"), TriggerChange, false,
			stepOutcome{Partial: true}, "99"},
		{"the interval corrects drift", nil, TriggerInterval, false,
			stepOutcome{Given: 2 * rendered, Writes: 1, Drift: 1}, "5"},
		{"a failure", quota(6), TriggerChange, true, stepOutcome{Partial: true, Failed: StageApply}, "5"},
		{"after a failure a change applies in full", quota(7), TriggerChange, false,
			stepOutcome{Given: 2 * rendered, Writes: 1}, "7"},
		{"a removed company is pruned", func(t *testing.T) {
			if err := os.Remove(filepath.Join(dir, "globex.yaml")); err != nil {
				t.Fatal(err)
			}
		}, TriggerChange, false, stepOutcome{Given: rendered, Writes: rendered + 1, Pruned: rendered}, "7"},
	}
	for _, s := range steps {
		if s.edit != nil {
			s.edit(t)
		}
		fa.fail = s.fail
		out := l.reconcile(context.Background(), s.trigger)
		got := stepOutcome{Partial: out.Partial, Drift: out.Drift, Failed: out.FailedStage}
		if r := out.Report; r != nil {
			got.Writes, got.Pruned = int(r.MutatingRequests), r.Count(apply.ActionPruned)
			got.Given = len(r.Objects) - got.Pruned
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s\nerror: %v", s.name, diff, out.Err)
		}
		if pods := quotaPods(t, c, prefix+"acme"); pods != s.pods && s.pods != "" {
			t.Errorf("%s: acme's quota holds %s pods, want %s", s.name, pods, s.pods)
		}
	}
	_, err = c.Client().CoreV1().Namespaces().Get(context.Background(), prefix+"globex", metav1.GetOptions{})
	if err == nil {
		ns, _ := c.Client().CoreV1().Namespaces().Get(context.Background(), prefix+"globex", metav1.GetOptions{})
		if ns.DeletionTimestamp == nil {
			t.Errorf("Namespace/%sglobex not pruned", prefix)
		}
	} else if !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// driftQuota changes the tenant's ResourceQuota in the cluster, as kubectl
// edit would.
func driftQuota(c *testcluster.Cluster, ns, pods string) func(t *testing.T) {
	return func(t *testing.T) {
		ctx := context.Background()
		// The quota controller writes the object's status meanwhile: an
		// edit that meets its write is made again, as kubectl edit would be.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			q, err := c.Client().CoreV1().ResourceQuotas(ns).Get(ctx, "paperclip-quota", metav1.GetOptions{})
			if err != nil {
				return err
			}
			q.Spec.Hard["pods"] = resourceQuantity(t, pods)
			_, err = c.Client().CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func quotaPods(t *testing.T, c *testcluster.Cluster, ns string) string {
	t.Helper()
	q, err := c.Client().CoreV1().ResourceQuotas(ns).Get(context.Background(), "paperclip-quota", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := q.Spec.Hard["pods"]
	return p.String()
}

// deleteNamespaces deletes the namespaces whose names start with prefix.
func deleteNamespaces(t *testing.T, c *testcluster.Cluster, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("list namespaces: %v", err)
		return
	}
	for _, ns := range l.Items {
		if strings.HasPrefix(ns.Name, prefix) {
			_ = c.Client().CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		}
	}
}

func resourceQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
