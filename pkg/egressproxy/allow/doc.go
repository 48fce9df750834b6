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
// Names are compared in lower case, without a trailing dot. A pattern of
// wildcards only ("*", "**") would allow every public host: it is refused
// (egress mode standard is the explicit way to allow every host on 443).
//
// The package has no dependency beyond the standard library and the YAML
// decoder, so that config validation and render can use it.
package allow
