package pool

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/sandbox/internal/sandboxtest"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// A member is the pod leasepod.BuildPod makes for a lease of its pool, but for its
// labels (no role, run or lease: no egress policy selects it), its
// annotations and its deadline; a lease claims it only where its own pod
// would have the same spec hash: same image, same agent's scheduling.
func TestPoolMember(t *testing.T) {
	model := sandboxtest.SchedModel(t)
	place := func(r *leasepod.Record, _ *config.Model) { r.HelperImage = "pcsync:test"; r.SetPaths("") }
	c := &Controller{deps: deps{opts: DefaultOptions(), log: slog.New(slog.DiscardHandler), place: place}}
	d := &Decl{count: 1, Rec: leasepod.Record{Namespace: "paperclip-acme", Company: "acme", Image: "img:1", Agent: "pinned"}}
	place(&d.Rec, model)
	hash, err := specHash(d.Rec, model, "")
	if err != nil {
		t.Fatal(err)
	}
	d.key = Key{Namespace: "paperclip-acme", Hash: hash}
	member, r, err := c.build(d, model, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{agentpod.LabelManagedBy: agentpod.ManagedByValue, agentpod.LabelCompany: "acme",
		agentpod.LabelCompanyID: "acme-id", Label: hash, LabelOwner: "pcsync"}
	if diff := cmp.Diff(want, member.Labels); diff != "" {
		t.Errorf("member labels (-want +got):\n%s", diff)
	}
	lease := leasepod.Record{ID: r.ID, Namespace: "paperclip-acme", Company: "acme", Image: "img:1", Agent: "pinned", RunID: "run-1",
		AdapterType: "claude_local", ExpiresAt: r.ExpiresAt}
	place(&lease, model)
	leasePod, err := leasepod.BuildPod(&lease, model)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(leasePod.Spec, member.Spec); diff != "" {
		t.Errorf("member spec is not a lease pod's (-lease +member):\n%s", diff)
	}
	tests := []struct {
		name  string
		edit  func(*leasepod.Record)
		claim bool
	}{
		{"the same pod", func(*leasepod.Record) {}, true},
		{"another run", func(r *leasepod.Record) { r.RunID, r.EnvironmentID = "run-2", "env" }, true},
		{"another image", func(r *leasepod.Record) { r.Image = "img:2" }, false},
		{"another agent's scheduling", func(r *leasepod.Record) { r.Agent = "zoned" }, false},
		{"the company's scheduling", func(r *leasepod.Record) { r.Agent = "" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lease
			tt.edit(&r)
			h, err := specHash(r, model, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := h == hash; got != tt.claim {
				t.Errorf("claims the member: %v, want %v", got, tt.claim)
			}
		})
	}
}

// A member is outside the company's egress policy until a claim makes it
// a lease pod, and the claim drops the company key an older pcsync gave
// its members: the rendered policy's own selector says so, not a copy of
// it.
func TestPoolMemberEgressUntilClaimed(t *testing.T) {
	model := sandboxtest.SchedModel(t)
	c, _ := model.Company("acme")
	out, err := render.Render(model, render.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var sel labels.Selector
	for _, o := range out.Companies[0].Objects {
		if o.GetKind() == "NetworkPolicy" && o.GetName() == render.EgressAllowName {
			m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "podSelector", "matchLabels")
			sel = labels.SelectorFromSet(m)
		}
	}
	if sel == nil || sel.Empty() {
		t.Fatalf("no agent selector in the rendered %s", render.EgressAllowName)
	}
	member := memberLabels(c, "h", "pcsync")
	member[agentpod.LegacyLabelCompany] = "acme" // made by an older pcsync
	if sel.Matches(labels.Set(member)) {
		t.Errorf("the egress policy (%s) selects a pool member (labels %v)", sel, member)
	}
	r := &leasepod.Record{ID: "pcsync-sbx-1", Company: "acme", Agent: "pinned"}
	for k, v := range ClaimLabels(r, c) {
		if v == nil {
			delete(member, k)
		} else {
			member[k] = v.(string)
		}
	}
	if !sel.Matches(labels.Set(member)) {
		t.Errorf("the egress policy (%s) does not select a claimed member (labels %v)", sel, member)
	}
	if diff := cmp.Diff(leasepod.Labels(r, c), member); diff != "" {
		t.Errorf("a claimed member's labels are not a lease pod's (-lease +claimed):\n%s", diff)
	}
}

// A namespace's refills wait while its acquires are in flight (their cold
// pods and the refill's would share the node), at most ColdHold, and while
// a quota refusal there is recent; the last acquire's end refills.
func TestPoolHeld(t *testing.T) {
	o := DefaultOptions()
	h := &nsHolds{quotaBackoff: o.QuotaBackoff, coldHold: o.ColdHold}
	now := time.Now()
	type state struct{ A, B time.Duration }
	heldAt := func(at time.Time) state { return state{h.held("a", at), h.held("b", at)} }
	ended := 0

	if diff := cmp.Diff(state{}, heldAt(now)); diff != "" {
		t.Errorf("no acquire in flight (-want +got):\n%s", diff)
	}
	one := h.acquiring("a", now, func() { ended++ })
	two := h.acquiring("a", now.Add(time.Second), func() { ended++ })
	if diff := cmp.Diff(state{A: o.ColdHold - 2*time.Second}, heldAt(now.Add(2*time.Second))); diff != "" {
		t.Errorf("two acquires in flight in a, ColdHold from the first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(state{}, heldAt(now.Add(o.ColdHold+time.Second))); diff != "" {
		t.Errorf("after ColdHold (-want +got):\n%s", diff)
	}
	one()
	one() // a second call is a no-op
	if diff := cmp.Diff(state{A: o.ColdHold}, heldAt(now)); diff != "" || ended != 0 {
		t.Errorf("one acquire left (-want +got):\n%s; refills asked for %d times, want 0", diff, ended)
	}
	two()
	if diff := cmp.Diff(state{}, heldAt(now)); diff != "" || ended != 1 {
		t.Errorf("every acquire ended (-want +got):\n%s; refills asked for %d times, want 1", diff, ended)
	}
	h.quotaRefused("b", now)
	if diff := cmp.Diff(state{B: o.QuotaBackoff - time.Second}, heldAt(now.Add(time.Second))); diff != "" {
		t.Errorf("a quota refusal in b (-want +got):\n%s", diff)
	}
}

// A claim holds its namespace's refills for the company's refill delay
// (none when it is 0); a newer claim's hold that ends sooner does not
// shorten an older one's.
func TestPoolHeldByClaims(t *testing.T) {
	h := &nsHolds{}
	now := time.Now()
	type state struct{ A, B time.Duration }
	heldAt := func(at time.Time) state { return state{h.held("a", at), h.held("b", at)} }
	for _, step := range []struct {
		name  string
		ns    string
		at, d time.Duration // the claim's time and delay, from now
		check time.Duration // when to look, from now
		want  state
	}{
		{name: "a claim with no delay holds nothing", ns: "a", check: 0, want: state{}},
		{name: "a claim with a delay of 3s, 1s later", ns: "a", d: 3 * time.Second, check: time.Second, want: state{A: 2 * time.Second}},
		{name: "a newer claim's shorter hold keeps the longer", ns: "a", at: time.Second, d: time.Second, check: time.Second, want: state{A: 2 * time.Second}},
		{name: "a claim in b holds b alone", ns: "b", at: 2 * time.Second, d: 5 * time.Second, check: 2 * time.Second, want: state{A: time.Second, B: 5 * time.Second}},
		{name: "every hold over", ns: "b", check: 8 * time.Second, want: state{}},
	} {
		h.claimed(step.ns, now.Add(step.at), step.d)
		if diff := cmp.Diff(step.want, heldAt(now.Add(step.check))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
}
