package kubeexec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/introspect"
)

// TestBuildInheritsFromTheOwnPod: agent pods get pcsync's pull secrets
// (after the config's own) and DNS settings, unless Settings spec.inherit
// turns them off.
func TestBuildInheritsFromTheOwnPod(t *testing.T) {
	base := loadModel(t)
	ndots := "2"
	dns := &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}}}
	o := BuildOptions{Inherited: introspect.Inheritance{ImagePullSecrets: []string{"mirror"}, DNSConfig: dns, DNSPolicy: corev1.DNSNone}}

	type got struct {
		PullSecrets []string
		DNSPolicy   corev1.DNSPolicy
		DNSConfig   *corev1.PodDNSConfig
	}
	build := func(inherit config.Inherit) got {
		t.Helper()
		m := *base
		m.Settings.Spec.Inherit = inherit
		r := parseRun(t, &m, "/spool", builderCases[0].file, builderCases[0].body)
		in, err := NewInput(r, testEnviron, o)
		if err != nil {
			t.Fatal(err)
		}
		job, err := BuildJob(in, o)
		if err != nil {
			t.Fatal(err)
		}
		spec := job.Spec.Template.Spec
		var g got
		for _, s := range spec.ImagePullSecrets {
			g.PullSecrets = append(g.PullSecrets, s.Name)
		}
		g.DNSPolicy, g.DNSConfig = spec.DNSPolicy, spec.DNSConfig
		return g
	}
	acme, ok := base.Company("acme")
	if !ok {
		t.Fatal("testdata/config has no company acme")
	}
	own := base.ImagePullSecrets(acme)
	all := got{PullSecrets: append(append([]string(nil), own...), "mirror"), DNSPolicy: corev1.DNSNone, DNSConfig: dns}
	if diff := cmp.Diff(all, build(config.Inherit{ImagePullSecrets: true, DNSConfig: true})); diff != "" {
		t.Errorf("inherit both (-want +got):\n%s", diff)
	}
	none := got{PullSecrets: own}
	if diff := cmp.Diff(none, build(config.Inherit{})); diff != "" {
		t.Errorf("inherit nothing (-want +got):\n%s", diff)
	}
}

// TestBuildNoClusterDNSInProxyMode: a run with the egress proxy's variables
// (egress mode proxy) gets no cluster DNS, whatever it would inherit, and
// the server's address in /etc/hosts; a run without them keeps its DNS.
func TestBuildNoClusterDNSInProxyMode(t *testing.T) {
	base := loadModel(t)
	m := *base
	m.Settings.Spec.Inherit = config.Inherit{DNSConfig: true}
	dns := &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"}}
	o := BuildOptions{Inherited: introspect.Inheritance{DNSConfig: dns, DNSPolicy: corev1.DNSNone}}
	aliases := []corev1.HostAlias{{IP: "10.96.0.20", Hostnames: []string{"paperclip-server.paperclip.svc"}}}
	for _, tc := range []struct {
		name    string
		proxy   map[string]string
		want    corev1.DNSPolicy
		servers []string
		aliases []corev1.HostAlias
	}{
		{"proxy mode", map[string]string{"HTTPS_PROXY": "http://10.96.0.9:3128"}, corev1.DNSNone, []string{"127.0.0.1"}, aliases},
		{"no proxy", nil, corev1.DNSNone, []string{"10.0.0.53"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRun(t, &m, "/spool", builderCases[0].file, builderCases[0].body)
			in, err := NewInput(r, testEnviron, o)
			if err != nil {
				t.Fatal(err)
			}
			in.Proxy, in.HostAliases = tc.proxy, aliases
			job, err := BuildJob(in, o)
			if err != nil {
				t.Fatal(err)
			}
			spec := job.Spec.Template.Spec
			if spec.DNSPolicy != tc.want || spec.DNSConfig == nil || !cmp.Equal(spec.DNSConfig.Nameservers, tc.servers) {
				t.Errorf("dnsPolicy %s, config %+v; want %s with nameservers %v", spec.DNSPolicy, spec.DNSConfig, tc.want, tc.servers)
			}
			if diff := cmp.Diff(tc.aliases, spec.HostAliases); diff != "" {
				t.Errorf("hostAliases (-want +got):\n%s", diff)
			}
		})
	}
}
