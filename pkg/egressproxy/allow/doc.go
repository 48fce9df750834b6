// Package allow is the allow-list of a tenant's egress proxy: the JSON
// pcsync render passes to the proxy's command (List) and the host
// patterns it holds (Pattern), matched as Cilium's toFQDNs matchPattern
// matches them, so that a company's hosts mean the same in egress mode
// cilium and in egress mode proxy.
//
// Pattern syntax (Cilium's matchPattern):
//
//	api.example.com     that name only (what matchName would say)
//	*.example.com       one label before example.com: a.example.com, not
//	                    example.com, not a.b.example.com
//	api-*.example.com   "*" within a label: zero or more of [-a-z0-9_]
//	**.example.com      one or more labels before example.com: a.example.com
//	                    and a.b.example.com, not example.com
//
// Names are compared in lower case, without a trailing dot. A wildcard
// stands in the first label only, and what follows it must be a registrable
// domain or a name under one, never a public suffix alone ("*", "*.com",
// "*example.com", "*.co.uk" and "api.*.com" are refused: their names belong
// to anyone; egress mode standard is the explicit way to allow every host on
// 443). Public suffixes are those of ICANN's section of the Public Suffix
// List (golang.org/x/net/publicsuffix), and any single label.
//
// The package has no dependency beyond the standard library, the YAML
// decoder and publicsuffix, so that config validation and render can use it.
package allow
