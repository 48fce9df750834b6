package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pcsync/pcsync/pkg/runs/spool"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// Shell completion (cobra's pcsync completion bash|zsh|fish|powershell)
// offers, besides commands and flags: the values of every flag that takes
// one of a list (-o's formats, --executor, …), directories where a directory
// is wanted, kubeconfig contexts for --context, and the run names of the
// spool for pcsync runs show.

// flagValues are the values of flags whose commands do not record them
// with setFlagValues, by flag name.
var flagValues = map[string]func() []string{
	// pcsync daemon's, as its --executor check accepts them.
	"executor": func() []string { return []string{"kubernetes", "local"} },
	"sandbox-exec-protocol": func() []string {
		names := make([]string, len(sandbox.ExecProtocols))
		for i, p := range sandbox.ExecProtocols {
			names[i] = string(p)
		}
		return names
	},
}

// dirFlags name a directory, in any command that has them.
var dirFlags = []string{"spool", "state-dir", "output-dir", "sandbox-host-root", "paperclip-install", "into", "paperclip-home"}

// dirArgCommands take a directory as their argument.
var dirArgCommands = []string{"render", "diff", "apply", "doctor", "daemon"}

// registerCompletions registers the completions of root's tree.
func registerCompletions(g *globalOptions, root *cobra.Command) {
	done := map[*pflag.Flag]bool{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if done[f] {
				return
			}
			done[f] = true
			completeFlag(cmd, f)
		}
		cmd.PersistentFlags().VisitAll(visit)
		cmd.LocalNonPersistentFlags().VisitAll(visit)
		if cmd.ValidArgsFunction == nil && cmd.Parent() == root && slices.Contains(dirArgCommands, cmd.Name()) {
			cmd.ValidArgsFunction = completeDirs
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := g.Kube.ClientConfig().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for name := range raw.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// completeFlag registers the completion of cmd's flag f: its values, or
// directories.
func completeFlag(cmd *cobra.Command, f *pflag.Flag) {
	values := f.Annotations[valuesAnnotation]
	if fn, ok := flagValues[f.Name]; ok && values == nil {
		values = fn()
	}
	switch {
	case values != nil:
		_ = cmd.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	case slices.Contains(dirFlags, f.Name):
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[cobra.BashCompSubdirsInDir] = []string{}
	}
}

// completeDirs completes a command's one directory argument.
func completeDirs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// completeRunNames completes pcsync runs show's NAME: the names of the
// runs of the spool the flags give (printable ones; others are typed).
func (f *runsFlags) completeRunNames(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	l, err := spool.ListRuns(f.spool, f.state())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, r := range l.Runs {
		if strings.HasPrefix(r.Name, toComplete) && quoteName(r.Name) == r.Name {
			names = append(names, r.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
