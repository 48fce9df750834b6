//go:build integration

package paperclip_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/paperclip"
)

// TestResolveAgentRealPaperclip: a Paperclip agent id names the agent of
// the config whose marker it carries; an agent made by hand, an id
// Paperclip does not know, an agent of another company and one the config
// no longer declares name none; a company that does not manage its agents
// asks Paperclip nothing.
func TestResolveAgentRealPaperclip(t *testing.T) {
	ctx := context.Background()
	var company, other struct{ ID string }
	mustCall(t, "POST", "/api/companies", map[string]any{"name": "Acme placement"}, &company)
	mustCall(t, "POST", "/api/companies", map[string]any{"name": "Other placement"}, &other)
	var hand paperclip.Agent
	mustCall(t, "POST", "/api/companies/"+company.ID+"/agents", map[string]any{"name": "hand", "role": "pm",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "true"}}, &hand)

	proxy := newCounter(t)
	dir := t.TempDir()
	r := paperclip.New(paperclip.DefaultOptions())
	m := writeConfig(t, dir, proxy.URL, "", company.ID, threeAgents)
	if rep, err := r.Reconcile(ctx, m, paperclip.DefaultReconcileOptions()); err != nil || rep.Err() != nil {
		t.Fatalf("reconcile: %v / %v", err, rep.Err())
	}
	live := agentsOf(t, company.ID)
	// The same agents, marked, in the other company's config.
	otherModel := writeConfig(t, t.TempDir(), proxy.URL, "", other.ID, threeAgents)
	if rep, err := r.Reconcile(ctx, otherModel, paperclip.DefaultReconcileOptions()); err != nil || rep.Err() != nil {
		t.Fatalf("reconcile the other company: %v / %v", err, rep.Err())
	}
	otherCoder := agentsOf(t, other.ID)["coder"].ID
	withoutReviewer := writeConfig(t, t.TempDir(), proxy.URL, "", company.ID, strings.Split(threeAgents, "    - name: reviewer")[0])

	c, _ := m.Company("acme")
	cNoReviewer, _ := withoutReviewer.Company("acme")
	tests := []struct {
		name, id string
		model    *config.Model
		company  *config.Company
		want     string
	}{
		{"a managed agent", live["coder"].ID, m, c, "coder"},
		{"another managed agent", live["reviewer"].ID, m, c, "reviewer"},
		{"an agent made by hand", hand.ID, m, c, ""},
		{"an id Paperclip does not know", "00000000-0000-4000-8000-000000000000", m, c, ""},
		{"an agent of another company", otherCoder, m, c, ""},
		{"an agent the config no longer declares", live["reviewer"].ID, withoutReviewer, cNoReviewer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.ResolveAgent(ctx, tt.model, tt.company, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ResolveAgent(%s) (-want +got):\n%s", tt.id, diff)
			}
		})
	}

	// A company that does not manage its agents in Paperclip has no marked
	// agent: nothing is asked.
	unmanaged := *c
	unmanaged.Spec.Paperclip.Manage = false
	proxy.reset()
	if got, err := r.ResolveAgent(ctx, m, &unmanaged, live["coder"].ID); got != "" || err != nil {
		t.Errorf("ResolveAgent of an unmanaged company = %q, %v; want \"\", nil", got, err)
	}
	if reads, writes := proxy.reset(); reads+writes != 0 {
		t.Errorf("ResolveAgent of an unmanaged company sent %d requests, want none", reads+writes)
	}
}
