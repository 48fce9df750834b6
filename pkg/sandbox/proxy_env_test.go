package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// proxyIPs is a tenant namespace → proxy ClusterIP table: the answers the
// daemon's watch (agentenv.Addresses) gives.
type proxyIPs map[string]string

func (p proxyIPs) ClusterIP(ns string) (string, error) {
	if ip, ok := p[ns]; ok {
		return ip, nil
	}
	return "", errors.New("Service " + ns + "/paperclip-egress-proxy: the tenant has no egress proxy Service: the tenant is not applied")
}

// TestAddProxyEnv: an execute of a lease of a company in egress mode proxy
// gets the proxy's variables over its own; in another mode, or without
// the watch, nothing is added; a tenant without the Service fails the
// execute, naming it.
func TestAddProxyEnv(t *testing.T) {
	m := &config.Model{}
	m.Settings.Spec.Egress.Mode = config.EgressProxy
	m.Settings.Spec.Server.URL = "http://paperclip.paperclip.svc:3100"
	m.Companies = []config.Company{{}, {}}
	m.Companies[0].Metadata.Name = "acme"
	m.Companies[1].Metadata.Name = "initech"
	m.Companies[1].Spec.Egress.Mode = config.EgressStandard
	mgr := &Manager{opts: Options{ProxyAddresses: proxyIPs{"paperclip-acme": "10.0.0.42"}}, model: func() *config.Model { return m }}

	l := newLease(Record{ID: "l1", Namespace: "paperclip-acme", Company: "acme", Agent: "coder"})
	cmd := cmdclient.Command{Env: map[string]string{"HTTPS_PROXY": "http://elsewhere:1", "KEEP": "1"}}
	if err := mgr.addProxyEnv(l, &cmd); err != nil {
		t.Fatal(err)
	}
	proxy := "http://coder@10.0.0.42:3128"
	no := "paperclip.paperclip.svc,localhost,127.0.0.1,::1,.svc,.cluster.local,10.0.0.42"
	want := map[string]string{"KEEP": "1", "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": no,
		"https_proxy": proxy, "http_proxy": proxy, "no_proxy": no}
	if d := cmp.Diff(want, cmd.Env); d != "" {
		t.Errorf("env of an acme execute (-want +got):\n%s", d)
	}

	std := cmdclient.Command{}
	if err := mgr.addProxyEnv(newLease(Record{ID: "l2", Namespace: "paperclip-initech", Company: "initech"}), &std); err != nil || std.Env != nil {
		t.Errorf("standard mode: env %v, err %v; want nothing added", std.Env, err)
	}
	off := &Manager{model: func() *config.Model { return m }}
	none := cmdclient.Command{}
	if err := off.addProxyEnv(l, &none); err != nil || none.Env != nil {
		t.Errorf("no watch: env %v, err %v; want nothing added", none.Env, err)
	}

	m.Companies[1].Spec.Egress.Mode = ""
	err := mgr.addProxyEnv(newLease(Record{ID: "l3", Namespace: "paperclip-initech", Company: "initech"}), &cmdclient.Command{})
	if err == nil || !strings.Contains(err.Error(), "Service paperclip-initech/paperclip-egress-proxy") {
		t.Errorf("a proxy-mode tenant without its Service: err %v, want one naming the Service", err)
	}
}
