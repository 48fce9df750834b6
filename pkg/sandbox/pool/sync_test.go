package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// member is a pool member named name, age old at now, Ready or not, in
// phase (Running when empty).
func member(name string, now time.Time, age time.Duration, ready bool, phase corev1.PodPhase) *corev1.Pod {
	if phase == "" {
		phase = corev1.PodRunning
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status},
		}},
	}
}

// A pool's sync decides from its declaration, its members and its
// namespace's hold alone: what it deletes (and why), how many it creates,
// and when it looks again though no event comes.
func TestPoolDecide(t *testing.T) {
	o := DefaultOptions()
	o.ReadyDeadline, o.MemberMaxAge = time.Minute, time.Hour
	now := time.Now().Truncate(time.Second)
	const past = 100 * time.Millisecond
	type result struct {
		Removed map[string]string // name → why (its start)
		Create  int
		After   time.Duration
	}
	tests := []struct {
		name     string
		declared bool
		count    int
		members  []*corev1.Pod
		held     time.Duration
		want     result
	}{
		{name: "an empty pool fills", declared: true, count: 3,
			want: result{Create: 3}},
		{name: "a whole pool waits for its oldest member's max age", declared: true, count: 2,
			members: []*corev1.Pod{member("a", now, 10*time.Minute, true, ""), member("b", now, 20*time.Minute, true, "")},
			want:    result{After: 40*time.Minute + past}},
		{name: "a claimed member (gone from the lister) is replaced", declared: true, count: 2,
			members: []*corev1.Pod{member("a", now, 10*time.Minute, true, "")},
			want:    result{Create: 1, After: 50*time.Minute + past}},
		{name: "a member not yet Ready is looked at again at its ReadyDeadline", declared: true, count: 1,
			members: []*corev1.Pod{member("a", now, 20*time.Second, false, corev1.PodPending)},
			want:    result{After: 40*time.Second + past}},
		{name: "a member not Ready within ReadyDeadline is replaced", declared: true, count: 1,
			members: []*corev1.Pod{member("a", now, 2*time.Minute, false, corev1.PodPending)},
			want:    result{Removed: map[string]string{"a": "it was not Ready within 1m0s"}, Create: 1}},
		{name: "an ended member is replaced", declared: true, count: 1,
			members: []*corev1.Pod{member("a", now, time.Minute, false, corev1.PodFailed)},
			want:    result{Removed: map[string]string{"a": "it ended (Failed)"}, Create: 1}},
		{name: "a member past its max age is replaced", declared: true, count: 1,
			members: []*corev1.Pod{member("a", now, 2*time.Hour, true, "")},
			want:    result{Removed: map[string]string{"a": "it waited for a claim longer than 1h0m0s"}, Create: 1}},
		{name: "a smaller count deletes the surplus: the least ready, then the newest", declared: true, count: 1,
			members: []*corev1.Pod{member("old", now, 30*time.Minute, true, ""), member("new", now, 5*time.Minute, true, ""),
				member("starting", now, 10*time.Second, false, corev1.PodPending)},
			want: result{Removed: map[string]string{"new": "its pool has more members", "starting": "its pool has more members"},
				After: 30*time.Minute + past}},
		{name: "an undeclared pool is drained", count: 0,
			members: []*corev1.Pod{member("a", now, time.Minute, true, "")},
			want:    result{Removed: map[string]string{"a": "its pool is no longer declared"}}},
		{name: "a held namespace creates nothing and looks again when the hold ends", declared: true, count: 2,
			members: []*corev1.Pod{member("a", now, 59*time.Minute, true, "")}, held: 15 * time.Second,
			want: result{After: 15 * time.Second}},
		{name: "a hold does not stop a deletion", declared: true, count: 0,
			members: []*corev1.Pod{member("a", now, time.Minute, true, "")}, held: 15 * time.Second,
			want: result{Removed: map[string]string{"a": "its pool has more members"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := decide(poolInput{declared: tt.declared, count: tt.count, members: tt.members, now: now, held: tt.held, opts: o})
			got := result{Create: plan.create, After: plan.after}
			for _, r := range plan.remove {
				if got.Removed == nil {
					got.Removed = map[string]string{}
				}
				got.Removed[r.pod.Name] = r.why[:min(len(r.why), len(tt.want.Removed[r.pod.Name]))]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A pool's creates and deletes in flight hold its sync until the informer
// reports each of them (a delete by the name it was expected for, not any
// member leaving: a claim is none), or until they are PendingTTL old.
func TestPoolExpectations(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	e := newExpectations(30*time.Second, clock)
	a, b := Key{Namespace: "ns", Hash: "a"}, Key{Namespace: "ns", Hash: "b"}
	type waits struct{ A, B time.Duration }
	check := func(what string, want waits) {
		t.Helper()
		if diff := cmp.Diff(want, waits{e.wait(a), e.wait(b)}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	check("nothing in flight", waits{})
	e.expectCreate(a, "m1")
	e.expectDelete(a, "m0")
	now = now.Add(10 * time.Second)
	check("a create and a delete in flight in a", waits{A: 20 * time.Second})
	e.created(a, "m1")
	if e.deleted(a, "claimed-member") {
		t.Error("a claimed member's leaving was taken for the controller's own delete")
	}
	check("the create seen, a claimed member left", waits{A: 20 * time.Second})
	if !e.deleted(a, "m0") {
		t.Error("the controller's own delete was not known as expected")
	}
	check("the delete seen", waits{})
	e.expectCreate(b, "m2")
	now = now.Add(31 * time.Second)
	check("a create never seen, past its TTL", waits{})
	check("and forgotten", waits{})
}

// A new config queues the pools whose declaration it changed: added,
// removed, another count or member; every pool of the first config.
func TestChangedPools(t *testing.T) {
	key := func(h string) Key { return Key{Namespace: "ns", Hash: h} }
	decl := func(h string, count int, image string) *Decl {
		return &Decl{key: key(h), count: count, Rec: leasepod.Record{Namespace: "ns", Company: "acme", Image: image}}
	}
	cfg := func(ds ...*Decl) *poolConfig {
		out := &poolConfig{pools: map[Key]*Decl{}}
		for _, d := range ds {
			out.pools[d.key] = d
		}
		return out
	}
	before := cfg(decl("a", 2, "img:1"), decl("b", 1, "img:1"), decl("c", 1, "img:1"))
	tests := []struct {
		name     string
		old, now *poolConfig
		want     []string
	}{
		{"the first config", nil, before, []string{"a", "b", "c"}},
		{"the same pools", before, cfg(decl("a", 2, "img:1"), decl("b", 1, "img:1"), decl("c", 1, "img:1")), nil},
		{"a count lowered, a pool added, one removed", before, cfg(decl("a", 1, "img:1"), decl("b", 1, "img:1"), decl("d", 3, "img:1")), []string{"a", "c", "d"}},
		{"a member's record changed", before, cfg(decl("a", 2, "img:1"), decl("b", 1, "img:2"), decl("c", 1, "img:1")), []string{"b"}},
		{"every pool removed", before, cfg(), []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, k := range changedPools(tt.old, tt.now) {
				got = append(got, k.Hash)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("queued pools (-want +got):\n%s", diff)
			}
		})
	}
}
