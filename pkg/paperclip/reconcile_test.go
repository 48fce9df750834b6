package paperclip

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRefusalsNameCompanyAndAgent: a 422 on one agent is an error naming the
// company and the agent with Paperclip's message; the other agents go on,
// and the one reporting to the failed agent says why it cannot.
func TestRefusalsNameCompanyAndAgent(t *testing.T) {
	var created []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte("[]"))
		case r.Method == http.MethodPost:
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body["name"] == "lead" {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = w.Write([]byte(`{"error":"Unknown adapter type: pcsync"}`))
				return
			}
			created = append(created, body["name"].(string))
			_, _ = w.Write([]byte(`{"id":"id-` + body["name"].(string) + `"}`))
		}
	}))
	defer srv.Close()
	m := model(ptrAgent("lead", ""), ptrAgent("coder", "lead"), ptrAgent("solo", ""))
	m.Settings.Spec.Paperclip.URL = srv.URL
	rep, err := New(DefaultOptions()).Reconcile(context.Background(), m, DefaultReconcileOptions())
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Err()
	if got == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"paperclip agent acme/lead: create failed: Paperclip answered POST /api/companies/c1/agents with 422 Unprocessable Entity: Unknown adapter type: pcsync (install the pcsync adapter",
		`paperclip agent acme/coder: create failed: reportsTo "lead": it could not be created`,
	} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, got)
		}
	}
	if strings.Join(created, ",") != "solo" || rep.Count("failed") != 2 || rep.Count("created") != 1 {
		t.Errorf("created %v, report:\n%s", created, rep.SummaryLine())
	}
	var ae *APIError
	if !errors.As(got, &ae) || ae.Status != http.StatusUnprocessableEntity {
		t.Errorf("errors.As APIError: %v", ae)
	}
}

// TestGuard: the pause guard lets an agent or a few go and holds the large
// share and the emptied company, as the Kubernetes prune guard does.
func TestGuard(t *testing.T) {
	plan := func(slug string, keep, pause, managed int) CompanyPlan {
		p := CompanyPlan{Slug: slug, Managed: managed}
		for range keep {
			p.Actions = append(p.Actions, Action{Verb: VerbNone})
		}
		for range pause {
			p.Actions = append(p.Actions, Action{Verb: VerbPause})
		}
		return p
	}
	allow := DefaultReconcileOptions()
	allow.AllowMassPause = true
	tests := []struct {
		name    string
		plans   []CompanyPlan
		ro      ReconcileOptions
		refused bool
	}{
		{"one of four", []CompanyPlan{plan("a", 3, 1, 4)}, DefaultReconcileOptions(), false},
		{"three of four: the floor", []CompanyPlan{plan("a", 1, 3, 4)}, DefaultReconcileOptions(), false},
		{"two of forty", []CompanyPlan{plan("a", 20, 1, 21), plan("b", 18, 1, 19)}, DefaultReconcileOptions(), false},
		{"five of eight", []CompanyPlan{plan("a", 3, 5, 8)}, DefaultReconcileOptions(), true},
		{"a company emptied", []CompanyPlan{plan("a", 10, 0, 10), plan("b", 0, 1, 1)}, DefaultReconcileOptions(), true},
		{"five of eight, allowed", []CompanyPlan{plan("a", 3, 5, 8)}, allow, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := guard(tt.plans, make([]error, len(tt.plans)), tt.ro)
			if got := errors.Is(err, ErrMassPause); got != tt.refused {
				t.Errorf("refused = %v (%v), want %v", got, err, tt.refused)
			}
		})
	}
}
