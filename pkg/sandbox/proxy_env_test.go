package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// proxyIPs is a tenant namespace → proxy ClusterIP table: the answers the
// daemon's watch (agentenv.Addresses) gives.
type proxyIPs map[string]string

func (p proxyIPs) ClusterIP(ns string) (string, error) {
	if ip, ok := p[ns]; ok {
		return ip, nil
	}
	return "", errors.New("Service/" + ns + "/paperclip-egress-proxy: the tenant has no egress proxy Service: the tenant is not applied")
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

	l := newLease(leasepod.Record{ID: "l1", Namespace: "paperclip-acme", Company: "acme", Agent: "coder"})
	cmd := cmdclient.Command{Env: map[string]string{"HTTPS_PROXY": "http://elsewhere:1", "KEEP": "1"}}
	if err := mgr.addProxyEnv(context.Background(), l, &cmd); err != nil {
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
	if err := mgr.addProxyEnv(context.Background(), newLease(leasepod.Record{ID: "l2", Namespace: "paperclip-initech", Company: "initech"}), &std); err != nil || std.Env != nil {
		t.Errorf("standard mode: env %v, err %v; want nothing added", std.Env, err)
	}
	off := &Manager{model: func() *config.Model { return m }}
	none := cmdclient.Command{}
	if err := off.addProxyEnv(context.Background(), l, &none); err != nil || none.Env != nil {
		t.Errorf("no watch: env %v, err %v; want nothing added", none.Env, err)
	}

	m.Companies[1].Spec.Egress.Mode = ""
	err := mgr.addProxyEnv(context.Background(), newLease(leasepod.Record{ID: "l3", Namespace: "paperclip-initech", Company: "initech"}), &cmdclient.Command{})
	if err == nil || !strings.Contains(err.Error(), "Service/paperclip-initech/paperclip-egress-proxy") {
		t.Errorf("a proxy-mode tenant without its Service: err %v, want one naming the Service", err)
	}
}

// TestReplaceKeys: an execute of a lease of a company that declares an
// anthropic credential carries Paperclip's key in ANTHROPIC_API_KEY: the
// value is dropped, the lease's token and the proxy's route are sent
// instead, counted; the token is made once, its hash put on the lease's
// pod; an execute without a key variable is left as it is. (A fake
// clientset: the patch only; the real node's test proves the road.)
func TestReplaceKeys(t *testing.T) {
	m := &config.Model{}
	m.Settings.Spec.Egress.Mode = config.EgressProxy
	m.Companies = []config.Company{{}}
	m.Companies[0].Metadata.Name = "acme"
	m.Companies[0].Spec.Credentials = []config.Credential{{Name: "claude", Provider: adapters.ProviderAnthropic, Type: adapters.KeyAPIKey}}
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l1", Namespace: "paperclip-acme"}})
	rec := &recorder{}
	mgr := &Manager{cs: cs, opts: Options{ProxyAddresses: proxyIPs{"paperclip-acme": "10.0.0.42"}, Metrics: rec},
		model: func() *config.Model { return m }}
	l := newLease(leasepod.Record{ID: "l1", Namespace: "paperclip-acme", Company: "acme", Agent: "coder", AdapterType: "claude_local"})
	var tokens []string
	for range 2 {
		cmd := cmdclient.Command{Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-from-paperclip", "CLAUDE_CODE_OAUTH_TOKEN": "oauth", "KEEP": "1"}}
		if err := mgr.addProxyEnv(context.Background(), l, &cmd); err != nil {
			t.Fatal(err)
		}
		tok := cmd.Env["ANTHROPIC_API_KEY"]
		if !strings.HasPrefix(tok, "pcsync-run-") || cmd.Env["ANTHROPIC_BASE_URL"] != "http://10.0.0.42:3128/credentials/claude" ||
			cmd.Env["KEEP"] != "1" || cmd.Env["CLAUDE_CODE_OAUTH_TOKEN"] != "" {
			t.Errorf("the execute's env: %v", cmd.Env)
		}
		tokens = append(tokens, tok)
	}
	if tokens[0] != tokens[1] {
		t.Error("two executes of one lease got two tokens")
	}
	pod, err := cs.CoreV1().Pods("paperclip-acme").Get(context.Background(), "l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Annotations[agentpod.AnnotationTokenHash]; got != agentpod.TokenHash(tokens[0]) {
		t.Errorf("the lease pod's token hash %q, want the token's", got)
	}
	if diff := cmp.Diff([]string{"replaced acme 2", "replaced acme 2"}, rec.calls); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	plain := cmdclient.Command{Env: map[string]string{"KEEP": "1"}}
	if err := mgr.addProxyEnv(context.Background(), l, &plain); err != nil {
		t.Fatal(err)
	}
	if _, set := plain.Env["ANTHROPIC_API_KEY"]; set {
		t.Errorf("an execute without a key got one: %v", plain.Env)
	}
}
