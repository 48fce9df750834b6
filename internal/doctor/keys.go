package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
)

// checkKeys adds one row per company (area keys): which of its agents hold
// a model key in their pods, and how to keep it out (spec.credentials).
// The config alone decides it.
func (d *doctor) checkKeys() {
	if d.model == nil {
		return
	}
	for i := range d.model.Companies {
		c := &d.model.Companies[i]
		d.report.Checks = append(d.report.Checks, keysCheck(c, d.model.EgressMode(c)))
	}
}

// keysCheck is the keys row of company c in egress mode mode. An agent
// holds its model key in its pod when a provider its CLI uses
// (adapters.Providers) has no credential in spec.credentials: the key, from
// the daemon's env (Jobs) or Paperclip's execute env (leases), is then
// given to the pod. A CLI that uses no provider pcsync can route (Cursor)
// always holds its own. Status: warn when declaring credentials would
// keep keys out (egress mode proxy), info when it cannot, ok when no agent
// holds a key.
func keysCheck(c *config.Company, mode config.EgressMode) Check {
	row := Check{Area: "keys", Name: c.Slug()}
	declared := map[adapters.Provider]bool{}
	for _, cr := range c.Spec.Credentials {
		declared[cr.Provider] = true
	}
	var holders []string
	var undeclared []adapters.Provider
	for _, a := range c.Spec.Agents {
		ps := adapters.Providers(a.Adapter)
		if len(ps) == 0 {
			holders = append(holders, fmt.Sprintf("%s (%s: its vendor's own key, which no credential can hold)", a.Name, a.Adapter))
			continue
		}
		open := slices.DeleteFunc(slices.Clone(ps), func(p adapters.Provider) bool { return declared[p] })
		if len(open) > 0 {
			holders = append(holders, fmt.Sprintf("%s (%s: %s)", a.Name, a.Adapter, providerNames(open)))
			undeclared = append(undeclared, open...)
		}
	}
	slices.Sort(undeclared)
	undeclared = slices.Compact(undeclared)
	if len(holders) == 0 {
		row.Status = StatusOK
		row.Detail = "no agent holds a model key in its pod: the egress proxy holds " + credentialNames(c)
		if len(c.Spec.Agents) == 0 {
			row.Detail = "no agents"
		}
		return row
	}
	row.Status, row.Detail = StatusInfo, fmt.Sprintf("%d of %d agents hold a model key in their pods "+
		"(from the daemon's env or Paperclip's execute env; the agent can read it): %s",
		len(holders), len(c.Spec.Agents), strings.Join(holders, ", "))
	switch {
	case len(undeclared) == 0:
	case mode == config.EgressProxy:
		row.Status = StatusWarn
		row.Detail += "; declare spec.credentials for " + providerNames(undeclared) + " to keep those keys in the egress proxy"
	default:
		row.Detail += fmt.Sprintf("; spec.credentials would keep the %s keys in the egress proxy, which egress mode %s does not run (egress mode proxy does)",
			providerNames(undeclared), mode)
	}
	return row
}

func providerNames(ps []adapters.Provider) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// credentialNames lists c's credentials as "<company>/<name> (provider)".
func credentialNames(c *config.Company) string {
	s := make([]string, len(c.Spec.Credentials))
	for i, cr := range c.Spec.Credentials {
		s[i] = fmt.Sprintf("%s/%s (%s)", c.Slug(), cr.Name, cr.Provider)
	}
	return strings.Join(s, ", ")
}

// agentsUsing lists the agents of c whose CLI uses provider p (GitHub and
// header: every agent).
func agentsUsing(c *config.Company, p adapters.Provider) []string {
	var names []string
	for _, a := range c.Spec.Agents {
		if p == adapters.ProviderGitHub || p == adapters.ProviderHeader || slices.Contains(adapters.Providers(a.Adapter), p) {
			names = append(names, a.Name)
		}
	}
	return names
}
