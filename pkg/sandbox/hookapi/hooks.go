package hookapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// The hooks: each turns its request into the sandbox.Manager's call and the call's
// outcome into its response.

func (a *API) validateConfig(_ context.Context, req *ValidateConfigRequest) (sandbox.ValidateConfigResponse, error) {
	return a.m.Validate(req.Config), nil
}

func (a *API) probe(ctx context.Context, req *ProbeRequest) (sandbox.ProbeResponse, error) {
	return a.m.Probe(ctx, req.Config), nil
}

func (a *API) acquireLease(ctx context.Context, req *AcquireLeaseRequest) (LeaseResponse, error) {
	cfg, errs := sandbox.ParseConfig(req.Config)
	if len(errs) > 0 {
		err := configRefusal(errs)
		a.m.AcquireRefused(err)
		return LeaseResponse{}, err
	}
	p := sandbox.AcquireParams{Config: cfg, CompanyID: req.CompanyID, EnvironmentID: req.EnvironmentID,
		RunID: req.RunID, AgentID: req.AgentID, AdapterType: req.AdapterType}
	if s := deref(req.RequestedExpiresAt); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return LeaseResponse{}, &sandbox.BadRequestError{Field: "requestedExpiresAt", Err: err}
		}
		p.RequestedExpiresAt = &t
	}
	info, err := a.m.Acquire(ctx, p)
	if err != nil {
		return LeaseResponse{}, err
	}
	return leaseResponse(info), nil
}

func (a *API) resumeLease(ctx context.Context, req *ResumeLeaseRequest) (LeaseResponse, error) {
	info, err := a.m.Resume(ctx, req.ProviderLeaseID)
	if err != nil {
		return LeaseResponse{}, err
	}
	return leaseResponse(info), nil
}

func (a *API) releaseLease(ctx context.Context, req *ReleaseLeaseRequest) (*ReleaseLeaseResponse, error) {
	return a.release(ctx, req, req.CancelActiveWork)
}

func (a *API) destroyLease(ctx context.Context, req *ReleaseLeaseRequest) (*ReleaseLeaseResponse, error) {
	return a.release(ctx, req, true)
}

// release ends the request's lease; no receipt (null) when no lease was
// made.
func (a *API) release(ctx context.Context, req *ReleaseLeaseRequest, cancel bool) (*ReleaseLeaseResponse, error) {
	id := deref(req.ProviderLeaseID)
	if id == "" {
		return nil, nil
	}
	ns, _ := req.LeaseMetadata["namespace"].(string)
	state, err := a.m.Release(ctx, sandbox.ReleaseParams{ID: id, Cancel: cancel, Namespace: ns})
	if err != nil {
		return nil, err
	}
	return &ReleaseLeaseResponse{ProviderLeaseID: id, State: state}, nil
}

func (a *API) realizeWorkspace(_ context.Context, req *RealizeWorkspaceRequest) (RealizeWorkspaceResponse, error) {
	cwd, err := a.m.Workspace(req.Lease.ID())
	return RealizeWorkspaceResponse{Cwd: cwd}, err
}

func (a *API) runCancelled(ctx context.Context, req *RunCancelledRequest) (RunCancelledResponse, error) {
	n, err := a.m.CancelRun(ctx, req.RunID)
	return RunCancelledResponse{Released: n}, err
}

// runStarted begins the started run's lease (sandbox.Manager.Prestart); a config
// that does not parse begins none, and is no error: the run's acquire
// reports it.
func (a *API) runStarted(_ context.Context, req *RunStartedRequest) (RunStartedResponse, error) {
	if req.RunID == "" {
		return RunStartedResponse{}, &sandbox.BadRequestError{Field: "runId", Err: errors.New("empty")}
	}
	cfg, errs := sandbox.ParseConfig(req.Config)
	if len(errs) > 0 {
		return RunStartedResponse{Reason: configRefusal(errs).Error()}, nil
	}
	ok, why := a.m.Prestart(sandbox.AcquireParams{Config: cfg, CompanyID: req.CompanyID, EnvironmentID: req.EnvironmentID,
		RunID: req.RunID, AgentID: req.AgentID, AdapterType: req.AdapterType})
	if !ok {
		// Paperclip's run-started event and the run's acquire race: an
		// acquire that comes first makes the prestart moot, and says so.
		a.m.Logger().Info("sandbox lease not prestarted for its run", slog.String("run", req.RunID), slog.String("why", why))
	}
	return RunStartedResponse{Prestarted: ok, Reason: why}, nil
}

// execute runs the command and answers NDJSON: its output chunks as they
// come, then its result (the exit) or why it got none. The output is in
// the chunks only: the plugin joins them into the result Paperclip wants.
// A log line (a resume's notice) is for the run's log, not the output.
func (a *API) execute(w http.ResponseWriter, r *http.Request, body []byte) {
	var req ExecuteRequest
	if err := decode(body, &req); err != nil {
		refuse(w, err)
		return
	}
	if req.Command == "" {
		refuse(w, &sandbox.BadRequestError{Field: "command", Err: errors.New("empty")})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	line := ndjsonLines(w)
	stdout, stderr := &chunkLines{stream: "stdout", line: line}, &chunkLines{stream: "stderr", line: line}
	exit, err := a.m.ExecuteStream(r.Context(), sandbox.ExecParams{
		LeaseID: req.Lease.ID(), Command: req.Command, Args: req.Args, Cwd: req.Cwd,
		Env: req.Env, Stdin: req.Stdin, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond,
	}, sandbox.ExecStreams{Stdout: stdout, Stderr: stderr, Notice: func(n string) { _ = line(ExecuteLine{Log: n}) }})
	if err == nil {
		err = errors.Join(stdout.flush(), stderr.flush())
	}
	if err != nil {
		code := sandbox.CodeExecuteFailed
		var ue *sandbox.UserError
		if errors.As(err, &ue) {
			code = ue.Code
		}
		_ = line(ExecuteLine{Error: &HookError{Message: err.Error(), Code: code}})
		return
	}
	_ = line(ExecuteLine{Result: &ExecuteResult{ExitCode: exit.ExitCode, Signal: nullable(exit.Signal), TimedOut: exit.TimedOut}})
}

// ndjsonLines writes each line it is given to w, flushed.
func ndjsonLines(w http.ResponseWriter) func(ExecuteLine) error {
	fl, _ := w.(http.Flusher)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(l ExecuteLine) error {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(l); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
}

// chunkLines writes each chunk of one output stream as an NDJSON line. A
// UTF-8 sequence cut at a chunk's end waits for the next chunk (or flush),
// so that a line's text is whole characters: JSON would turn half of one
// into U+FFFD, and the plugin joins the lines into the whole output.
type chunkLines struct {
	stream string
	line   func(ExecuteLine) error
	carry  []byte
}

func (c *chunkLines) Write(p []byte) (int, error) {
	b := p
	if len(c.carry) > 0 {
		b = append(c.carry, p...)
		c.carry = nil
	}
	n := wholeRunes(b)
	if n < len(b) {
		c.carry = append([]byte(nil), b[n:]...)
	}
	if n > 0 {
		if err := c.line(chunkLine(c.stream, b[:n])); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes what is left of a cut sequence.
func (c *chunkLines) flush() error {
	if len(c.carry) == 0 {
		return nil
	}
	b := c.carry
	c.carry = nil
	return c.line(chunkLine(c.stream, b))
}

// wholeRunes is the length of b without an incomplete UTF-8 sequence at
// its end, one that more bytes could complete.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// chunkLine is an output chunk of stream ("stdout" or "stderr").
func chunkLine(stream string, chunk []byte) ExecuteLine {
	if stream == "stderr" {
		return ExecuteLine{Stderr: string(chunk)}
	}
	return ExecuteLine{Stdout: string(chunk)}
}

// configRefusal joins a config's field errors into one refusal
// (config_invalid), worded as the Manager words its own.
func configRefusal(errs []sandbox.ConfigError) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &sandbox.UserError{Code: sandbox.CodeConfigInvalid, Message: strings.Join(msgs, "; ")}
}

func leaseResponse(info sandbox.LeaseInfo) LeaseResponse {
	return LeaseResponse{
		ProviderLeaseID: info.ID,
		ExpiresAt:       info.ExpiresAt.UTC().Format(time.RFC3339),
		Metadata:        info.Metadata,
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
