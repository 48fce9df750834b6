package config

import "slices"

// Suspended reports whether the company's spec.suspend stops its
// reconcile: the daemon neither applies nor prunes its tenant and starts
// none of its runs or sandbox leases (those going finish).
func (c *Company) Suspended() bool { return c.Spec.Suspend }

// Unsuspended returns m without its suspended companies (m itself when
// none is). The result shares m's documents; neither may be changed.
func Unsuspended(m *Model) *Model {
	return m.Only(func(c *Company) bool { return !c.Suspended() })
}

// SuspendedNamespaces returns the tenant namespaces of m's suspended
// companies, sorted: what the daemon keeps as they are, unpruned.
func SuspendedNamespaces(m *Model) []string {
	var out []string
	for i := range m.Companies {
		if c := &m.Companies[i]; c.Suspended() {
			out = append(out, m.Namespace(c))
		}
	}
	slices.Sort(out)
	return out
}

// Only returns m with only the companies keep keeps (m itself when it
// keeps them all). The result shares m's documents; neither may be
// changed.
func (m *Model) Only(keep func(c *Company) bool) *Model {
	if m == nil || !slices.ContainsFunc(m.Companies, func(c Company) bool { return !keep(&c) }) {
		return m
	}
	out := *m
	out.Companies = make([]Company, 0, len(m.Companies))
	for i := range m.Companies {
		if keep(&m.Companies[i]) {
			out.Companies = append(out.Companies, m.Companies[i])
		}
	}
	return &out
}
