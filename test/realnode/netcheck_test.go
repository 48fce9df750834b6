//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/doctor"
	"github.com/pcsync/pcsync/internal/netprobe"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestDoctorProvesEnforcement: pcsync doctor's network check on the real
// node. Its probe pod (pcsync's image, hardened and labelled as the
// tenant's agents, on the real node) tries the kubelet port of its node and
// the API server's address. With the enforcer stopped (the plain CNI
// bridge, as kindnet or flannel) both connect: the check says
// NetworkPolicies are not enforced. With kube-router enforcing, the same
// probe is refused: the check passes. The probe pods are gone after each.
func TestDoctorProvesEnforcement(t *testing.T) {
	c := testcluster.Get(t)
	node := c.RealNode()
	p := pushImages(t)
	if !node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cs := c.Client()

	ns := c.Namespace(t, "netcheck", nil)
	i := strings.LastIndexByte(ns, '-')
	prefix, slug := ns[:i+1]+"t-", ns[i+1:]
	dir := t.TempDir()
	writeNetcheckConfig(t, dir, prefix, slug, p.Registry, node)
	m, err := loadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	applyTenant(ctx, t, c, m)
	tenant := m.Namespace(&m.Companies[0])
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{}) })
	api := apiServerSlice(ctx, t, c, node)

	opts := doctor.DefaultNetworkOptions()
	opts.Timeout = 3 * time.Minute
	// The harness's kubelet listens on a port of its own, not 10250.
	n, err := cs.CoreV1().Nodes().Get(ctx, node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts.KubeletPort = int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	check := func(phase string, want doctor.Verdict, wantOutcome netprobe.Outcome) {
		t.Helper()
		r := doctor.ProbeNetwork(ctx, cs, m, opts)
		t.Logf("%s: %s", phase, r.Message())
		if r.Verdict != want || r.Namespace != tenant {
			t.Fatalf("%s: verdict %s in %q, want %s in %s: %s", phase, r.Verdict, r.Namespace, want, tenant, r.Message())
		}
		got := map[string]netprobe.Outcome{}
		for _, tg := range r.Targets {
			got[tg.Target] = tg.Outcome
		}
		kubelet := net.JoinHostPort(node.NodeIP(), strconv.Itoa(opts.KubeletPort))
		for _, target := range []string{kubelet, api} {
			if target == "" {
				continue
			}
			if got[target] != wantOutcome {
				t.Errorf("%s: %s: %s, want %s (targets %v)", phase, target, got[target], wantOutcome, got)
			}
		}
		pods, err := cs.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: doctor.LabelProbe})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Errorf("%s: %d probe pods left", phase, len(pods.Items))
		}
	}

	// The control: nothing enforces the tenant's policies.
	if err := node.StopNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.StartNetworkPolicy(context.Background()); err != nil {
			t.Errorf("restart the enforcer for the next tests: %v", err)
		}
	})
	check("plain node", doctor.NotEnforced, netprobe.Connected)

	if err := node.StartNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	check("enforcing node", doctor.Enforced, netprobe.Refused)
}

// writeNetcheckConfig writes a config of one company whose agent runs on
// the real node, its images from registry.
func writeNetcheckConfig(t *testing.T, dir, prefix, slug, registry string, node *testcluster.RealNode) {
	t.Helper()
	tol := node.Toleration()
	sel, _ := json.Marshal(node.NodeSelector())
	files := map[string]string{
		"settings.yaml": fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n"+
			"  namespacePrefix: %s\n  images: {registry: %s}\n"+
			"  defaults:\n    limitRange: {min: {cpu: 10m, memory: 16Mi}}\n", prefix, registry),
		"acme.yaml": fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n  agents:\n"+
			"    - {name: pinned, adapter: claude_local, nodeSelector: %s, tolerations: [{key: %q, operator: %s, effect: %s}]}\n",
			slug, slug, sel, tol.Key, tol.Operator, tol.Effect),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// apiServerSlice makes the EndpointSlice default/kubernetes name where the
// node's pods reach the API server (node.APIServerHost: the harness's
// forwarder on the pod bridge's gateway), as a real control plane
// publishes its address, unless one exists with an address a pod can
// reach; it returns that target ("" when the harness has none).
func apiServerSlice(ctx context.Context, t *testing.T, c *testcluster.Cluster, node *testcluster.RealNode) string {
	t.Helper()
	host, port := node.APIServerHost()
	if host == "" {
		return ""
	}
	slices := c.Client().DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	if s, err := slices.Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		t.Logf("EndpointSlice default/kubernetes exists already (%v): left as it is", s.Endpoints)
		return ""
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	_, err = slices.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "netcheck-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(p))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slices.Delete(context.Background(), "kubernetes", metav1.DeleteOptions{}) })
	return net.JoinHostPort(host, port)
}
