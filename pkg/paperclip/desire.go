package paperclip

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/pcsync/pcsync/pkg/config"
)

// DesiredCompany is what one opted-in company wants in Paperclip.
type DesiredCompany struct {
	// Slug is the company's metadata.name; ID its Paperclip id (spec.id).
	Slug, ID string
	// Agents are in dependency order: every agent after the one it reports to.
	Agents []DesiredAgent
	// Environments are the company's sandbox environments of provider
	// "pcsync".
	Environments []DesiredEnvironment
}

// DesiredAgent is one agent as the config declares it in Paperclip.
type DesiredAgent struct {
	// Name is the pcsync agent name, which is also its name in Paperclip.
	Name string
	// Fields are the declared values by field path ("title",
	// "adapterConfig.spoolDir", "runtimeConfig.heartbeat.intervalSec",
	// "metadata.team"); reportsTo holds the manager's pcsync name. Values
	// are JSON values (numbers as float64).
	Fields map[string]any
	// Optional are the declared paths the config may leave out (reset when
	// no longer declared), sorted.
	Optional []string
	// Hash identifies Fields.
	Hash string
}

// fixedFields are the paths every managed agent declares: a pcsync-adapter
// agent, or a stock-adapter agent in a sandbox environment.
var (
	fixedFields    = []string{"name", "role", "adapterType", "adapterConfig.spoolDir", "adapterConfig.agent"}
	fixedEnvFields = []string{"name", "role", "adapterType", "defaultEnvironmentId"}
)

// Desire returns the companies of m whose agents pcsync manages in
// Paperclip, sorted by slug (as m is).
func Desire(m *config.Model) []DesiredCompany {
	pc := m.Settings.Spec.Paperclip
	if pc == nil {
		return nil
	}
	var out []DesiredCompany
	for i := range m.Companies {
		c := &m.Companies[i]
		if !c.Spec.Paperclip.Manage {
			continue
		}
		dc := DesiredCompany{Slug: c.Metadata.Name, ID: c.Spec.ID, Environments: desireEnvironments(c)}
		for j := range c.Spec.Agents {
			dc.Agents = append(dc.Agents, desireAgent(&c.Spec.Agents[j], pc.SpoolDir))
		}
		dc.Agents = dependencyOrder(dc.Agents)
		out = append(out, dc)
	}
	return out
}

func desireAgent(a *config.Agent, spoolDir string) DesiredAgent {
	p := a.Paperclip
	f := map[string]any{
		"name": a.Name, "role": p.Role, "adapterType": AdapterType,
		"adapterConfig.spoolDir": spoolDir, "adapterConfig.agent": a.Name,
	}
	fixed := fixedFields
	if p.Environment != "" {
		// A stock adapter in pcsync's sandbox environment: its own type
		// and config, the environment's id once known.
		f = map[string]any{
			"name": a.Name, "role": p.Role, "adapterType": stockAdapterType(a.Adapter),
			"defaultEnvironmentId": envPlaceholder + p.Environment,
		}
		for k, v := range p.AdapterConfig {
			if k == "env" {
				v = envBindings(v)
			}
			f["adapterConfig."+k] = normalize(v)
		}
		fixed = fixedEnvFields
	}
	if p.Title != nil {
		f["title"] = *p.Title
	}
	if p.ReportsTo != "" {
		f["reportsTo"] = p.ReportsTo
	}
	if p.Capabilities != nil {
		f["capabilities"] = *p.Capabilities
	}
	if p.BudgetMonthlyCents != nil {
		f["budgetMonthlyCents"] = float64(*p.BudgetMonthlyCents)
	}
	if rc := p.RuntimeConfig; rc != nil && rc.Heartbeat != nil {
		h := rc.Heartbeat
		if h.Enabled != nil {
			f["runtimeConfig.heartbeat.enabled"] = *h.Enabled
		}
		if h.IntervalSec != nil {
			f["runtimeConfig.heartbeat.intervalSec"] = float64(*h.IntervalSec)
		}
		if h.WakeOnDemand != nil {
			f["runtimeConfig.heartbeat.wakeOnDemand"] = *h.WakeOnDemand
		}
		if h.MaxConcurrentRuns != nil {
			f["runtimeConfig.heartbeat.maxConcurrentRuns"] = float64(*h.MaxConcurrentRuns)
		}
	}
	for k, v := range p.Metadata {
		if k != MarkerKey { // the config cannot declare it; pcsync owns it
			f["metadata."+k] = normalize(v)
		}
	}
	d := DesiredAgent{Name: a.Name, Fields: f}
	for path := range f {
		if !slices.Contains(fixed, path) {
			d.Optional = append(d.Optional, path)
		}
	}
	slices.Sort(d.Optional)
	d.Hash = hashFields(f)
	return d
}

// envBindings writes an adapterConfig.env of plain strings the way
// Paperclip stores it ({"KEY": {"type": "plain", "value": "…"}}), so that
// it compares with the live value; other values are kept as given.
func envBindings(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		if s, ok := val.(string); ok {
			out[k] = map[string]any{"type": "plain", "value": s}
		} else {
			out[k] = val
		}
	}
	return out
}

// hashFields is a short digest of the fields (encoding/json sorts map keys).
func hashFields(f map[string]any) string {
	b, _ := json.Marshal(f)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// normalize turns a value into what JSON decoding gives (float64 numbers,
// map[string]any, []any), so that it compares with live values.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// dependencyOrder sorts agents so that each comes after the agent it
// reports to, keeping the config's order otherwise (the config has no
// cycles and no unknown names; anything else keeps its place at the end).
func dependencyOrder(agents []DesiredAgent) []DesiredAgent {
	byName := make(map[string]int, len(agents))
	for i, a := range agents {
		byName[a.Name] = i
	}
	placed := make([]bool, len(agents))
	out := make([]DesiredAgent, 0, len(agents))
	var place func(i int, depth int)
	place = func(i, depth int) {
		if placed[i] || depth > len(agents) {
			return
		}
		if to, ok := agents[i].Fields["reportsTo"].(string); ok {
			if j, ok := byName[to]; ok && j != i {
				place(j, depth+1)
			}
		}
		if !placed[i] {
			placed[i] = true
			out = append(out, agents[i])
		}
	}
	for i := range agents {
		place(i, 0)
	}
	return out
}
