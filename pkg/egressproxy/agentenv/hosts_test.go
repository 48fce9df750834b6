package agentenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestHostsAliases(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "paperclip-server", Namespace: "paperclip"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: "paperclip"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
	)
	h := NewHosts(cs)
	looked := 0
	h.lookup = func(_ context.Context, host string) ([]string, error) {
		looked++
		if host == "paperclip.example.com" {
			return []string{"203.0.113.9", "203.0.113.7"}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, tc := range []struct {
		name, url string
		want      []corev1.HostAlias
		wantErr   string
	}{
		{"a Service's name", "http://paperclip-server.paperclip.svc:3100",
			[]corev1.HostAlias{{IP: "10.96.0.20", Hostnames: []string{"paperclip-server.paperclip.svc"}}}, ""},
		{"with the cluster domain", "http://paperclip-server.paperclip.svc.cluster.local:3100/api",
			[]corev1.HostAlias{{IP: "10.96.0.20", Hostnames: []string{"paperclip-server.paperclip.svc.cluster.local"}}}, ""},
		{"another name, by the resolver", "https://paperclip.example.com",
			[]corev1.HostAlias{{IP: "203.0.113.7", Hostnames: []string{"paperclip.example.com"}}, {IP: "203.0.113.9", Hostnames: []string{"paperclip.example.com"}}}, ""},
		{"an address needs none", "http://10.0.0.5:3100", nil, ""},
		{"an IPv6 address needs none", "http://[fd00::5]:3100", nil, ""},
		{"no URL", "", nil, ""},
		{"a missing Service", "http://nope.paperclip.svc:3100", nil, `Service/paperclip/nope: services "nope" not found`},
		{"a headless Service", "http://headless.paperclip.svc:3100", nil, "Service/paperclip/headless: no ClusterIP"},
		{"an unknown name", "http://paperclip.invalid", nil, "host paperclip.invalid: no such host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.Aliases(context.Background(), tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("aliases (-want +got):\n%s", diff)
			}
		})
	}
	// Found addresses are kept: a second ask does not resolve again.
	before := looked
	if _, err := h.Aliases(context.Background(), "https://paperclip.example.com/x"); err != nil {
		t.Fatal(err)
	}
	if looked != before {
		t.Errorf("the resolver was asked again (%d times, was %d): found addresses are kept for a minute", looked, before)
	}
}

func TestNoClusterDNS(t *testing.T) {
	spec := corev1.PodSpec{
		DNSPolicy: corev1.DNSClusterFirst,
		DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"svc.cluster.local"}},
	}
	aliases := []corev1.HostAlias{{IP: "10.96.0.20", Hostnames: []string{"paperclip-server.paperclip.svc"}}}
	NoClusterDNS(&spec, aliases)
	want := corev1.PodSpec{
		DNSPolicy: corev1.DNSNone,
		DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"127.0.0.1"},
			Options:     []corev1.PodDNSConfigOption{{Name: "attempts", Value: ptr.To("1")}, {Name: "timeout", Value: ptr.To("1")}},
		},
		HostAliases: aliases,
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	aliases[0].IP = "changed"
	if spec.HostAliases[0].IP != "10.96.0.20" {
		t.Error("the pod's aliases share the caller's slice")
	}
}
