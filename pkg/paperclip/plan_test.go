package paperclip

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/pkg/config"
)

// model builds a config model of one opted-in company.
func model(agents ...config.Agent) *config.Model {
	for i := range agents {
		if agents[i].Paperclip.Role == "" {
			agents[i].Paperclip.Role = "general"
		}
	}
	return &config.Model{
		Settings: config.Settings{Spec: config.SettingsSpec{Paperclip: &config.PaperclipSettings{URL: "http://p", SpoolDir: "/spool"}}},
		Companies: []config.Company{{Metadata: config.Metadata{Name: "acme"},
			Spec: config.CompanySpec{ID: "c1", Paperclip: config.CompanyPaperclip{Manage: true}, Agents: agents}}},
	}
}

// liveOf is the live agent pcsync would have created for d.
func liveOf(id string, d DesiredAgent, ids map[string]string) Agent {
	a := Agent{ID: id, Status: StatusIdle, AdapterConfig: map[string]any{}, RuntimeConfig: map[string]any{},
		Metadata: map[string]any{MarkerKey: Marker{Agent: d.Name, Hash: d.Hash, Fields: d.Optional}.value()}}
	for path, v := range d.Fields {
		switch path {
		case "name":
			a.Name = v.(string)
		case "role":
			a.Role = v.(string)
		case "adapterType":
			a.AdapterType = v.(string)
		case "title":
			a.Title = ptr.To(v.(string))
		case "reportsTo":
			a.ReportsTo = ptr.To(ids[v.(string)])
		default:
			b := body(&a, map[string]any{path: v})
			for k, x := range b {
				switch k {
				case "adapterConfig":
					for kk, vv := range x.(map[string]any) {
						a.AdapterConfig[kk] = vv
					}
				case "metadata":
					a.Metadata = x.(map[string]any)
				case "runtimeConfig":
					a.RuntimeConfig = x.(map[string]any)
				case "budgetMonthlyCents":
					a.BudgetMonthlyCents = int64(x.(float64))
				case "capabilities":
					a.Capabilities = ptr.To(x.(string))
				}
			}
		}
	}
	return a
}

type step struct {
	Agent   string
	Verb    Verb
	Paths   []string
	Drift   bool
	FromTos map[string][2]any
}

func summarize(p CompanyPlan) []step {
	var out []step
	for _, a := range p.Actions {
		s := step{Agent: a.Agent, Verb: a.Verb, Drift: a.Drift}
		if a.Verb != VerbCreate {
			for _, c := range a.Changes {
				s.Paths = append(s.Paths, c.Path)
				if s.FromTos == nil {
					s.FromTos = map[string][2]any{}
				}
				s.FromTos[c.Path] = [2]any{c.From, c.To}
			}
		}
		out = append(out, s)
	}
	return out
}

func TestPlan(t *testing.T) {
	lead := config.Agent{Name: "lead", Paperclip: config.PaperclipAgent{Role: "cto", Title: ptr.To("Lead")}}
	coder := config.Agent{Name: "coder", Paperclip: config.PaperclipAgent{Role: "engineer", ReportsTo: "lead",
		BudgetMonthlyCents: ptr.To(500), RuntimeConfig: &config.PaperclipRuntimeConfig{Heartbeat: &config.PaperclipHeartbeat{IntervalSec: ptr.To(300)}},
		Metadata: map[string]any{"team": "core"}}}
	tester := config.Agent{Name: "tester", Paperclip: config.PaperclipAgent{ReportsTo: "coder"}}
	want := Desire(model(tester, coder, lead))[0]
	byName := map[string]DesiredAgent{}
	for _, d := range want.Agents {
		byName[d.Name] = d
	}
	ids := map[string]string{"lead": "id-lead", "coder": "id-coder", "tester": "id-tester"}
	synced := func() []Agent {
		return []Agent{liveOf("id-lead", byName["lead"], ids), liveOf("id-coder", byName["coder"], ids), liveOf("id-tester", byName["tester"], ids)}
	}
	unmanaged := Agent{ID: "id-hand", Name: "coder", Status: StatusIdle, Metadata: map[string]any{"team": "x"}}

	tests := []struct {
		name  string
		want  DesiredCompany
		live  func() []Agent
		steps []step
	}{
		{
			name:  "nothing live: created managers first, an unmanaged namesake ignored",
			want:  want,
			live:  func() []Agent { return []Agent{unmanaged} },
			steps: []step{{Agent: "lead", Verb: VerbCreate}, {Agent: "coder", Verb: VerbCreate}, {Agent: "tester", Verb: VerbCreate}},
		},
		{
			name:  "in sync: nothing to do",
			want:  want,
			live:  func() []Agent { return append(synced(), unmanaged) },
			steps: []step{{Agent: "lead", Verb: VerbNone}, {Agent: "coder", Verb: VerbNone}, {Agent: "tester", Verb: VerbNone}},
		},
		{
			name: "hand edits of managed fields are drift; unmanaged fields and keys are kept",
			want: want,
			live: func() []Agent {
				l := synced()
				l[0].Title = ptr.To("Boss")
				l[0].Capabilities = ptr.To("anything") // not declared
				l[1].RuntimeConfig["heartbeat"].(map[string]any)["intervalSec"] = float64(60)
				l[1].RuntimeConfig["heartbeat"].(map[string]any)["enabled"] = true // not declared
				l[1].Metadata["note"] = "hand"                                     // not declared
				l[2].ReportsTo = ptr.To("id-hand")
				return l
			},
			steps: []step{
				{Agent: "lead", Verb: VerbUpdate, Drift: true, Paths: []string{"title"}, FromTos: map[string][2]any{"title": {"Boss", "Lead"}}},
				{Agent: "coder", Verb: VerbUpdate, Drift: true, Paths: []string{"runtimeConfig.heartbeat.intervalSec"},
					FromTos: map[string][2]any{"runtimeConfig.heartbeat.intervalSec": {float64(60), float64(300)}}},
				{Agent: "tester", Verb: VerbUpdate, Drift: true, Paths: []string{"reportsTo"},
					FromTos: map[string][2]any{"reportsTo": {"id:id-hand", "coder"}}},
			},
		},
		{
			name: "a field no longer declared is reset; a removed agent is paused",
			want: DesiredCompany{Slug: "acme", ID: "c1", Agents: Desire(model(config.Agent{Name: "lead", Paperclip: config.PaperclipAgent{Role: "cto"}},
				config.Agent{Name: "coder", Paperclip: config.PaperclipAgent{Role: "engineer", ReportsTo: "lead",
					BudgetMonthlyCents: ptr.To(500), RuntimeConfig: &config.PaperclipRuntimeConfig{Heartbeat: &config.PaperclipHeartbeat{IntervalSec: ptr.To(300)}},
					Metadata: map[string]any{"team": "core"}}}))[0].Agents},
			live: synced,
			steps: []step{
				{Agent: "lead", Verb: VerbUpdate, Paths: []string{"title"}, FromTos: map[string][2]any{"title": {"Lead", nil}}},
				{Agent: "coder", Verb: VerbNone},
				{Agent: "tester", Verb: VerbPause, Paths: []string{"status"}, FromTos: map[string][2]any{"status": {"idle", "paused"}}},
			},
		},
		{
			name: "an agent pcsync paused and declared again is resumed; one paused by hand stays paused",
			want: want,
			live: func() []Agent {
				l := synced()
				m, _ := l[2].marker()
				m.Paused = true
				l[2].Metadata[MarkerKey] = m.value()
				l[2].Status = StatusPaused
				l[1].Status = StatusPaused
				return l
			},
			steps: []step{{Agent: "lead", Verb: VerbNone}, {Agent: "coder", Verb: VerbNone}, {Agent: "tester", Verb: VerbResume}},
		},
		{
			name: "terminated agents do not count: the agent is created again",
			want: want,
			live: func() []Agent {
				l := synced()
				l[0].Status = StatusTerminated
				return l
			},
			steps: []step{{Agent: "lead", Verb: VerbCreate}, {Agent: "coder", Verb: VerbUpdate, Drift: true, Paths: []string{"reportsTo"},
				FromTos: map[string][2]any{"reportsTo": {"id:id-lead", "lead"}}}, {Agent: "tester", Verb: VerbNone}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(Plan(tt.want, tt.live()))
			if d := cmp.Diff(tt.steps, got); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

func ptrAgent(name, reportsTo string) config.Agent {
	return config.Agent{Name: name, Paperclip: config.PaperclipAgent{ReportsTo: reportsTo}}
}
