package hookapi

import "github.com/pcsync/pcsync/pkg/sandbox"

// The hook contract: what the plugin posts to /v1/hooks/<hook> (Paperclip's
// params as they are) and what the daemon answers. Fields Paperclip passes
// that the daemon does not read are not listed; decoding ignores them.

// Hook names a hook the API serves.
type Hook string

// The hooks.
const (
	HookValidateConfig   Hook = "validateConfig"
	HookProbe            Hook = "probe"
	HookAcquireLease     Hook = "acquireLease"
	HookResumeLease      Hook = "resumeLease"
	HookReleaseLease     Hook = "releaseLease"
	HookDestroyLease     Hook = "destroyLease"
	HookRealizeWorkspace Hook = "realizeWorkspace"
	HookExecute          Hook = "execute"
	// HookRunCancelled is the plugin's own: Paperclip's agent.run.cancelled
	// event, forwarded.
	HookRunCancelled Hook = "runCancelled"
	// HookRunStarted is the plugin's own too: Paperclip's
	// agent.run.started event, forwarded with the params of the agent's
	// last acquireLease, so that the run's lease begins before Paperclip
	// asks for it (sandbox.Manager.Prestart).
	HookRunStarted Hook = "runStarted"
)

// HookBase are the params every environment hook shares.
type HookBase struct {
	DriverKey     string `json:"driverKey"`
	CompanyID     string `json:"companyId"`
	EnvironmentID string `json:"environmentId"`
	// Config is the environment's config as Paperclip stores it, decoded
	// field by field by sandbox.ParseConfig.
	Config map[string]any `json:"config"`
}

// LeaseRef is a lease as Paperclip passes it back to a hook.
type LeaseRef struct {
	ProviderLeaseID *string        `json:"providerLeaseId"`
	Metadata        map[string]any `json:"metadata"`
}

// ID is the lease's provider id, "" when none.
func (r LeaseRef) ID() string { return deref(r.ProviderLeaseID) }

// ValidateConfigRequest are validateConfig's params.
type ValidateConfigRequest struct {
	HookBase
}

// ProbeRequest are probe's params.
type ProbeRequest struct {
	HookBase
}

// AcquireLeaseRequest are acquireLease's params.
type AcquireLeaseRequest struct {
	HookBase
	RunID       string `json:"runId"`
	AgentID     string `json:"agentId"`
	AdapterType string `json:"adapterType"`
	// RequestedExpiresAt is RFC 3339; null or "" for none.
	RequestedExpiresAt *string `json:"requestedExpiresAt"`
}

// LeaseResponse is the answer of acquireLease and resumeLease.
type LeaseResponse struct {
	ProviderLeaseID string `json:"providerLeaseId"`
	// ExpiresAt is RFC 3339, UTC.
	ExpiresAt string         `json:"expiresAt"`
	Metadata  map[string]any `json:"metadata"`
}

// ResumeLeaseRequest are resumeLease's params.
type ResumeLeaseRequest struct {
	HookBase
	ProviderLeaseID string `json:"providerLeaseId"`
}

// ReleaseLeaseRequest are the params of releaseLease and destroyLease.
type ReleaseLeaseRequest struct {
	HookBase
	// ProviderLeaseID is null or "" when no lease was made.
	ProviderLeaseID *string `json:"providerLeaseId"`
	// LeaseMetadata is what acquire answered; its namespace finds the pod
	// of a lease the daemon does not hold.
	LeaseMetadata    map[string]any `json:"leaseMetadata"`
	CancelActiveWork bool           `json:"cancelActiveWork"`
}

// ReleaseLeaseResponse is the termination receipt (null when no lease was
// made).
type ReleaseLeaseResponse struct {
	ProviderLeaseID string               `json:"providerLeaseId"`
	State           sandbox.ReceiptState `json:"state"`
}

// RealizeWorkspaceRequest are realizeWorkspace's params.
type RealizeWorkspaceRequest struct {
	HookBase
	Lease LeaseRef `json:"lease"`
}

// RealizeWorkspaceResponse is realizeWorkspace's answer.
type RealizeWorkspaceResponse struct {
	Cwd string `json:"cwd"`
}

// ExecuteRequest are execute's params.
type ExecuteRequest struct {
	HookBase
	Lease   LeaseRef          `json:"lease"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	// Stdin is fed to the command, then closed; null for none.
	Stdin     *string `json:"stdin"`
	TimeoutMs int64   `json:"timeoutMs"`
}

// ExecuteLine is one NDJSON line of execute's answer: an output chunk
// (Stdout or Stderr; each whole UTF-8 characters) or pcsync's own word
// for the run's log (Log: not the command's output), then one Result or
// Error.
type ExecuteLine struct {
	Stdout string         `json:"stdout,omitempty"`
	Stderr string         `json:"stderr,omitempty"`
	Log    string         `json:"log,omitempty"`
	Result *ExecuteResult `json:"result,omitempty"`
	Error  *HookError     `json:"error,omitempty"`
}

// ExecuteResult is how an execute ended: its exit, not its output, which
// went in the chunk lines before it. Paperclip's
// PluginEnvironmentExecuteResult also has the whole stdout and stderr
// (required strings, read by Paperclip's adapters): the plugin joins the
// chunks into them.
type ExecuteResult struct {
	// ExitCode is null when a signal ended the command.
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
}

// RunCancelledRequest are runCancelled's params.
type RunCancelledRequest struct {
	RunID     string  `json:"runId"`
	CompanyID *string `json:"companyId"`
}

// RunCancelledResponse says how many leases the cancel ended.
type RunCancelledResponse struct {
	Released int `json:"released"`
}

// RunStartedRequest are runStarted's params: acquireLease's params as
// the agent's last acquire had them, with the started run's id.
type RunStartedRequest struct {
	HookBase
	RunID       string `json:"runId"`
	AgentID     string `json:"agentId"`
	AdapterType string `json:"adapterType"`
}

// RunStartedResponse is runStarted's answer: whether a lease was begun
// for the run, and if not, why.
type RunStartedResponse struct {
	Prestarted bool   `json:"prestarted"`
	Reason     string `json:"reason,omitempty"`
}

// ErrorResponse is the body of any non-2xx answer.
type ErrorResponse struct {
	Error HookError `json:"error"`
}

// HookError is why a hook failed.
type HookError struct {
	Message string       `json:"message"`
	Code    sandbox.Code `json:"code"`
}
