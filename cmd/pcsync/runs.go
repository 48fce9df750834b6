package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// runsFlags are the flags shared by `pcsync runs list` and `show`.
type runsFlags struct {
	spool, stateDir, output string
}

func (f *runsFlags) state() string {
	if f.stateDir != "" {
		return f.stateDir
	}
	return runs.DefaultStateDir(f.spool)
}

func (f *runsFlags) check() error {
	return checkOutput(f.output, tableFormats)
}

func newRunsCmd(g *globalOptions) *cobra.Command {
	f := &runsFlags{spool: "."}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List and show the runs of a spool directory",
		Long: `runs reads a spool directory and the daemon's state directory (no config, no
cluster): every request with its state, queued, starting or running, or the
status of its result (succeeded, failed, timed_out, cancelled, rejected).`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.spool, "spool", f.spool, "spool directory")
	pf.StringVar(&f.stateDir, "state-dir", "", "daemon state directory (default <spool>/.pcsync)")
	addOutputFlag(pf, &f.output, tableFormats)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every request of the spool, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := f.check(); err != nil {
				return err
			}
			l, err := spool.ListRuns(f.spool, f.state())
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(g.Stdout, l)
			}
			return writeRunsTable(g.Stdout, l, time.Now())
		},
	}, &cobra.Command{
		Use:   "show NAME",
		Short: "Show one request (by name or file name) with its result",
		Args:  cobra.ExactArgs(1),
		// The spool's run names, for the shell's completion.
		ValidArgsFunction: f.completeRunNames,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			info, err := spool.ShowRun(f.spool, f.state(), args[0])
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(g.Stdout, info)
			}
			return writeRunDetails(g.Stdout, info)
		},
	})
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeRunsTable prints one line per request.
func writeRunsTable(w io.Writer, l spool.Listing, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUN ID\tCOMPANY\tAGENT\tSTATUS\tAGE\tDURATION\tERROR")
	for _, r := range l.Runs {
		dur, errCode := "-", "-"
		if r.Result != nil {
			if r.Result.DurationMs != nil {
				dur = (time.Duration(*r.Result.DurationMs) * time.Millisecond).Round(time.Millisecond).String()
			}
			if r.Result.ErrorCode != nil {
				errCode = string(*r.Result.ErrorCode)
			}
		} else if r.StartedAt != nil {
			dur = now.Sub(*r.StartedAt).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", quoteName(r.Name), dash(quoteName(r.RunID)), dash(quoteName(r.Company)),
			dash(quoteName(r.Agent)), r.Status, age(now.Sub(r.SubmittedAt)), dur, errCode)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range l.Runs {
		if r.Problem != "" {
			fmt.Fprintf(w, "%s: %s\n", quoteName(r.Name), safeText(r.Problem))
		}
	}
	fmt.Fprintln(w, daemonLine(l))
	if !l.DaemonRunning {
		queued := 0
		for _, r := range l.Runs {
			if r.Result == nil {
				queued++
			}
		}
		if queued > 0 {
			fmt.Fprintf(w, "no daemon serves this spool: %d request(s) wait for one\n", queued)
		}
	}
	return nil
}

// daemonLine says whether a daemon serves the spool, from its status file.
func daemonLine(l spool.Listing) string {
	line := "daemon: " + l.DaemonState
	if d := l.Daemon; d != nil && l.DaemonRunning {
		var parts []string
		if d.PID > 0 {
			parts = append(parts, fmt.Sprintf("pid %d", d.PID))
		}
		if d.Executor != "" {
			parts = append(parts, d.Executor)
		}
		if d.Version != "" {
			parts = append(parts, d.Version)
		}
		if len(d.Companies) > 0 {
			parts = append(parts, fmt.Sprintf("%d companies", len(d.Companies)))
		}
		if len(parts) > 0 {
			line += " (" + strings.Join(parts, ", ") + ")"
		}
	}
	return line
}

// writeRunDetails prints one request as "field: value" lines.
func writeRunDetails(w io.Writer, r spool.RunInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	line := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%s\n", k, quoteName(fmt.Sprint(v))) }
	line("Name", r.Name)
	line("File", r.File)
	line("Run ID", dash(r.RunID))
	line("Company", dash(r.Company))
	line("Agent", dash(r.Agent))
	line("Status", r.Status)
	if r.Problem != "" {
		line("Problem", r.Problem)
	}
	line("Submitted", r.SubmittedAt.Format(time.RFC3339))
	if r.StartedAt != nil {
		line("Started", r.StartedAt.Format(time.RFC3339))
	}
	if r.PID != 0 {
		line("PID", r.PID)
	}
	line("Log", r.Log)
	if res := r.Result; res != nil {
		line("Adapter", dash(res.Adapter))
		if res.FinishedAt != nil {
			line("Finished", res.FinishedAt.Format(time.RFC3339))
		}
		if res.DurationMs != nil {
			line("Duration", time.Duration(*res.DurationMs)*time.Millisecond)
		}
		if res.ExitCode != nil {
			line("Exit code", *res.ExitCode)
		}
		if res.Signal != nil {
			line("Signal", *res.Signal)
		}
		if res.ErrorCode != nil {
			line("Error code", *res.ErrorCode)
		}
		if res.SessionID != nil {
			line("Session", *res.SessionID)
		}
		if res.Model != nil {
			line("Model", *res.Model)
		}
		if res.NumTurns != nil {
			line("Turns", *res.NumTurns)
		}
		line("Usage", usageString(res))
		if res.CostUSD != nil {
			line("Cost (USD)", fmt.Sprintf("%.4f", *res.CostUSD))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res := r.Result; res != nil {
		if res.ErrorMessage != nil {
			fmt.Fprintf(w, "Error message:\n%s\n", indent(safeText(*res.ErrorMessage)))
		}
		if res.Summary != nil {
			fmt.Fprintf(w, "Summary:\n%s\n", indent(safeText(*res.Summary)))
		}
	}
	return nil
}

func usageString(r *result.RunResult) string {
	if r.Usage == nil {
		return "unknown"
	}
	u := r.Usage
	basis := "per_run"
	if r.UsageBasis != nil {
		basis = string(*r.UsageBasis)
	}
	return fmt.Sprintf("input %d, cached input %d, cache creation %d, output %d (%s)",
		u.InputTokens, u.CachedInputTokens, u.CacheCreationInputTokens, u.OutputTokens, basis)
}

// quoteName returns s as it is when it is printable text without tabs or
// line breaks, and Go-quoted otherwise: names come from the spool's
// writers, and a name with terminal escape sequences must not reach the
// terminal raw.
func quoteName(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

// safeText keeps line breaks and tabs of s and escapes every other control
// character (\x1b…), for text that comes from an agent or a spool writer.
func safeText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || r == utf8.RuneError || r == '\u2028' || r == '\u2029':
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age renders a duration like kubectl's AGE column.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
