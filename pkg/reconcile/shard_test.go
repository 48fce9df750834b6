package reconcile

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
)

// optsApplier records the Namespaces and the handover of each apply.
type optsApplier struct {
	mu    sync.Mutex
	calls []applyCall
}

type applyCall struct {
	Namespaces []string
	Handover   apply.Handover
}

func (a *optsApplier) Apply(_ context.Context, objs []*unstructured.Unstructured, o apply.ApplyOptions) (*apply.ChangeSet, error) {
	c := applyCall{Handover: o.Handover}
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			c.Namespaces = append(c.Namespaces, obj.GetName())
		}
	}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
	return &apply.ChangeSet{}, nil
}

func shardedCompany(slug, shard string) string {
	return strings.Replace(company(slug), "metadata: {name: \""+slug+"\"}",
		"metadata: {name: \""+slug+"\", labels: {pcsync.io/shard: "+shard+"}}", 1)
}

// TestShardAppliesItsCompanies: a loop of shard "a" applies only a's
// companies, hands the others' tenants over (never pruned) and takes
// companies from the sets of every shard the configs named since it
// started, and from the unsharded one.
func TestShardAppliesItsCompanies(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a1.yaml"), shardedCompany("a1", "a"))
	write(t, filepath.Join(dir, "b1.yaml"), shardedCompany("b1", "b"))
	write(t, filepath.Join(dir, "none.yaml"), company("none"))
	a := &optsApplier{}
	o := DefaultOptions(dir)
	o.Logger = slog.New(slog.DiscardHandler)
	o.Shard = "a"
	o.ShardSet = func(s config.Shard) string { return "set-" + string(s) }
	var models []*config.Model
	o.OnModel = func(m *config.Model) { models = append(models, m) }
	l, err := New(a, o)
	if err != nil {
		t.Fatal(err)
	}
	if out := l.ReconcileOnce(context.Background()); out.Err != nil {
		t.Fatal(out.Err)
	}
	write(t, filepath.Join(dir, "b1.yaml"), shardedCompany("b1", "c"))
	if out := l.ReconcileOnce(context.Background()); out.Err != nil {
		t.Fatal(out.Err)
	}
	want := []applyCall{
		{Namespaces: []string{"paperclip-a1"}, Handover: apply.Handover{
			Keep: []string{"paperclip-b1", "paperclip-none"}, From: []string{"set-", "set-b"}}},
		{Namespaces: []string{"paperclip-a1"}, Handover: apply.Handover{
			Keep: []string{"paperclip-b1", "paperclip-none"}, From: []string{"set-", "set-b", "set-c"}}},
	}
	if diff := cmp.Diff(want, a.calls); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	if len(models) != 2 || len(models[1].Companies) != 3 {
		t.Errorf("OnModel got %d models, want 2 of the whole config (3 companies)", len(models))
	}
}
