package result

import "time"

// APIVersion and Kind identify a result document.
const (
	APIVersion = "pcsync.io/v1alpha1"
	Kind       = "RunResult"
)

// Status is the final state of a run.
type Status string

// The statuses a run can end in.
const (
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusTimedOut  Status = "timed_out"
	StatusCancelled Status = "cancelled"
	StatusRejected  Status = "rejected"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled, StatusRejected:
		return true
	}
	return false
}

// ErrorCode classifies why a run did not succeed.
type ErrorCode string

// The error codes of docs/design.md.
const (
	ErrInvalidRequest ErrorCode = "invalid_request"
	// ErrCompanySuspended: the run's company has spec.suspend; the
	// request is rejected and may be dropped again once it is resumed.
	ErrCompanySuspended ErrorCode = "company_suspended"
	ErrAuthRequired     ErrorCode = "auth_required"
	ErrQuotaExceeded    ErrorCode = "quota_exceeded"
	// ErrBudgetExceeded: the company's egress proxy refused the CLI's
	// model call because a budget of spec.budget or the agent's is spent.
	ErrBudgetExceeded      ErrorCode = "budget_exceeded"
	ErrRateLimited         ErrorCode = "rate_limited"
	ErrUpstreamUnavailable ErrorCode = "upstream_unavailable"
	ErrModelNotFound       ErrorCode = "model_not_found"
	ErrMaxTurns            ErrorCode = "max_turns"
	ErrSessionNotFound     ErrorCode = "session_not_found"
	ErrTimeout             ErrorCode = "timeout"
	ErrOOMKilled           ErrorCode = "oom_killed"
	ErrImagePullFailed     ErrorCode = "image_pull_failed"
	ErrUnschedulable       ErrorCode = "unschedulable"
	ErrAgentFailed         ErrorCode = "agent_failed"
	ErrCancelled           ErrorCode = "cancelled"
	ErrInternal            ErrorCode = "internal"
)

// AllErrorCodes lists every error code, in the order of docs/design.md.
func AllErrorCodes() []ErrorCode {
	return []ErrorCode{
		ErrInvalidRequest, ErrCompanySuspended, ErrAuthRequired, ErrQuotaExceeded, ErrBudgetExceeded, ErrRateLimited,
		ErrUpstreamUnavailable, ErrModelNotFound, ErrMaxTurns, ErrSessionNotFound,
		ErrTimeout, ErrOOMKilled, ErrImagePullFailed, ErrUnschedulable,
		ErrAgentFailed, ErrCancelled, ErrInternal,
	}
}

// Valid reports whether c is one of the error codes of docs/design.md.
func (c ErrorCode) Valid() bool {
	for _, k := range AllErrorCodes() {
		if c == k {
			return true
		}
	}
	return false
}

// UsageBasis says what period a Usage covers.
type UsageBasis string

// The usage bases.
const (
	// UsagePerRun means the figures cover this run only.
	UsagePerRun UsageBasis = "per_run"
	// UsageSessionCumulative means the figures are the session's running
	// totals (the CLI reported totals and the previous total was unknown).
	UsageSessionCumulative UsageBasis = "session_cumulative"
)

// Usage is the token accounting, the same for every CLI:
// InputTokens excludes cache reads, CachedInputTokens are cache reads,
// CacheCreationInputTokens are cache writes (0 where the CLI has none), and
// OutputTokens include reasoning.
type Usage struct {
	InputTokens              int64 `json:"inputTokens"`
	CachedInputTokens        int64 `json:"cachedInputTokens"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens"`
	OutputTokens             int64 `json:"outputTokens"`
}

// Add returns the field-by-field sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		CachedInputTokens:        u.CachedInputTokens + v.CachedInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
	}
}

// Job names the Kubernetes objects of a run executed as a Job.
type Job struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Pod       string `json:"pod"`
	// TimedBy says where the run's startedAt and finishedAt come from
	// (TimedByInit, TimedByWatch, TimedByKubelet); null when the agent
	// container never started.
	TimedBy *TimedBy `json:"timedBy"`
}

// TimedBy names the source of a Kubernetes run's times.
type TimedBy string

const (
	// TimedByInit: pcsync init's record of the CLI's start and end, to the
	// millisecond (pcsync's own images, where it is the container's PID 1).
	TimedByInit TimedBy = "pcsync-init"
	// TimedByWatch: when the daemon's watch saw the agent container start
	// and end, to the millisecond on the daemon's clock (images without
	// pcsync).
	TimedByWatch TimedBy = "watch"
	// TimedByKubelet: the container's times as the kubelet reports them, in
	// whole seconds: the daemon saw neither change happen (it adopted the
	// run after the container had started).
	TimedByKubelet TimedBy = "kubelet"
)

// RunResult is the content of <name>.result.json. Pointer fields are written
// as null when unknown.
type RunResult struct {
	APIVersion   string      `json:"apiVersion"`
	Kind         string      `json:"kind"`
	RunID        string      `json:"runId"`
	Company      string      `json:"company"`
	Agent        string      `json:"agent"`
	Adapter      string      `json:"adapter"`
	Status       Status      `json:"status"`
	ExitCode     *int        `json:"exitCode"`
	Signal       *string     `json:"signal"`
	TimedOut     bool        `json:"timedOut"`
	ErrorCode    *ErrorCode  `json:"errorCode"`
	ErrorMessage *string     `json:"errorMessage"`
	SessionID    *string     `json:"sessionId"`
	Usage        *Usage      `json:"usage"`
	UsageBasis   *UsageBasis `json:"usageBasis"`
	CostUSD      *float64    `json:"costUsd"`
	Summary      *string     `json:"summary"`
	Model        *string     `json:"model"`
	NumTurns     *int        `json:"numTurns"`
	StartedAt    *time.Time  `json:"startedAt"`
	FinishedAt   *time.Time  `json:"finishedAt"`
	DurationMs   *int64      `json:"durationMs"`
	Job          *Job        `json:"job"`
}

// New returns a result with the type fields set and the run identified.
func New(runID, company, agent, adapter string) RunResult {
	return RunResult{APIVersion: APIVersion, Kind: Kind, RunID: runID, Company: company, Agent: agent, Adapter: adapter}
}

// Fail sets the status, error code and message together.
func (r *RunResult) Fail(status Status, code ErrorCode, msg string) {
	r.Status = status
	r.ErrorCode = &code
	r.ErrorMessage = &msg
}

// SetTimes records start and finish and derives DurationMs.
func (r *RunResult) SetTimes(started, finished time.Time) {
	s, f := started.UTC(), finished.UTC()
	r.StartedAt, r.FinishedAt = &s, &f
	d := f.Sub(s).Milliseconds()
	r.DurationMs = &d
}

// MapStrings replaces every string field of r (the identity fields, the
// signal, error code and message, session, summary, model and the Job's
// names) with f of it: the one place that knows them all, for redaction.
func (r *RunResult) MapStrings(f func(string) string) {
	for _, p := range []*string{&r.APIVersion, &r.Kind, &r.RunID, &r.Company, &r.Agent, &r.Adapter} {
		*p = f(*p)
	}
	r.Status = Status(f(string(r.Status)))
	for _, p := range []*string{r.Signal, r.ErrorMessage, r.SessionID, r.Summary, r.Model} {
		if p != nil {
			*p = f(*p)
		}
	}
	if r.ErrorCode != nil {
		c := ErrorCode(f(string(*r.ErrorCode)))
		r.ErrorCode = &c
	}
	if r.UsageBasis != nil {
		b := UsageBasis(f(string(*r.UsageBasis)))
		r.UsageBasis = &b
	}
	if r.Job != nil {
		j := *r.Job
		j.Namespace, j.Name, j.Pod = f(j.Namespace), f(j.Name), f(j.Pod)
		if j.TimedBy != nil {
			b := TimedBy(f(string(*j.TimedBy)))
			j.TimedBy = &b
		}
		r.Job = &j
	}
}

// Ptr returns a pointer to v; a convenience for the optional fields.
func Ptr[T any](v T) *T { return &v }
