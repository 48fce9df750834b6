package paperclip

import (
	"cmp"
	"reflect"
	"slices"
)

// Verb is what an action does to an agent.
type Verb string

// The verbs of a plan.
const (
	// VerbCreate creates a declared agent that Paperclip does not have.
	VerbCreate Verb = "create"
	// VerbUpdate patches the fields of a managed agent that differ.
	VerbUpdate Verb = "update"
	// VerbResume resumes an agent pcsync paused and the config declares
	// again (patching what differs first).
	VerbResume Verb = "resume"
	// VerbPause pauses a managed agent the config no longer declares.
	VerbPause Verb = "pause"
	// VerbNone: the agent is as declared.
	VerbNone Verb = "unchanged"
)

// Change is one field an action changes; From is the live value (reportsTo
// by the manager's name, or "id:<id>" for an agent pcsync does not manage),
// To the declared one; nil is null or absent.
type Change struct {
	Path     string
	From, To any
}

// Action is what a plan does to one agent.
type Action struct {
	// Agent is the pcsync agent name; ID the Paperclip id (empty for a create).
	Agent string
	ID    string
	Verb  Verb
	// Changes are the fields written, sorted by path; for a create, every
	// declared field.
	Changes []Change
	// Drift says the live agent was changed by someone else: the marker
	// holds the config's hash, yet fields differ.
	Drift bool

	desired *DesiredAgent
	live    *Agent
}

// CompanyPlan is the plan of one company: its actions in the order they
// run (creates and updates in dependency order, then pauses).
type CompanyPlan struct {
	Slug, ID string
	Actions  []Action
	// Managed is the number of live agents pcsync manages in the company
	// (not terminated), for the pause guard.
	Managed int
	// Notes are findings that change nothing (an agent marked twice).
	Notes []string
}

// Plan compares what a company wants with its live agents.
func Plan(want DesiredCompany, live []Agent) CompanyPlan {
	p := CompanyPlan{Slug: want.Slug, ID: want.ID}
	managed, names, notes := managedAgents(live)
	p.Notes = notes
	p.Managed = len(managed)
	declared := map[string]bool{}
	for i := range want.Agents {
		d := &want.Agents[i]
		declared[d.Name] = true
		p.Actions = append(p.Actions, planAgent(d, managed[d.Name], names))
	}
	var pauses []Action
	for name, a := range managed {
		if declared[name] {
			continue
		}
		if a.Status == StatusPaused {
			continue // already paused (by pcsync or by hand)
		}
		pauses = append(pauses, Action{Agent: name, ID: a.ID, Verb: VerbPause, live: a,
			Changes: []Change{{Path: "status", From: string(a.Status), To: string(StatusPaused)}}})
	}
	slices.SortFunc(pauses, func(x, y Action) int { return cmp.Compare(x.Agent, y.Agent) })
	p.Actions = append(p.Actions, pauses...)
	return p
}

// managedAgents returns the live agents pcsync manages (marked, not
// terminated) by pcsync agent name, the names of their ids, and a note for
// each agent that carries a marker another one carries too.
func managedAgents(live []Agent) (managed map[string]*Agent, names map[string]string, notes []string) {
	managed = map[string]*Agent{} // by pcsync agent name
	names = map[string]string{}   // id → pcsync agent name, managed agents
	for i := range live {
		a := &live[i]
		m, ok := a.marker()
		if !ok || a.Status == StatusTerminated {
			continue
		}
		if prev, dup := managed[m.Agent]; dup {
			// Two agents carry the same marker (copied by hand?): the
			// older one is pcsync's; the other is left alone.
			keep, other := prev, a
			if cmp.Compare(a.CreatedAt, prev.CreatedAt) < 0 {
				keep, other = a, prev
			}
			managed[m.Agent] = keep
			delete(names, other.ID)
			names[keep.ID] = m.Agent
			notes = append(notes, "agents "+keep.ID+" and "+other.ID+" both carry pcsync's marker for "+
				m.Agent+"; "+other.ID+" is left alone")
			continue
		}
		managed[m.Agent] = a
		names[a.ID] = m.Agent
	}
	return managed, names, notes
}

// planAgent is the action for the declared agent d, whose live agent is a
// (nil: none yet).
func planAgent(d *DesiredAgent, a *Agent, names map[string]string) Action {
	if a == nil {
		act := Action{Agent: d.Name, Verb: VerbCreate, desired: d}
		for _, path := range sortedPaths(d.Fields) {
			act.Changes = append(act.Changes, Change{Path: path, To: d.Fields[path]})
		}
		return act
	}
	m, _ := a.marker()
	act := Action{Agent: d.Name, ID: a.ID, Verb: VerbNone, desired: d, live: a}
	act.Changes = agentChanges(d, a, m, names)
	act.Drift = len(act.Changes) > 0 && m.Hash == d.Hash
	switch {
	case m.Paused && a.Status == StatusPaused:
		act.Verb = VerbResume
	case len(act.Changes) > 0 || m.Hash != d.Hash || !slices.Equal(m.Fields, d.Optional) || m.Paused:
		// The marker itself is out of date: written with the changes.
		act.Verb = VerbUpdate
	}
	return act
}

// agentChanges returns the changes, by path, that make the live agent a,
// whose marker is m, what d declares: each declared field that differs, and
// each field pcsync set before and d no longer declares, back to its reset
// value.
func agentChanges(d *DesiredAgent, a *Agent, m Marker, names map[string]string) []Change {
	var changes []Change
	for _, path := range sortedPaths(d.Fields) {
		want := d.Fields[path]
		got := liveValue(a, path)
		if path == "reportsTo" {
			got = managerName(got, names)
		}
		// A redacted live value cannot be compared: it is taken as
		// declared unless the declaration changed since pcsync last
		// wrote it (the marker's hash).
		if !equal(got, want) || (m.Hash != d.Hash && !reflect.DeepEqual(normalize(got), normalize(want))) {
			changes = append(changes, Change{Path: path, From: got, To: want})
		}
	}
	for _, path := range m.Fields {
		if _, still := d.Fields[path]; still {
			continue
		}
		got, want := liveValue(a, path), resetValue(path)
		if path == "reportsTo" {
			got = managerName(got, names)
		}
		if !equal(got, want) {
			changes = append(changes, Change{Path: path, From: got, To: want})
		}
	}
	slices.SortFunc(changes, func(x, y Change) int { return cmp.Compare(x.Path, y.Path) })
	return changes
}

// managerName turns a live reportsTo id into the manager's pcsync name, or
// "id:<id>" when pcsync does not manage it.
func managerName(id any, names map[string]string) any {
	s, ok := id.(string)
	if !ok || s == "" {
		return nil
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "id:" + s
}

// equal compares a live value with a declared one. Paperclip's API shows
// secret-looking strings (adapterConfig.env values) as redacted: a redacted
// live string matches any declared string, since it cannot be read.
func equal(live, want any) bool { return sameValue(normalize(live), normalize(want)) }

// redactedValue is how Paperclip's API shows a value it keeps secret.
const redactedValue = "***REDACTED***"

func sameValue(live, want any) bool {
	switch l := live.(type) {
	case string:
		if l == redactedValue {
			_, ok := want.(string)
			return ok
		}
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok || len(w) != len(l) {
			return false
		}
		for k, lv := range l {
			wv, ok := w[k]
			if !ok || !sameValue(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) != len(l) {
			return false
		}
		for i := range l {
			if !sameValue(l[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(live, want)
}

func sortedPaths(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Writes says whether the action changes Paperclip.
func (a *Action) Writes() bool { return a.Verb != VerbNone }
