package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pcsync/pcsync/pkg/apply"
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
//	summary: 3 created, 1 configured, 4 unchanged, 0 recreated, 1 pruned, 0 retained, 0 released, 0 failed; 9 objects, 5 mutating requests, 0.42s
//
// A retained Namespace's line, and a released (adopted) object's, ends with ": <why>". Errors go to stderr, one
// "error: …" line each. diff prints the objects' unified diffs one after the other,
// and on stderr its errors and a summary line.

// writeReportTo prints apply's change set (to w, as text or JSON) and the failed
// objects' errors (stderr).
func writeReportTo(g *globalOptions, w io.Writer, format string, c *apply.ChangeSet) error {
	if c == nil {
		return nil
	}
	var err error
	if format == "json" {
		err = writeJSON(w, applyJSON(c))
	} else {
		err = writeApplyText(w, c)
	}
	return errors.Join(err, writeErrors(g.Stderr, c.Err()))
}

// writeDiffTo prints diff's change set (to w: the unified diffs, or JSON), then the
// failed objects' errors, the summary line and the prune the guard would hold
// (stderr).
func writeDiffTo(g *globalOptions, w io.Writer, format string, c *apply.ChangeSet) error {
	var err error
	if format == "json" {
		err = writeJSON(w, diffJSON(c))
	} else {
		var sb strings.Builder
		for _, o := range c.Objects {
			sb.WriteString(o.Diff)
		}
		_, err = io.WriteString(w, sb.String())
	}
	err = errors.Join(err, writeErrors(g.Stderr, c.Err()))
	fmt.Fprintln(g.Stderr, diffSummaryLine(c))
	if h := c.PruneHeld; h != nil {
		fmt.Fprintf(g.Stderr, "diff: apply --prune would refuse this prune: %s; to approve exactly this prune: %s\n",
			h.Describe(), h.ApproveCommand(c.Parent))
	}
	return err
}

// objectLine formats one object's line of apply (without a newline).
func objectLine(ref apply.ObjectRef, action apply.Action, dryRun bool) string {
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

// applySummaryLine formats apply's summary line (without a newline).
func applySummaryLine(c *apply.ChangeSet) string {
	var parts []string
	for _, a := range apply.Actions() {
		parts = append(parts, fmt.Sprintf("%d %s", c.Count(a), a))
	}
	s := fmt.Sprintf("summary: %s; %d objects, %d mutating requests, %s", strings.Join(parts, ", "),
		len(c.Objects), c.MutatingRequests, c.Duration.Round(10*time.Millisecond))
	if c.DryRun {
		s += " (dry run)"
	}
	return s
}

// diffSummaryLine formats diff's summary line (without a newline), e.g.
// "diff: 1 to create, 2 to configure, 5 unchanged, 1 to prune, 0 failed".
func diffSummaryLine(c *apply.ChangeSet) string {
	return fmt.Sprintf("diff: %d to create, %d to configure, %d unchanged, %d to prune, %d failed",
		c.Count(apply.ActionCreated), c.Count(apply.ActionConfigured), c.Count(apply.ActionUnchanged),
		c.Count(apply.ActionPruned), c.Count(apply.ActionFailed))
}

// writeApplyText writes one line per object and the summary line.
func writeApplyText(w io.Writer, c *apply.ChangeSet) error {
	var sb strings.Builder
	for _, o := range c.Objects {
		if o.Action == "" {
			continue
		}
		sb.WriteString(objectLine(o.Ref, o.Action, c.DryRun))
		if o.Note != "" {
			sb.WriteString(": " + o.Note)
		}
		sb.WriteByte('\n')
	}
	sb.WriteString(applySummaryLine(c))
	sb.WriteByte('\n')
	_, err := io.WriteString(w, sb.String())
	return err
}

// writeErrors writes each of the joined errors as "error: <message>".
func writeErrors(w io.Writer, err error) error {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var sb strings.Builder
	for _, e := range errs {
		sb.WriteString("error: ")
		sb.WriteString(e.Error())
		sb.WriteByte('\n')
	}
	_, werr := io.WriteString(w, sb.String())
	return werr
}

// jsonObject is one object in the JSON output of apply and diff.
type jsonObject struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Namespace  string       `json:"namespace,omitempty"`
	Name       string       `json:"name"`
	Action     apply.Action `json:"action"`
	Error      string       `json:"error,omitempty"`
	// Note explains a retained Namespace or a released object (apply only).
	Note string `json:"note,omitempty"`
	// Diff is the unified diff (diff only).
	Diff string `json:"diff,omitempty"`
}

// jsonSummary counts the actions in the JSON output.
type jsonSummary struct {
	Created          int     `json:"created"`
	Configured       int     `json:"configured"`
	Unchanged        int     `json:"unchanged"`
	Recreated        int     `json:"recreated"`
	Pruned           int     `json:"pruned"`
	Retained         int     `json:"retained"`
	Released         int     `json:"released"`
	Failed           int     `json:"failed"`
	Objects          int     `json:"objects"`
	MutatingRequests int64   `json:"mutatingRequests"`
	ReadRequests     int64   `json:"readRequests"`
	DurationSeconds  float64 `json:"durationSeconds"`
}

// jsonReport is the JSON output of apply -o json and diff -o json (the Kubernetes
// side; writeJSONWithPaperclip adds Paperclip's).
type jsonReport struct {
	// ApplySet identifies the inventory: its ID, and for apply its parent.
	ApplySet jsonApplySet `json:"applySet"`
	DryRun   bool         `json:"dryRun,omitempty"`
	// Changed (diff only) is true when apply would change something.
	Changed *bool        `json:"changed,omitempty"`
	Objects []jsonObject `json:"objects"`
	Summary jsonSummary  `json:"summary"`
}

// jsonApplySet identifies the inventory in the JSON output.
type jsonApplySet struct {
	ID        string `json:"id"`
	Parent    string `json:"parent,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// applyJSON is apply's JSON output.
func applyJSON(c *apply.ChangeSet) jsonReport {
	out := jsonReport{
		ApplySet: jsonApplySet{ID: c.ApplySetID, Parent: c.Parent.KubectlName(), Namespace: c.Parent.Namespace},
		DryRun:   c.DryRun,
	}
	fillJSON(&out, c)
	return out
}

// diffJSON is diff's JSON output: each object with its diff.
func diffJSON(c *apply.ChangeSet) jsonReport {
	changed := c.Changed()
	out := jsonReport{ApplySet: jsonApplySet{ID: c.ApplySetID}, Changed: &changed}
	fillJSON(&out, c)
	return out
}

func fillJSON(out *jsonReport, c *apply.ChangeSet) {
	out.Objects = []jsonObject{}
	for _, o := range c.Objects {
		if o.Action == "" {
			continue
		}
		j := jsonObject{APIVersion: o.Ref.Version, Kind: o.Ref.Kind, Namespace: o.Ref.Namespace, Name: o.Ref.Name,
			Action: o.Action, Note: o.Note, Diff: o.Diff}
		if o.Ref.Group != "" {
			j.APIVersion = o.Ref.Group + "/" + o.Ref.Version
		}
		if o.Err != nil {
			j.Error = o.Err.Error()
		}
		out.Objects = append(out.Objects, j)
		s := &out.Summary
		switch o.Action {
		case apply.ActionCreated:
			s.Created++
		case apply.ActionConfigured:
			s.Configured++
		case apply.ActionUnchanged:
			s.Unchanged++
		case apply.ActionRecreated:
			s.Recreated++
		case apply.ActionPruned:
			s.Pruned++
		case apply.ActionRetained:
			s.Retained++
		case apply.ActionReleased:
			s.Released++
		case apply.ActionFailed:
			s.Failed++
		}
	}
	out.Summary.Objects = len(out.Objects)
	out.Summary.MutatingRequests = c.MutatingRequests
	out.Summary.ReadRequests = c.ReadRequests
	out.Summary.DurationSeconds = c.Duration.Seconds()
}
