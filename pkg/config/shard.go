package config

import (
	"fmt"
	"slices"
)

// LabelShard, in a Company's metadata.labels, names the shard whose daemon
// (pcsync daemon --shard) reconciles the company and runs its agents, the
// way Flux shards its controllers; a daemon without --shard serves the
// companies that name none. Each shard has a leader Lease and an ApplySet
// of its own (Shard.Name), and a spool per deployment.
const LabelShard = "pcsync.io/shard"

// Shard is the shard the company names (LabelShard), "" for none.
func (c *Company) Shard() Shard { return Shard(c.Metadata.Labels[LabelShard]) }

// Shard is the part of a fleet one daemon serves: the companies whose
// LabelShard is its name; "" serves those that name none.
type Shard string

// Serves reports whether s serves company c.
func (s Shard) Serves(c *Company) bool { return c.Shard() == s }

// String names s in messages: `shard "blue"`, or `no shard` for "" (the
// companies that name none).
func (s Shard) String() string {
	if s == "" {
		return "no shard"
	}
	return fmt.Sprintf("shard %q", string(s))
}

// Name is the default name of s's Lease and ApplySet for base: base for
// "", else base-<s>.
func (s Shard) Name(base string) string {
	if s == "" {
		return base
	}
	return base + "-" + string(s)
}

// Model returns m with only the companies s serves (m itself when it
// serves them all). The result shares m's documents; neither may be
// changed.
func (s Shard) Model(m *Model) *Model {
	return m.Only(s.Serves)
}

// Elsewhere returns the tenant namespaces of m's companies that other
// shards serve, sorted: what s hands over and must never prune.
func (s Shard) Elsewhere(m *Model) []string {
	var out []string
	for i := range m.Companies {
		if c := &m.Companies[i]; !s.Serves(c) {
			out = append(out, m.Namespace(c))
		}
	}
	slices.Sort(out)
	return out
}

// Others returns the shards other than s that m's companies name, sorted
// ("" among them when a company names none).
func (s Shard) Others(m *Model) []Shard {
	var out []Shard
	for i := range m.Companies {
		if o := m.Companies[i].Shard(); o != s && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// Refusal is why s starts no run of company c, a company of another shard:
// it names both shards and where c's runs go.
func (s Shard) Refusal(c *Company) string {
	return fmt.Sprintf("company %q is in %s (metadata.labels %s) and this daemon serves %s: "+
		"write its run requests to the spool of the daemon of %s", c.Slug(), c.Shard(), LabelShard, s, c.Shard())
}
