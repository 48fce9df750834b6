package paperclip

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/internal/lib/textdiff"
)

// Report is what a reconcile did (or, with DryRun, would do).
type Report struct {
	DryRun bool
	// Companies are in the config's order (by slug).
	Companies []CompanyResult
	// Reads and Writes count the requests sent to Paperclip.
	Reads, Writes int64
	Duration      time.Duration

	mu sync.Mutex
}

// CompanyResult is one company's part of a report.
type CompanyResult struct {
	Slug, ID string
	// Err is set when the company's agents could not be read; Agents is
	// empty then.
	Err    error
	Agents []AgentResult
	Notes  []string
	// Environments are the company's sandbox environments, written before
	// its agents.
	Environments []EnvironmentResult
}

// AgentResult is what happened to one agent.
type AgentResult struct {
	Agent, ID string
	Verb      Verb
	Changes   []Change
	// Drift says the agent had been changed by hand and is put back.
	Drift bool
	// Refused says the pause guard refused this pause.
	Refused bool
	Err     error
}

// Action names the result as apply's report does: created, configured,
// resumed, paused, unchanged, refused or failed.
func (a AgentResult) Action() string {
	switch {
	case a.Err != nil:
		return "failed"
	case a.Refused:
		return "refused"
	}
	switch a.Verb {
	case VerbCreate:
		return "created"
	case VerbUpdate:
		return "configured"
	case VerbResume:
		return "resumed"
	case VerbPause:
		return "paused"
	}
	return "unchanged"
}

func (r *Report) setCompany(i, n int, c CompanyResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Companies == nil {
		r.Companies = make([]CompanyResult, n)
	}
	r.Companies[i] = c
}

// Count returns how many agents had the action (see AgentResult.Action).
func (r *Report) Count(action string) int {
	n := 0
	for _, c := range r.Companies {
		for _, a := range c.Agents {
			if a.Action() == action {
				n++
			}
		}
	}
	return n
}

// Drift is the number of agents put back after a hand edit.
func (r *Report) Drift() int {
	n := 0
	for _, c := range r.Companies {
		for _, a := range c.Agents {
			if a.Drift && a.Err == nil {
				n++
			}
		}
	}
	return n
}

// Changed says whether any agent is (or would be) created, changed, paused
// or resumed.
func (r *Report) Changed() bool {
	for _, c := range r.Companies {
		for _, e := range c.Environments {
			if e.Verb != VerbNone {
				return true
			}
		}
		for _, a := range c.Agents {
			if a.Verb != VerbNone {
				return true
			}
		}
	}
	return false
}

// Err joins the errors of companies and agents; nil when there are none.
func (r *Report) Err() error {
	var errs []error
	for _, c := range r.Companies {
		if c.Err != nil {
			errs = append(errs, c.Err)
		}
		for _, e := range c.Environments {
			if e.Err != nil {
				errs = append(errs, e.Err)
			}
		}
		for _, a := range c.Agents {
			if a.Err != nil {
				errs = append(errs, a.Err)
			}
		}
	}
	return errors.Join(errs...)
}

// WriteText writes one line per agent and a summary line:
// "paperclip agent <company>/<agent> <action>[ (dry run)][: <fields>]".
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Companies {
		for _, e := range c.Environments {
			line := fmt.Sprintf("paperclip environment %s/%s %s", c.Slug, e.Name,
				map[Verb]string{VerbCreate: "created", VerbUpdate: "configured", VerbNone: "unchanged"}[e.Verb])
			if e.Err != nil {
				line = fmt.Sprintf("paperclip environment %s/%s failed", c.Slug, e.Name)
			} else if r.DryRun && e.Verb != VerbNone {
				line += " (dry run)"
			}
			if e.Verb == VerbUpdate {
				line += ": " + changedPaths(e.Changes)
			}
			b.WriteString(line + "\n")
		}
		for _, a := range c.Agents {
			line := fmt.Sprintf("paperclip agent %s/%s %s", c.Slug, a.Agent, a.Action())
			if r.DryRun && a.Verb != VerbNone {
				line += " (dry run)"
			}
			var notes []string
			if a.Verb == VerbUpdate || a.Verb == VerbResume {
				if paths := changedPaths(a.Changes); paths != "" {
					notes = append(notes, paths)
				}
			}
			if a.Drift {
				notes = append(notes, "drift corrected")
			}
			if a.Verb == VerbPause {
				notes = append(notes, "no longer in the config")
			}
			if a.Refused {
				notes = append(notes, "the prune guard refused the pause")
			}
			if len(notes) > 0 {
				line += ": " + strings.Join(notes, "; ")
			}
			b.WriteString(line + "\n")
		}
		for _, n := range c.Notes {
			b.WriteString("paperclip company " + c.Slug + ": " + n + "\n")
		}
	}
	b.WriteString(r.SummaryLine() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteErrors writes one "error: …" line per company or agent that failed.
func (r *Report) WriteErrors(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Companies {
		if c.Err != nil {
			b.WriteString("error: " + c.Err.Error() + "\n")
		}
		for _, a := range c.Agents {
			if a.Err != nil {
				b.WriteString("error: " + a.Err.Error() + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func changedPaths(cs []Change) string {
	paths := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.Path != metadataMarker {
			paths = append(paths, c.Path)
		}
	}
	return strings.Join(paths, ", ")
}

// SummaryLine counts the actions and the requests.
func (r *Report) SummaryLine() string {
	failed := r.Count("failed")
	for _, c := range r.Companies {
		if c.Err != nil {
			failed++
		}
	}
	return fmt.Sprintf("paperclip summary: %d created, %d configured, %d resumed, %d paused, %d unchanged, %d refused, %d failed; "+
		"%d drift; %d read and %d write requests, %s",
		r.Count("created"), r.Count("configured"), r.Count("resumed"), r.Count("paused"), r.Count("unchanged"),
		r.Count("refused"), failed, r.Drift(), r.Reads, r.Writes, r.Duration.Round(time.Millisecond))
}

// WriteDiff writes, for every agent that would change, a unified diff of its
// managed fields (one "path: value" line each, values as JSON): live on the
// left, as declared on the right. A create diffs against nothing; a pause
// shows the status.
func (r *Report) WriteDiff(w io.Writer, context int) error {
	var b strings.Builder
	for _, c := range r.Companies {
		for _, a := range c.Agents {
			if a.Verb == VerbNone {
				continue
			}
			var from, to strings.Builder
			for _, ch := range a.Changes {
				if ch.Path == metadataMarker {
					continue
				}
				if a.Verb != VerbCreate {
					from.WriteString(ch.Path + ": " + jsonText(shown(ch.Path, ch.From)) + "\n")
				}
				to.WriteString(ch.Path + ": " + jsonText(shown(ch.Path, ch.To)) + "\n")
			}
			if a.Verb == VerbResume {
				from.WriteString("status: \"paused\"\n")
				to.WriteString("status: \"active\"\n")
			}
			name := "paperclip/" + c.Slug + "/agents/" + a.Agent
			if from.String() == to.String() {
				// Only pcsync's marker is out of date.
				b.WriteString("paperclip agent " + c.Slug + "/" + a.Agent + ": pcsync's marker is refreshed (no field changes)\n")
				continue
			}
			b.WriteString(textdiff.Unified("live/"+name, "declared/"+name, from.String(), to.String(), context))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shown is a field's value as a report may show it: the values of an
// adapter's env are masked (they are often API keys).
func shown(path string, v any) any {
	if path != "adapterConfig.env" {
		return v
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = redact.Marker
	}
	return out
}

func jsonText(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// MarshalJSON gives the report as a document for -o json.
func (r *Report) MarshalJSON() ([]byte, error) {
	type change struct {
		Path string `json:"path"`
		From any    `json:"from"`
		To   any    `json:"to"`
	}
	type agent struct {
		Company string   `json:"company"`
		Agent   string   `json:"agent"`
		ID      string   `json:"id,omitempty"`
		Action  string   `json:"action"`
		Drift   bool     `json:"drift,omitempty"`
		Changes []change `json:"changes,omitempty"`
		Error   string   `json:"error,omitempty"`
	}
	type company struct {
		Company string `json:"company"`
		ID      string `json:"id"`
		Error   string `json:"error,omitempty"`
	}
	doc := struct {
		DryRun    bool           `json:"dryRun"`
		Companies []company      `json:"companies"`
		Agents    []agent        `json:"agents"`
		Summary   map[string]any `json:"summary"`
	}{DryRun: r.DryRun, Companies: []company{}, Agents: []agent{}}
	for _, c := range r.Companies {
		cc := company{Company: c.Slug, ID: c.ID}
		if c.Err != nil {
			cc.Error = c.Err.Error()
		}
		doc.Companies = append(doc.Companies, cc)
		for _, a := range c.Agents {
			ag := agent{Company: c.Slug, Agent: a.Agent, ID: a.ID, Action: a.Action(), Drift: a.Drift}
			for _, ch := range a.Changes {
				if ch.Path != metadataMarker {
					ag.Changes = append(ag.Changes, change{ch.Path, shown(ch.Path, ch.From), shown(ch.Path, ch.To)})
				}
			}
			if a.Err != nil {
				ag.Error = a.Err.Error()
			}
			doc.Agents = append(doc.Agents, ag)
		}
	}
	doc.Summary = map[string]any{"created": r.Count("created"), "configured": r.Count("configured"),
		"resumed": r.Count("resumed"), "paused": r.Count("paused"), "unchanged": r.Count("unchanged"),
		"refused": r.Count("refused"), "failed": r.Count("failed"), "drift": r.Drift(),
		"readRequests": r.Reads, "writeRequests": r.Writes, "durationSeconds": r.Duration.Seconds()}
	return json.Marshal(doc)
}
