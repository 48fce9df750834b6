package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/apply"
	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

// getFormats: get.
var getFormats = []string{"table", "yaml", "json"}

// statusFlags are the flags of the commands that read CompanyStatus
// objects: where they are.
type statusFlags struct {
	namespace string
	all       bool
}

func (f *statusFlags) add(cmd *cobra.Command, all bool) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", apply.DefaultManagerOptions().ApplySet.Namespace,
		"the namespace of the statuses: the daemon's --applyset-namespace")
	if all {
		cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "every namespace's statuses (every daemon's)")
	}
}

// ns is the namespace to read ("": every namespace).
func (f *statusFlags) ns() string {
	if f.all {
		return ""
	}
	return f.namespace
}

const getCompaniesLong = `get companies prints what the daemon last did with each company of its
config, as kubectl get prints objects: whether it is READY, the config
REVISION applied to its tenant (the Git commit git-sync checked out, or
sha256:<digest> of the render), whether it is SUSPENDED (spec.suspend), the
AGE of its status and a MESSAGE (why it is not ready). It reads the
CompanyStatus objects (kubectl get companystatuses, short name pcs) the
daemon keeps in its --applyset-namespace (-n; -A for every namespace), one
per company, named after it. NAME... prints those only; -o yaml or -o json
prints the objects (a List for several). See docs/daemon.md.`

func newGetCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Print what the daemon did with each company (get companies), as kubectl get does",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newGetCompaniesCmd(g))
	return cmd
}

func newGetCompaniesCmd(g *globalOptions) *cobra.Command {
	var f statusFlags
	var output string
	cmd := &cobra.Command{
		Use:     "companies [NAME...]",
		Aliases: []string{"company", "companystatuses", "companystatus", "pcs"},
		Short:   "Print each company's status: READY, REVISION, SUSPENDED, AGE, MESSAGE",
		Long:    getCompaniesLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, getFormats); err != nil {
				return err
			}
			dyn, err := g.dynamic()
			if err != nil {
				return err
			}
			list, err := readStatuses(cmd.Context(), dyn, f.ns(), args)
			if err != nil {
				return err
			}
			return writeStatuses(g.Stdout, output, list, f.all, time.Now())
		},
	}
	f.add(cmd, true)
	addOutputFlag(cmd.Flags(), &output, getFormats)
	return cmd
}

// dynamic is a dynamic client of the cluster of g's flags.
func (g *globalOptions) dynamic() (dynamic.Interface, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// readStatuses reads the statuses of namespace ns ("": every one): those
// named, in their order, else all.
func readStatuses(ctx context.Context, dyn dynamic.Interface, ns string, names []string) ([]cs.CompanyStatus, error) {
	if len(names) == 0 {
		return cs.List(ctx, dyn, ns)
	}
	if ns == "" {
		return nil, usageErrorf("a company's status is read by name in one namespace: -n NAMESPACE, not -A")
	}
	out := make([]cs.CompanyStatus, 0, len(names))
	for _, n := range names {
		s, err := cs.Get(ctx, dyn, ns, n)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, nil
}

// writeStatuses prints statuses as a table (with a NAMESPACE column when
// all), or as YAML or JSON: one object, or a List of several.
func writeStatuses(w io.Writer, format string, list []cs.CompanyStatus, all bool, now time.Time) error {
	for i := range list {
		list[i].ManagedFields = nil
		list[i].APIVersion, list[i].Kind = cs.APIVersion, cs.Kind
	}
	var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": list}
	if len(list) == 1 {
		v = list[0]
	}
	switch format {
	case "json":
		return writeJSON(w, v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return writeStatusTable(w, list, all, now)
}

// writeStatusTable prints the table kubectl prints of CompanyStatus
// objects (its printer columns): NAME READY REVISION SUSPENDED AGE
// MESSAGE, the message's first line.
func writeStatusTable(w io.Writer, list []cs.CompanyStatus, all bool, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No companies' statuses found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := "NAME\tREADY\tREVISION\tSUSPENDED\tAGE\tMESSAGE"
	if all {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, s := range list {
		ready, msg := "Unknown", ""
		if c := s.Status.Condition(cs.ConditionReady); c != nil {
			ready, msg = string(c.Status), c.Message
		}
		msg, _, _ = strings.Cut(msg, "\n")
		row := fmt.Sprintf("%s\t%s\t%s\t%t\t%s\t%s", s.Name, ready, s.Status.Revision, s.Status.Suspended, createdAge(s.CreationTimestamp, now), msg)
		if all {
			row = s.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// createdAge is the AGE of an object created at t, as runs list prints
// it.
func createdAge(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return age(now.Sub(t.Time))
}
