// Command coredns is CoreDNS as released, with only the plugins the real
// node's Corefile uses (internal/testing/testcluster, realnode_dns.go):
// errors, log, ready, kubernetes and template. Upstream's main links every
// plugin (cloud DNS providers, etcd, tracing), which takes minutes to build
// from a cold cache for nothing the tests use; the plugins and CoreDNS's own
// code are upstream's, picked the way upstream documents (plugin.cfg).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() { coremain.Run() }
