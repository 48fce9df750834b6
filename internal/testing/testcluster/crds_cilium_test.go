package testcluster

import (
	"os"
	"regexp"
	"testing"
)

// TestCiliumVersionMatchesScript: hack/crds/cilium.sh caches the CRD of
// the Cilium release InstallCiliumCRD reads.
func TestCiliumVersionMatchesScript(t *testing.T) {
	b, err := os.ReadFile("../../../hack/crds/cilium.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CILIUM_VERSION="\$\{CILIUM_VERSION:-([^}]+)\}"$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/crds/cilium.sh sets no default CILIUM_VERSION")
	}
	if got := string(m[1]); got != CiliumVersion {
		t.Errorf("hack/crds/cilium.sh caches Cilium %s, the harness reads %s", got, CiliumVersion)
	}
}
