package render

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// TestEgressProxyAllowListArg: the allow-list render gives the proxy's
// command is one the proxy reads (allow.Parse), and holds the company's
// effective hosts (the cilium mode's) and its ports.
func TestEgressProxyAllowListArg(t *testing.T) {
	m, err := config.Load(context.Background(), "../../testdata/render/proxy-egress/config", config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, o := range out.Objects {
		if o.GetKind() == "Deployment" && o.GetName() == EgressProxyName {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, a := range cs[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		}
	}
	if len(args) < 3 || args[1] != "--allow-list" {
		t.Fatalf("proxy args %q: want egress-proxy --allow-list LIST …", args)
	}
	got, err := allow.Parse([]byte(args[2]))
	if err != nil {
		t.Fatal(err)
	}
	want := allow.List{Company: "globex", Hosts: egressHosts(m, &m.Companies[0]), Ports: []int{443, 8443}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the proxy's allow-list (-want +got):\n%s", d)
	}
}
