package reconcile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
)

// recordingApplier records each apply and answers as told: answer gives
// its change set's extras and its error (nil: every object unchanged).
type recordingApplier struct {
	calls  []appliedCall
	answer func(opts apply.ApplyOptions) (extra []apply.Change, hold *apply.PruneHold, err error)
}

// appliedCall is one apply: the objects' count and kinds given, and the options.
type appliedCall struct {
	Objects int
	Partial bool
	Prune   bool
	Kinds   map[string]int
}

func (r *recordingApplier) Apply(_ context.Context, objs []*unstructured.Unstructured, opts apply.ApplyOptions) (*apply.ChangeSet, error) {
	c := appliedCall{Objects: len(objs), Partial: opts.Partial, Prune: opts.Prune, Kinds: map[string]int{}}
	cs := &apply.ChangeSet{Partial: opts.Partial}
	for _, o := range objs {
		c.Kinds[o.GetKind()]++
		cs.Objects = append(cs.Objects, apply.Change{Ref: apply.RefOf(o), Action: apply.ActionUnchanged})
	}
	r.calls = append(r.calls, c)
	if r.answer == nil {
		return cs, nil
	}
	extra, hold, err := r.answer(opts)
	cs.Objects, cs.PruneHeld = append(cs.Objects, extra...), hold
	return cs, err
}

// step is one reconcile of a partialCase: edit (if any) changes the
// config directory first.
type step struct {
	edit    func(t *testing.T, dir string)
	trigger Trigger
	// fullAsked calls Loop.Trigger before the reconcile.
	fullAsked bool
	answer    func(opts apply.ApplyOptions) ([]apply.Change, *apply.PruneHold, error)
}

var (
	failedChange = func(apply.ApplyOptions) ([]apply.Change, *apply.PruneHold, error) {
		ref := apply.ObjectRef{Version: "v1", Kind: "ConfigMap", Namespace: "paperclip-acme", Name: "x"}
		return []apply.Change{{Ref: ref, Action: apply.ActionFailed, Err: os.ErrDeadlineExceeded}}, nil, nil
	}
	heldPrune = func(apply.ApplyOptions) ([]apply.Change, *apply.PruneHold, error) {
		return nil, &apply.PruneHold{Reason: apply.HoldOverLimit, Tenants: []string{"paperclip-old"}, Token: "t"}, nil
	}
	retained = func(apply.ApplyOptions) ([]apply.Change, *apply.PruneHold, error) {
		ref := apply.ObjectRef{Version: "v1", Kind: "Namespace", Name: "paperclip-old"}
		return []apply.Change{{Ref: ref, Action: apply.ActionRetained, Prune: true}}, nil, nil
	}
	noParent = func(o apply.ApplyOptions) ([]apply.Change, *apply.PruneHold, error) {
		if o.Partial {
			return nil, nil, apply.ErrPartialNoParent
		}
		return nil, nil, nil
	}
)

func editQuota(t *testing.T, dir string) {
	write(t, filepath.Join(dir, "acme.yaml"), company("acme")+"  quota: {pods: 5}\n")
}

func addGlobex(t *testing.T, dir string) {
	write(t, filepath.Join(dir, "globex.yaml"), company("globex"))
}

func removeGlobex(t *testing.T, dir string) {
	if err := os.Remove(filepath.Join(dir, "globex.yaml")); err != nil {
		t.Fatal(err)
	}
}

// TestLoopAppliesWhatChanged: a change of the config directory applies only
// the objects whose render changed (Partial, no prune); the start, the
// interval, a retry, Loop.Trigger, a change that removes an object, and
// any change after a failure, a held prune or a retained Namespace apply
// every object with prune.
func TestLoopAppliesWhatChanged(t *testing.T) {
	tenant := company1Objects(t)
	quota := appliedCall{Objects: 1, Partial: true, Kinds: map[string]int{"ResourceQuota": 1}}
	all := func(companies int) appliedCall {
		c := appliedCall{Objects: companies * len(tenant), Prune: true, Kinds: map[string]int{}}
		for k, n := range kindsOf(tenant) {
			c.Kinds[k] = n * companies
		}
		return c
	}
	globex := appliedCall{Objects: len(tenant), Partial: true, Kinds: kindsOf(tenant)}
	tests := []struct {
		name  string
		steps []step
		want  []appliedCall
	}{
		{"a change applies the changed object", []step{{trigger: TriggerStart}, {edit: editQuota, trigger: TriggerChange}},
			[]appliedCall{all(1), quota}},
		{"a new company applies its objects", []step{{trigger: TriggerStart}, {edit: addGlobex, trigger: TriggerChange}},
			[]appliedCall{all(1), globex}},
		{"a change that changes nothing applies nothing", []step{{trigger: TriggerStart}, {trigger: TriggerChange}},
			[]appliedCall{all(1), {Partial: true, Kinds: map[string]int{}}}},
		{"a removed company is pruned in full", []step{{edit: addGlobex, trigger: TriggerStart},
			{edit: removeGlobex, trigger: TriggerChange}}, []appliedCall{all(2), all(1)}},
		{"the interval applies in full", []step{{trigger: TriggerStart}, {edit: editQuota, trigger: TriggerInterval}},
			[]appliedCall{all(1), all(1)}},
		{"Trigger asks for a full apply", []step{{trigger: TriggerStart}, {edit: editQuota, trigger: TriggerChange, fullAsked: true}},
			[]appliedCall{all(1), all(1)}},
		{"a change after a failure applies in full", []step{{trigger: TriggerStart, answer: failedChange},
			{edit: editQuota, trigger: TriggerChange}, {edit: addGlobex, trigger: TriggerChange}},
			[]appliedCall{all(1), all(1), globex}},
		{"a failed partial apply: the next change applies in full", []step{{trigger: TriggerStart},
			{edit: editQuota, trigger: TriggerChange, answer: failedChange}, {edit: addGlobex, trigger: TriggerChange}},
			[]appliedCall{all(1), quota, all(2)}},
		{"a change after a held prune applies in full", []step{{trigger: TriggerStart, answer: heldPrune},
			{edit: editQuota, trigger: TriggerChange}}, []appliedCall{all(1), all(1)}},
		{"a change after a retained Namespace applies in full", []step{{trigger: TriggerStart, answer: retained},
			{edit: editQuota, trigger: TriggerChange}}, []appliedCall{all(1), all(1)}},
		{"no parent: the change applies in full at once", []step{{trigger: TriggerStart},
			{edit: editQuota, trigger: TriggerChange, answer: noParent}}, []appliedCall{all(1), quota, all(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
			ra := &recordingApplier{}
			o := DefaultOptions(dir)
			o.Watch, o.Apply.Prune = false, true
			o.Logger = slog.New(slog.DiscardHandler)
			l, err := New(ra, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.steps {
				if s.edit != nil {
					s.edit(t, dir)
				}
				if s.fullAsked {
					l.Trigger()
				}
				ra.answer = s.answer
				l.reconcile(context.Background(), s.trigger)
			}
			if diff := cmp.Diff(tt.want, ra.calls); diff != "" {
				t.Errorf("applies (-want +got):\n%s", diff)
			}
		})
	}
}

// company1Objects renders company("acme") alone.
func company1Objects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
	o := DefaultOptions(dir)
	o.Logger = slog.New(slog.DiscardHandler)
	l, err := New(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	_, r, _, ok := l.loadAndRender(context.Background(), l.log, &Outcome{})
	if !ok {
		t.Fatal("company(acme) does not render")
	}
	return r.Objects
}

func kindsOf(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetKind()]++
	}
	return out
}

// TestShardTakesACompanyInPart: a company moved into the shard is a change
// applied in part, with the handover from the other shards' sets; one moved
// out removes objects, so it is applied in full, its tenant kept.
func TestShardTakesACompanyInPart(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a1.yaml"), shardedCompany("a1", "a"))
	write(t, filepath.Join(dir, "b1.yaml"), shardedCompany("b1", "b"))
	a := &optsApplier{}
	o := DefaultOptions(dir)
	o.Watch = false
	o.Logger = slog.New(slog.DiscardHandler)
	o.Shard = "a"
	o.ShardSet = func(s config.Shard) string { return "set-" + string(s) }
	l, err := New(a, o)
	if err != nil {
		t.Fatal(err)
	}
	var partial []bool
	for _, s := range []struct {
		edit    string
		trigger Trigger
	}{{"", TriggerStart}, {"b1:a", TriggerChange}, {"a1:b", TriggerChange}} {
		if slug, shard, ok := strings.Cut(s.edit, ":"); ok {
			write(t, filepath.Join(dir, slug+".yaml"), shardedCompany(slug, shard))
		}
		out := l.reconcile(context.Background(), s.trigger)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		partial = append(partial, out.Partial)
	}
	from := []string{"set-", "set-b"}
	want := []applyCall{
		{Namespaces: []string{"paperclip-a1"}, Handover: apply.Handover{Keep: []string{"paperclip-b1"}, From: from}},
		{Namespaces: []string{"paperclip-b1"}, Handover: apply.Handover{From: from}},
		{Namespaces: []string{"paperclip-b1"}, Handover: apply.Handover{Keep: []string{"paperclip-a1"}, From: from}},
	}
	if diff := cmp.Diff(want, a.calls, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{false, true, false}, partial); diff != "" {
		t.Errorf("partial (-want +got):\n%s", diff)
	}
}
