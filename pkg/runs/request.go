package runs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

// DefaultMaxRequestBytes caps how much of a request file is read: twice the
// 1 MiB prompt limit, room for JSON escapes and the other fields.
const DefaultMaxRequestBytes = 2 << 20

// Rejection is why a request is not run. Its message goes into the
// rejected result, so it names the problem and never holds a secret.
type Rejection struct {
	// Message says what is wrong, one problem a line, positioned
	// ("req.yaml:3:9: prompt: …") where the schema found it.
	Message string
	// RunID, Company and Agent are what the request said, as far as it
	// could be read; they identify the rejected result.
	RunID, Company, Agent string
	// Adapter is the agent's adapter when the agent is known.
	Adapter string
	// Code is the result's errorCode; "" is invalid_request.
	Code result.ErrorCode
}

// Error implements error.
func (r *Rejection) Error() string { return r.Message }

// openRequest opens a request file for reading through safefile: it does
// not follow a symbolic link (a link could make pcsync quote another file in
// its messages), does not block on a FIFO, and accepts only a regular file
// with one link (a hard link could be a file the spool's writer may not
// read).
func openRequest(path string) (*os.File, os.FileInfo, error) { return safefile.Open(path) }

// ReadRequestFile reads a request file as admission does (see openRequest),
// at most max bytes of path; tooLarge is set when the
// file holds more.
func ReadRequestFile(path string, max int64) (data []byte, fi os.FileInfo, tooLarge bool, err error) {
	f, fi, err := openRequest(path)
	if err != nil {
		return nil, nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fi, true, nil
	}
	return data, fi, false, nil
}

// ParseRequest validates the content of a request file against the Run
// schema and the config, and resolves the run's effective settings. file is
// the request's base name (it prefixes positioned messages), name the
// request name. It returns a *Rejection for a bad request.
func ParseRequest(m *config.Model, paths Paths, file string, data []byte) (*Run, error) {
	req, err := config.ParseRun(file, data)
	if err != nil {
		var errs *config.Errors
		msg := fmt.Sprintf("%s: %v", file, err)
		if errors.As(err, &errs) {
			msg = strings.Join(errs.Lines(), "\n")
		}
		// The run's JWT never goes into a message, even one that quotes
		// the request.
		return nil, &Rejection{Message: redactRequestKey(msg, nil, data), RunID: paths.Name}
	}
	run, err := resolveRequest(m, paths, file, req)
	var rej *Rejection
	if errors.As(err, &rej) {
		rej.Message = redactRequestKey(rej.Message, req, data)
	}
	return run, err
}

// resolveRequest checks a parsed request against the config and resolves
// the run's effective settings.
func resolveRequest(m *config.Model, paths Paths, file string, req *config.RunRequest) (*Run, error) {
	rej := &Rejection{RunID: req.RunID, Company: req.Company, Agent: req.Agent}
	if rej.RunID == "" {
		rej.RunID = paths.Name
	}
	co, msg := requestCompany(m, req)
	if msg != "" {
		rej.Message = file + ": " + msg
		return nil, rej
	}
	rej.Company = co.Slug()
	ag, ok := co.Agent(req.Agent)
	if !ok {
		rej.Message = fmt.Sprintf("%s: agent: company %q has no agent %q (agents: %s)", file, co.Slug(), req.Agent, agentList(co))
		return nil, rej
	}
	if lines := slices.Concat(checkContext(req.Context), checkPaperclip(req.Paperclip)); len(lines) > 0 {
		rej.Message = file + ": " + strings.Join(lines, "\n"+file+": ")
		return nil, rej
	}
	rej.Adapter = string(ag.Adapter)
	runID, msg := requestRunID(paths, req)
	if msg != "" {
		rej.Message = file + ": " + msg
		return nil, rej
	}
	if len(req.Prompt) == 0 || len(req.Prompt) > 1<<20 {
		rej.Message = fmt.Sprintf("%s: prompt: must hold 1 byte to 1 MiB (1048576 bytes), has %d", file, len(req.Prompt))
		return nil, rej
	}
	ad, err := adapters.Get(ag.Adapter)
	if err != nil {
		rej.Message = fmt.Sprintf("%s: agent: %v", file, err)
		return nil, rej
	}
	inv, msg := invocation(m, ag, req, ad)
	if msg != "" {
		rej.Message = file + ": " + msg
		return nil, rej
	}
	run := &Run{
		Paths:      paths,
		Request:    req,
		RunID:      runID,
		Model:      m,
		Company:    co,
		Agent:      ag,
		Grace:      time.Duration(ag.GraceSec) * time.Second,
		Adapter:    ad,
		Invocation: inv,
	}
	run.Timeout, run.TimeoutSource = runTimeout(m, co, ag, req)
	return run, nil
}

// requestRunID returns the run's id: the request's runId, or else the file's
// name; msg says why neither will do.
func requestRunID(paths Paths, req *config.RunRequest) (runID, msg string) {
	switch runID = req.RunID; {
	case runID == "" && !IsDNSLabel(paths.Name):
		return "", fmt.Sprintf("runId: no runId given and the file name %q is not a DNS-safe run id (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit); set runId or rename the file", paths.Name)
	case runID == "":
		return paths.Name, ""
	case !IsDNSLabel(runID):
		return "", fmt.Sprintf("runId: %q is not a DNS-safe run id (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)", runID)
	}
	return runID, ""
}

// invocation returns what the adapter ad is asked to run for the agent ag;
// msg says why the adapter cannot turn it into a safe command (a session id
// that looks like a flag): such a request is rejected now instead of
// failing later.
func invocation(m *config.Model, ag *config.Agent, req *config.RunRequest, ad adapters.Adapter) (_ adapters.Invocation, msg string) {
	inv := adapters.Invocation{
		Command:          m.Adapter(ag.Adapter).Command,
		Model:            ag.Model,
		Effort:           cmp.Or(ag.Effort, ag.Variant),
		MaxTurns:         ag.MaxTurnsPerRun,
		SessionID:        req.SessionID,
		InstructionsFile: ag.InstructionsFile,
		ExtraArgs:        ag.ExtraArgs,
		Prompt:           req.Prompt,
	}
	if err := ad.Check(inv); err != nil {
		field := ""
		var ie *adapters.InvocationError
		if errors.As(err, &ie) && ie.Field == adapters.FieldSessionID {
			field = "sessionId: " // the one field that comes from the request
		}
		return inv, fmt.Sprintf("%s%v", field, err)
	}
	return inv, ""
}

// runTimeout returns the run's timeout and where it comes from: the
// request's, the agent's, or the Jobs' active deadline (0: none).
func runTimeout(m *config.Model, co *config.Company, ag *config.Agent, req *config.RunRequest) (time.Duration, string) {
	switch {
	case req.TimeoutSec > 0:
		return time.Duration(req.TimeoutSec) * time.Second, "the request's timeoutSec"
	case ag.TimeoutSec > 0:
		return time.Duration(ag.TimeoutSec) * time.Second, "the agent's timeoutSec"
	}
	if d := m.Jobs(co).ActiveDeadlineSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second, "jobs.activeDeadlineSeconds"
	}
	return 0, ""
}

// LoadRequest reads and validates the request file at path.
func LoadRequest(m *config.Model, path string, maxBytes int64) (*Run, error) {
	base := filepath.Base(path)
	kind, name := Classify(base)
	if kind != KindRequest {
		return nil, fmt.Errorf("request %s: not a request file name (<name>.json, .yaml or .yml)", path)
	}
	paths := Paths{Spool: filepath.Dir(path), Name: name}
	data, fi, tooLarge, err := ReadRequestFile(path, maxBytes)
	var unsafe *safefile.UnsafeError
	switch {
	case errors.As(err, &unsafe):
		return nil, &Rejection{RunID: name, Message: fmt.Sprintf("%s: %s; a request must be a regular file with one link (copy it into the spool)", base, unsafe.Reason())}
	case err != nil:
		return nil, fmt.Errorf("request %s: %w", path, err)
	case tooLarge:
		return nil, &Rejection{RunID: name, Message: fmt.Sprintf(
			"%s: request is larger than %s (%d bytes), the most pcsync reads; prompts are at most 1 MiB", base, sizeString(maxBytes), maxBytes)}
	}
	run, err := ParseRequest(m, paths, base, data)
	if err != nil {
		return nil, err
	}
	run.RequestFile = path
	run.ModTime = fi.ModTime()
	return run, nil
}

func companyList(m *config.Model) string {
	var names []string
	for i := range m.Companies {
		names = append(names, m.Companies[i].Slug())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func agentList(c *config.Company) string {
	var names []string
	for _, a := range c.Spec.Agents {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// sizeString renders a byte count in KiB or MiB when it is a whole number
// of them.
func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
