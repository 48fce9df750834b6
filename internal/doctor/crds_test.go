package doctor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMissingKindHint: a kind the cluster does not serve is explained by
// the hint apply gives; Cilium's points at egress mode proxy, not standard.
func TestMissingKindHint(t *testing.T) {
	got := map[string]string{}
	for _, kind := range []string{"CiliumNetworkPolicy (cilium.io/v2)", "Widget (example.com/v1)"} {
		got[kind] = missingKindHint(kind)
	}
	want := map[string]string{
		"CiliumNetworkPolicy (cilium.io/v2)": `install Cilium (it serves cilium.io/v2 CiliumNetworkPolicy), or set Settings spec.egress.mode ` +
			`(or the company's egress.mode) to "proxy", the default, whose egress proxy enforces host names on any network plugin`,
		"Widget (example.com/v1)": "install the CRD or operator that provides it",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
