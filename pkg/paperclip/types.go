package paperclip

// AgentStatus is an agent's status in Paperclip (AGENT_STATUSES of
// @paperclipai/shared).
type AgentStatus string

// The agent statuses pcsync looks at.
const (
	StatusActive     AgentStatus = "active"
	StatusIdle       AgentStatus = "idle"
	StatusRunning    AgentStatus = "running"
	StatusPaused     AgentStatus = "paused"
	StatusError      AgentStatus = "error"
	StatusTerminated AgentStatus = "terminated"
)

// AdapterType is the adapter type of every agent pcsync manages: the pcsync
// adapter of integrations/paperclip.
const AdapterType = "pcsync"

// MarkerKey is the metadata key of pcsync's marker (config.PaperclipMarkerKey).
const MarkerKey = "pcsync"

// managedBy is the marker's managedBy value.
const managedBy = "pcsync"

// Agent is an agent as Paperclip's API returns it: the fields pcsync reads.
type Agent struct {
	ID                 string         `json:"id"`
	CompanyID          string         `json:"companyId"`
	Name               string         `json:"name"`
	Role               string         `json:"role"`
	Title              *string        `json:"title"`
	ReportsTo          *string        `json:"reportsTo"`
	Capabilities       *string        `json:"capabilities"`
	Status             AgentStatus    `json:"status"`
	AdapterType        string         `json:"adapterType"`
	AdapterConfig      map[string]any `json:"adapterConfig"`
	RuntimeConfig      map[string]any `json:"runtimeConfig"`
	BudgetMonthlyCents int64          `json:"budgetMonthlyCents"`
	Metadata           map[string]any `json:"metadata"`
	CreatedAt          string         `json:"createdAt"`
	// DefaultEnvironmentID is the environment the agent runs in.
	DefaultEnvironmentID *string `json:"defaultEnvironmentId"`
}

// Environment is a Paperclip environment as its API returns it: the fields
// pcsync reads.
type Environment struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Driver   string         `json:"driver"`
	Config   map[string]any `json:"config"`
	Metadata map[string]any `json:"metadata"`
}

// Marker is what pcsync keeps in a managed agent's metadata under MarkerKey.
type Marker struct {
	// ManagedBy is "pcsync".
	ManagedBy string `json:"managedBy"`
	// Agent is the pcsync agent name.
	Agent string `json:"agent"`
	// Hash identifies the declared fields pcsync last wrote; a field that
	// differs while the hash is the config's is drift (a hand edit).
	Hash string `json:"hash"`
	// Fields are the optional fields pcsync declared last time, so that one
	// no longer declared is reset.
	Fields []string `json:"fields,omitempty"`
	// Paused says pcsync paused the agent because the config no longer
	// declares it; declaring it again resumes it. An agent paused by hand is
	// left paused.
	Paused bool `json:"paused,omitempty"`
}

// marker reads an agent's marker; ok is false for agents pcsync does not
// manage.
func (a *Agent) marker() (Marker, bool) {
	raw, ok := a.Metadata[MarkerKey].(map[string]any)
	if !ok {
		return Marker{}, false
	}
	m := Marker{}
	m.ManagedBy, _ = raw["managedBy"].(string)
	m.Agent, _ = raw["agent"].(string)
	m.Hash, _ = raw["hash"].(string)
	m.Paused, _ = raw["paused"].(bool)
	if fs, ok := raw["fields"].([]any); ok {
		for _, f := range fs {
			if s, ok := f.(string); ok {
				m.Fields = append(m.Fields, s)
			}
		}
	}
	if m.ManagedBy != managedBy || m.Agent == "" {
		return Marker{}, false
	}
	return m, true
}

// value is the marker as a metadata value.
func (m Marker) value() map[string]any {
	v := map[string]any{"managedBy": managedBy, "agent": m.Agent, "hash": m.Hash}
	if len(m.Fields) > 0 {
		fs := make([]any, len(m.Fields))
		for i, f := range m.Fields {
			fs[i] = f
		}
		v["fields"] = fs
	}
	if m.Paused {
		v["paused"] = true
	}
	return v
}
