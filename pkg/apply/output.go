package apply

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// The text output of apply, one line per object, kubectl style:
//
//	<kind>[.<group>]/<name> <action>[ (<namespace>[, dry run])]
//
// e.g. "namespace/paperclip-acme created",
// "networkpolicy.networking.k8s.io/paperclip-deny-all unchanged (paperclip-acme)",
// "role.rbac.authorization.k8s.io/paperclip-tenant-role configured (paperclip-acme, dry run)",
// then one summary line:
//
//	summary: 3 created, 1 configured, 4 unchanged, 0 recreated, 1 pruned, 0 retained, 0 failed; 9 objects, 5 mutating requests, 0.42s
//
// A retained Namespace's line ends with ": <why>".
// Errors are not part of it; WriteErrors writes them, one "error: …" line each.

// ObjectLine formats one object's line (without a newline).
func ObjectLine(ref ObjectRef, action Action, dryRun bool) string {
	var paren []string
	if ref.Namespace != "" {
		paren = append(paren, ref.Namespace)
	}
	if dryRun {
		paren = append(paren, "dry run")
	}
	line := ref.KubectlName() + " " + string(action)
	if len(paren) > 0 {
		line += " (" + strings.Join(paren, ", ") + ")"
	}
	return line
}

// SummaryLine formats the report's summary line (without a newline).
func (r *Report) SummaryLine() string {
	var parts []string
	for _, a := range Actions() {
		parts = append(parts, fmt.Sprintf("%d %s", r.Count(a), a))
	}
	s := fmt.Sprintf("summary: %s; %d objects, %d mutating requests, %s", strings.Join(parts, ", "),
		len(r.Objects), r.MutatingRequests, r.Duration.Round(10*time.Millisecond))
	if r.DryRun {
		s += " (dry run)"
	}
	return s
}

// WriteText writes one line per object and the summary line.
func (r *Report) WriteText(w io.Writer) error {
	var sb strings.Builder
	for _, o := range r.Objects {
		if o.Action == "" {
			continue
		}
		sb.WriteString(ObjectLine(o.Ref, o.Action, r.DryRun))
		if o.Note != "" {
			sb.WriteString(": " + o.Note)
		}
		sb.WriteByte('\n')
	}
	sb.WriteString(r.SummaryLine())
	sb.WriteByte('\n')
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteErrors writes each failed object's error as "error: <message>".
func (r *Report) WriteErrors(w io.Writer) error {
	return writeErrors(w, r.Err())
}

func writeErrors(w io.Writer, err error) error {
	if err == nil {
		return nil
	}
	var sb strings.Builder
	for _, e := range unwrapJoined(err) {
		sb.WriteString("error: ")
		sb.WriteString(e.Error())
		sb.WriteByte('\n')
	}
	_, werr := io.WriteString(w, sb.String())
	return werr
}

func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// JSONObject is one object in the JSON output.
type JSONObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Action     Action `json:"action"`
	Error      string `json:"error,omitempty"`
	// Note explains a retained Namespace.
	Note string `json:"note,omitempty"`
	// Diff is the unified diff (diff output only).
	Diff string `json:"diff,omitempty"`
}

// JSONSummary counts the actions in the JSON output.
type JSONSummary struct {
	Created          int     `json:"created"`
	Configured       int     `json:"configured"`
	Unchanged        int     `json:"unchanged"`
	Recreated        int     `json:"recreated"`
	Pruned           int     `json:"pruned"`
	Retained         int     `json:"retained"`
	Failed           int     `json:"failed"`
	Objects          int     `json:"objects"`
	MutatingRequests int64   `json:"mutatingRequests"`
	ReadRequests     int64   `json:"readRequests"`
	DurationSeconds  float64 `json:"durationSeconds"`
}

// JSONReport is the JSON output of apply (-o json) and diff (-o json).
type JSONReport struct {
	// ApplySet identifies the inventory: its ID and parent.
	ApplySet JSONApplySet `json:"applySet"`
	DryRun   bool         `json:"dryRun,omitempty"`
	// Changed (diff only) is true when apply would change something.
	Changed *bool        `json:"changed,omitempty"`
	Objects []JSONObject `json:"objects"`
	Summary JSONSummary  `json:"summary"`
}

// JSONApplySet identifies the inventory in the JSON output.
type JSONApplySet struct {
	ID        string `json:"id"`
	Parent    string `json:"parent,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

func jsonObject(ref ObjectRef, action Action, err error) JSONObject {
	o := JSONObject{
		APIVersion: ref.Version, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, Action: action,
	}
	if ref.Group != "" {
		o.APIVersion = ref.Group + "/" + ref.Version
	}
	if err != nil {
		o.Error = err.Error()
	}
	return o
}

func summarize(s *JSONSummary, a Action) {
	switch a {
	case ActionCreated:
		s.Created++
	case ActionConfigured:
		s.Configured++
	case ActionUnchanged:
		s.Unchanged++
	case ActionRecreated:
		s.Recreated++
	case ActionPruned:
		s.Pruned++
	case ActionRetained:
		s.Retained++
	case ActionFailed:
		s.Failed++
	}
}

// JSON returns the report in its JSON form.
func (r *Report) JSON() JSONReport {
	out := JSONReport{
		ApplySet: JSONApplySet{ID: r.ApplySetID, Parent: r.Parent.KubectlName(), Namespace: r.Parent.Namespace},
		DryRun:   r.DryRun,
		Objects:  []JSONObject{},
	}
	for _, o := range r.Objects {
		if o.Action == "" {
			continue
		}
		j := jsonObject(o.Ref, o.Action, o.Err)
		j.Note = o.Note
		out.Objects = append(out.Objects, j)
		summarize(&out.Summary, o.Action)
	}
	out.Summary.Objects = len(out.Objects)
	out.Summary.MutatingRequests = r.MutatingRequests
	out.Summary.ReadRequests = r.ReadRequests
	out.Summary.DurationSeconds = r.Duration.Seconds()
	return out
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r.JSON()) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes the unified diffs of the objects that differ, deletions included,
// one after the other.
func (r *DiffReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	for _, o := range r.Objects {
		sb.WriteString(o.Diff)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// SummaryLine formats a one-line summary of the diff (without a newline), e.g.
// "diff: 1 to create, 2 to configure, 5 unchanged, 1 to prune, 0 failed".
func (r *DiffReport) SummaryLine() string {
	return fmt.Sprintf("diff: %d to create, %d to configure, %d unchanged, %d to prune, %d failed",
		r.Count(ActionCreated), r.Count(ActionConfigured), r.Count(ActionUnchanged), r.Count(ActionPruned),
		r.Count(ActionFailed))
}

// WriteErrors writes each failed object's error as "error: <message>".
func (r *DiffReport) WriteErrors(w io.Writer) error { return writeErrors(w, r.Err()) }

// JSON returns the diff in its JSON form (each object with its diff).
func (r *DiffReport) JSON() JSONReport {
	changed := r.Changed()
	out := JSONReport{ApplySet: JSONApplySet{ID: r.ApplySetID}, Changed: &changed, Objects: []JSONObject{}}
	for _, o := range r.Objects {
		if o.Action == "" {
			continue
		}
		j := jsonObject(o.Ref, o.Action, o.Err)
		j.Diff = o.Diff
		out.Objects = append(out.Objects, j)
		summarize(&out.Summary, o.Action)
	}
	out.Summary.Objects = len(out.Objects)
	out.Summary.MutatingRequests = r.MutatingRequests
	out.Summary.ReadRequests = r.ReadRequests
	out.Summary.DurationSeconds = r.Duration.Seconds()
	return out
}

// WriteJSON writes the diff as one indented JSON document.
func (r *DiffReport) WriteJSON(w io.Writer) error { return writeJSON(w, r.JSON()) }
