// Command fleet writes a synthetic fleet of companies, the config
// directory that the fleet benchmark (test/fleet) applies and runs against:
//
//	go run ./hack/fleet -out DIR [-companies 1000] [-agents 3] [-mode proxy] [-prefix f1000-]
//
// Each company has its own agents (adapters in turn), host names, CIDR and
// ServiceAccount annotation (pkg/config/configtest.WriteFleet).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pcsync/pcsync/pkg/config/configtest"
)

func main() {
	out := flag.String("out", "", "the directory to write (created)")
	o := configtest.FleetOptions{}
	flag.IntVar(&o.Companies, "companies", 1000, "how many companies")
	flag.IntVar(&o.AgentsPerCompany, "agents", 3, "agents per company")
	flag.StringVar(&o.Mode, "mode", "proxy", "the egress mode: standard, proxy or cilium")
	flag.StringVar(&o.NamespacePrefix, "prefix", "", "the tenants' namespace prefix (default: the schema's)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "fleet: -out DIR is required")
		os.Exit(2)
	}
	if err := configtest.WriteFleet(*out, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d companies of %d agents (egress mode %s) in %s\n", o.Companies, o.AgentsPerCompany, o.Mode, *out)
}
