package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// privateRange is a range of addresses that an allowCidrs entry may reach
// only with spec.egress.allowPrivateCidrs: where a cluster's pods, nodes,
// services and the cloud metadata service answer.
type privateRange struct {
	prefix netip.Prefix
	// what names the addresses, as "reaches <what> addresses (<prefix>,
	// <note>)" says.
	what, note string
}

// privateRanges are the ranges allowCidrs may not reach without the
// opt-in, IPv4 then IPv6; IPv4-mapped IPv6 is the IPv4 ones written
// another way.
var privateRanges = []privateRange{
	{netip.MustParsePrefix("10.0.0.0/8"), "private", "RFC 1918"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private", "RFC 1918"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private", "RFC 1918"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)", "RFC 6598"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local", "the cloud metadata service's among them"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback", ""},
	{netip.MustParsePrefix("fc00::/7"), "unique local", "IPv6's private ones"},
	{netip.MustParsePrefix("fe80::/10"), "link-local", ""},
	{netip.MustParsePrefix("::1/128"), "loopback", ""},
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped", "IPv4's in IPv6 form"},
}

// privateReach says which addresses a CIDR reaches that allowCidrs may not
// without the opt-in ("covers every address", "reaches private addresses
// (10.0.0.0/8, RFC 1918)"), or "" when it reaches none.
func privateReach(p netip.Prefix) string {
	if p.Bits() == 0 {
		return "covers every address"
	}
	for _, r := range privateRanges {
		if r.prefix.Overlaps(p) {
			where := r.prefix.String()
			if r.note != "" {
				where += ", " + r.note
			}
			return fmt.Sprintf("reaches %s addresses (%s)", r.what, where)
		}
	}
	return ""
}

// egress checks the company's egress allowances: host names, and CIDRs
// that parse, have no host bits and, without allowPrivateCidrs, reach no
// private range.
func (k *checker) egress(d *document, c *Company) {
	for i, h := range c.Spec.Egress.AllowFQDNs {
		k.fqdn(d, keys("spec", "egress", "allowFqdns").with(index(i)), h)
	}
	for i, r := range c.Spec.Egress.AllowCIDRs {
		p := keys("spec", "egress", "allowCidrs").with(index(i))
		if l := locate(d.expr, p); l.found && kindOf(l.value) == "struct" {
			p = p.with(key("cidr"))
		}
		pfx, err := netip.ParsePrefix(r.CIDR)
		switch {
		case err != nil:
			k.errs.add(d.posIn(p, false), p.String(), "invalid CIDR %q: want an address and a prefix length such as 10.0.0.0/8", r.CIDR)
		case pfx != pfx.Masked():
			k.errs.add(d.posIn(p, false), p.String(), "CIDR %q has host bits set: write %s", r.CIDR, pfx.Masked())
		case c.Spec.Egress.AllowPrivateCIDRs:
		case pfx.Bits() == 0:
			k.errs.add(d.posIn(p, false), p.String(), "CIDR %q covers every address, the cluster's and the cloud metadata service's among them, "+
				"past the egress allow-list: name the hosts in allowFqdns instead (spec.egress.allowPrivateCidrs: true allows it anyway)", r.CIDR)
		default:
			if why := privateReach(pfx); why != "" {
				k.errs.add(d.posIn(p, false), p.String(), "CIDR %q %s, where a cluster's pods, nodes or services may answer: "+
					"write a public CIDR, or set spec.egress.allowPrivateCidrs: true to let agents reach it", r.CIDR, why)
			}
		}
	}
}

// privateCIDRWarnings warns of each company that sets allowPrivateCidrs,
// naming the allowCidrs entries it lets through. docs are the Company
// documents by slug.
func privateCIDRWarnings(m *Model, docs map[string]*document) []Warning {
	var out []Warning
	for i := range m.Companies {
		c := &m.Companies[i]
		if !c.Spec.Egress.AllowPrivateCIDRs {
			continue
		}
		var through []string
		for _, r := range c.Spec.Egress.AllowCIDRs {
			if p, err := netip.ParsePrefix(r.CIDR); err == nil && privateReach(p) != "" {
				through = append(through, r.CIDR)
			}
		}
		pos := c.Source
		if d := docs[c.Metadata.Name]; d != nil {
			pos = d.posIn(keys("spec", "egress", "allowPrivateCidrs"), true)
		}
		msg := fmt.Sprintf("company %q: allowPrivateCidrs lets its agents reach %s directly, where a cluster's pods, nodes, services or metadata service may answer",
			c.Metadata.Name, strings.Join(through, ", "))
		if len(through) == 0 {
			msg = fmt.Sprintf("company %q: allowPrivateCidrs is set, but no allowCidrs entry needs it: remove it", c.Metadata.Name)
		}
		out = append(out, Warning{Pos: pos, Field: "spec.egress.allowPrivateCidrs", Message: msg})
	}
	return out
}
