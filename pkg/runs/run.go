package runs

import (
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

// Run is an accepted run request: valid against the Run schema and the
// loaded config, with its effective settings resolved.
type Run struct {
	// Paths locates the request's files in the spool directory.
	Paths Paths
	// RequestFile is the path of the request file.
	RequestFile string
	// ModTime is the request file's modification time; runs of an agent
	// start in (ModTime, Name) order.
	ModTime time.Time
	// Request is the parsed request with the schema's defaults.
	Request *config.RunRequest
	// RunID is the request's runId, else its name.
	RunID string
	// Model is the config the run was accepted against.
	Model *config.Model
	// Company and Agent point into Model.
	Company *config.Company
	Agent   *config.Agent
	// Timeout is the run's deadline: the request's timeoutSec, else the
	// agent's, else the company's jobs activeDeadlineSeconds. Zero means
	// none.
	Timeout time.Duration
	// TimeoutSource says which setting Timeout came from, for messages.
	TimeoutSource string
	// Grace is how long a stopped run has between SIGTERM and SIGKILL.
	Grace time.Duration
	// Adapter is the agent's adapter.
	Adapter adapters.Adapter
	// Invocation is the agent CLI invocation, checked at admission; the
	// executor sets WorkDir.
	Invocation adapters.Invocation
	// PreviousUsage is the cumulative usage of the resumed session after
	// its previous run, when the daemon knows it; the daemon sets it right
	// before Start and Adopt.
	PreviousUsage *result.Usage
}

// Name is the request's base name, the key of the run in the spool.
func (r *Run) Name() string { return r.Paths.Name }

// PaperclipAgentID is the agent's PAPERCLIP_AGENT_ID: the request's
// paperclip.agentId, else the pcsync agent name.
func (r *Run) PaperclipAgentID() string {
	if p := r.Request.Paperclip; p != nil && p.AgentID != "" {
		return p.AgentID
	}
	return r.Agent.Name
}

// APIKey is the run's Paperclip JWT (PAPERCLIP_API_KEY), "" when the
// request has none. It is a secret.
func (r *Run) APIKey() string {
	if p := r.Request.Paperclip; p != nil {
		return p.APIKey.Reveal()
	}
	return ""
}

// HasCallback reports whether the request carries Paperclip call-back
// credentials (a paperclip block), so that the agent gets
// PAPERCLIP_API_URL and PAPERCLIP_API_KEY.
func (r *Run) HasCallback() bool { return r.Request.Paperclip != nil }

// AgentKey identifies the agent whose concurrency the run counts against.
func (r *Run) AgentKey() AgentKey {
	return AgentKey{Company: r.Company.Slug(), Agent: r.Agent.Name}
}

// NewResult returns a result identifying the run, for the executor to fill.
func (r *Run) NewResult() result.RunResult {
	return result.New(r.RunID, r.Company.Slug(), r.Agent.Name, string(r.Agent.Adapter))
}

// LogAttrs are the attributes every log line about the run carries.
func (r *Run) LogAttrs() []any {
	return []any{slog.String("runId", r.RunID), slog.String("name", r.Name()),
		slog.String("company", r.Company.Slug()), slog.String("agent", r.Agent.Name)}
}

// AgentKey names an agent of a company.
type AgentKey struct {
	Company string
	Agent   string
}

// String renders "company/agent".
func (k AgentKey) String() string { return k.Company + "/" + k.Agent }
