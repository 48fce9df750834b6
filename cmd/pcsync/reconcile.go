package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	cs "github.com/pcsync/pcsync/pkg/companystatus"
)

const reconcileLong = `reconcile asks the daemon for a reconcile now, without waiting for its
--interval, as flux reconcile does: it sets the annotation
pcsync.io/reconcile-requested-at of each company's status (COMPANY...; none:
every company in -n) to the current time, and the daemon, which watches
them, reconciles every company at once (a reconcile is of the whole config)
and records the value in status.lastHandledReconcileAt.

With --wait it waits (at most --timeout) until the daemon has answered each
request and prints the company's status. Exit codes: 0 each company is
Ready (or suspended); 1 one is not (its message says why); 2 or more for
other errors (a company without status, the daemon not answering within
--timeout).`

// errNotReady is reconcile's exit code 1: a company not Ready after its
// reconcile.
var errNotReady = errors.New("not every company is ready")

func newReconcileCmd(g *globalOptions) *cobra.Command {
	var f statusFlags
	wait, timeout := false, 5*time.Minute
	cmd := &cobra.Command{
		Use:   "reconcile [COMPANY...] [--wait]",
		Short: "Ask the daemon for a reconcile now (and with --wait, wait for it)",
		Long:  reconcileLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			dyn, err := g.dynamic()
			if err != nil {
				return err
			}
			r := reconcileRequest{g: g, dyn: dyn, ns: f.namespace, value: time.Now().UTC().Format(time.RFC3339Nano)}
			return r.run(cmd.Context(), args, wait, timeout)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the daemon has reconciled, and print each company's status")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "with --wait, how long to wait for the daemon")
	return cmd
}

// reconcileRequest is one pcsync reconcile: the value it sets.
type reconcileRequest struct {
	g     *globalOptions
	dyn   dynamic.Interface
	ns    string
	value string
}

// run requests a reconcile of names (none: every company in r.ns) and,
// with wait, waits for each answer.
func (r reconcileRequest) run(ctx context.Context, names []string, wait bool, timeout time.Duration) error {
	if len(names) == 0 {
		list, err := cs.List(ctx, r.dyn, r.ns)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("no company's status in namespace %s: is a daemon applying there (its --applyset-namespace)?", r.ns)
		}
		for _, s := range list {
			names = append(names, s.Name)
		}
	}
	for _, n := range names {
		s, err := cs.RequestReconcile(ctx, r.dyn, r.ns, n, r.value)
		if err != nil {
			return err
		}
		if s.Status.Suspended {
			fmt.Fprintf(r.g.Stderr, "warning: company %s is suspended (spec.suspend): its reconcile applies nothing of it\n", n)
		}
		fmt.Fprintf(r.g.Stdout, "%s: reconcile requested at %s\n", n, r.value)
	}
	if !wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var notReady bool
	for _, n := range names {
		s, err := cs.WaitHandled(ctx, r.dyn, r.ns, n, r.value)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: the daemon did not answer the request within %s (--timeout): is it running, leading and applying in namespace %s?", n, timeout, r.ns)
			}
			return err
		}
		notReady = r.report(s) || notReady
	}
	if notReady {
		return &exitError{code: 1, err: errNotReady, reported: true}
	}
	return nil
}

// report prints a reconciled company's status line and says whether it
// is not Ready (nor suspended).
func (r reconcileRequest) report(s *cs.CompanyStatus) bool {
	c := s.Status.Condition(cs.ConditionReady)
	switch {
	case s.Status.Suspended:
		fmt.Fprintf(r.g.Stdout, "%s: reconciled: suspended; revision %s stays applied\n", s.Name, s.Status.Revision)
		return false
	case c != nil && c.Status == metav1.ConditionTrue:
		fmt.Fprintf(r.g.Stdout, "%s: reconciled: Ready at revision %s\n", s.Name, s.Status.Revision)
		return false
	case c != nil:
		fmt.Fprintf(r.g.Stdout, "%s: reconciled: not ready: %s: %s\n", s.Name, c.Reason, c.Message)
	default:
		fmt.Fprintf(r.g.Stdout, "%s: reconciled: no Ready condition\n", s.Name)
	}
	return true
}
