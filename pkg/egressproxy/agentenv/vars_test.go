package agentenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// TestVars: the proxy URL names the agent and the ClusterIP, NO_PROXY the
// server's host, the allowed CIDRs and cluster-local names; both cases of
// each; no secret can get in (the inputs hold none).
func TestVars(t *testing.T) {
	m := &config.Model{}
	m.Settings.Spec.Server.URL = "http://paperclip.paperclip-system.svc:8080"
	c := &config.Company{}
	c.Spec.Egress.AllowCIDRs = []config.CIDRRule{{CIDR: "10.20.0.0/16"}}
	got := Vars(m, c, "10.96.0.42", "coder")
	proxy := "http://coder@10.96.0.42:3128"
	no := "paperclip.paperclip-system.svc,10.20.0.0/16,localhost,127.0.0.1,::1,.svc,.cluster.local,10.96.0.42"
	want := map[string]string{
		"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": no,
		"https_proxy": proxy, "http_proxy": proxy, "no_proxy": no,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Vars (-want +got):\n%s", d)
	}
	if got := Vars(m, c, "10.96.0.42", "a b/c")["HTTPS_PROXY"]; got != "http://10.96.0.42:3128" {
		t.Errorf("an agent name that is no plain name: HTTPS_PROXY = %q, want no user info", got)
	}
	if got := Vars(m, c, "fd00::1", "coder")["HTTPS_PROXY"]; got != "http://coder@[fd00::1]:3128" {
		t.Errorf("an IPv6 ClusterIP: HTTPS_PROXY = %q", got)
	}
}
